"""Engines: the interface (engine.py), one module per engine (its spec, constructor, install check and launcher,
registered through the `pytest_swarm.engines` entry points), the registry that finds them, and server processes."""
