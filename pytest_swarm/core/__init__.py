"""What every stage shares and nothing else defines: the error root, the records a round leaves, the figures'
names and directions, and the limits an item's figures are held to. It imports nothing of the plugin."""
