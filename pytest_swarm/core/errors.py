"""The root of every error pytest-swarm raises on purpose.

`except SwarmError` catches them all (a bad marker argument, a server that would not
boot, an engine that is not installed, a broken baseline file, an unreachable results
store, a load generator or Ray cluster that failed) and nothing else. Each keeps the
built-in base it had (ValueError, RuntimeError, TimeoutError), so code that caught
those still does.
"""


class SwarmError(Exception):
    """An error pytest-swarm raised on purpose; its message says what and where."""
