"""Private helpers with no knowledge of the plugin: files written whole or not at all, credentials kept out of
logs, and CPU affinity. Not part of the public API."""
