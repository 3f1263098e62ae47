"""Running the items of a session, from specs to results (results/); docs/architecture.md maps the modules."""
