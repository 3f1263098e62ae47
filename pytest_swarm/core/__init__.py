"""What every stage shares: the error root, the round records, the figures' names and the limits. Imports no plugin."""
