"""The `swarm` marker: its table of arguments (table.py, the one source of the generated reference), the checks of
each argument (arguments.py, workload_args.py, agent_args.py), and parse.py, which turns a marker and the options
into a MarkerConfig (specs/) or an error that names the argument."""
