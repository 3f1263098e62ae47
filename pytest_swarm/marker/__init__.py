"""The `swarm` marker: its table of arguments, their checks, and parse.py, which makes a MarkerConfig or an error
that names the argument."""
