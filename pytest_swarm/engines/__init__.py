"""Engines: one module per engine (its spec, constructor, install check and launcher), the registry, and server processes."""
