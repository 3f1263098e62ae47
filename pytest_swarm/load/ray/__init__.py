"""The Ray backend (the `ray` extra): servers and load generators placed on a Ray cluster's nodes.

Imported only with --swarm-ray: nothing here loads unless a run asks for a cluster.
cluster.py connects (and keeps a loopback cluster on loopback), placement.py turns an
item into Ray resource bundles, actor.py is what runs on a node (a server, its load
generator, its memory sampler), bridge.py carries the generator protocol between the
driver and the nodes on one time line (clock.py), and backend.py ties them to the session.
"""
