"""What an item ends with (item.py: its figures, gate verdict, capacity, reference side) and what a sweep of items
adds across them (sweeps.py: speedup and contention against the single-agent item). The report reads these."""
