"""The gate: statistics on log-scale samples, the verdict of an item, the baseline store."""
