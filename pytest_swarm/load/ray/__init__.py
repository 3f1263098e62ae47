"""The Ray backend (the `ray` extra): servers and load generators placed on a Ray cluster's nodes. Imported only with
--swarm-ray."""
