"""The gate: statistics on log-scale samples, A/B pairs, the canary, capacity claims, history trends and each item's
verdict. It never reads a file: stores/ does."""
