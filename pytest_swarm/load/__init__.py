"""The load stage: prompts, agents on an event loop, load-generator processes, an item's rounds."""
