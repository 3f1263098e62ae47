"""Where results are kept between runs: the baselines YAML, and the history store every run appends to."""
