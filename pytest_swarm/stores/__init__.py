"""Where results are kept between runs: the baselines YAML a stored-baseline item is gated against, and the history
store (SQLite or PostgreSQL) every run appends to. The statistics that read them are gate/."""
