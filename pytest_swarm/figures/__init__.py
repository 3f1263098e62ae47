"""Figures: the pure functions from records to an ItemFigures (per request, per server, per agent, per worker),
the summary of distributions, and the checks that a round measured what it claims. Their names and directions, and
the limits they are held to, are core/."""
