"""Running the items of a session: measuring.py walks them in order, search.py decides how many samples an item
needs (A/B pairs, a canary, boots), capacity.py plays a capacity search level by level, stage.py boots the servers
and places the load, sides.py measures one side of an item. It takes specs and returns results (results/)."""
