"""The Ray backend (the `ray` extra): servers and load generators placed on a Ray cluster's nodes.

Imported only with --swarm-ray. cluster.py connects, placement.py makes resource bundles, actor.py runs on a node,
bridge.py and clock.py carry the generator protocol on one time line, backend.py ties them to the session."""
