"""Figures: pure functions from records to an ItemFigures, and the checks that a round measured what it claims."""
