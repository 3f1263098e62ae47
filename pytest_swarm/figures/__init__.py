"""Figures: their names and directions, hard limits, and the pure functions from records to a ItemFigures."""
