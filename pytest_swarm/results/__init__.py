"""What an item ends with (item.py: figures, verdict, capacity, reference side) and what a sweep adds across items
(sweeps.py: speedup and contention against C=1). The report reads these."""
