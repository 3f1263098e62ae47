"""The gate: statistics on log-scale samples (statistics.py, sequential.py), A/B pairs and the canary's
normalisation, capacity claims, trends and change points over history, and the verdict of an item (verdict.py). The
baselines it is given are read and written by stores/."""
