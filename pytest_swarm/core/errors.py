"""The root of every error pytest-swarm raises on purpose: `except SwarmError` catches them all. Each keeps its
built-in base (ValueError, RuntimeError, TimeoutError)."""


class SwarmError(Exception):
    """An error pytest-swarm raised on purpose; its message says what and where."""


class SpecError(SwarmError, ValueError):
    """A spec or a marker argument that cannot describe a real experiment."""


class NoServerForHardware(SpecError):
    """A Server.pick with no pattern for this machine: its items skip (fail under --swarm-require-engines). `config` is
    the rest of the marker's config, so a sweep still shows its items."""

    def __init__(self, message: str, config: object = None) -> None:
        """`config` is the resolved MarkerConfig, held as an object: errors sit below the specs they describe."""
        super().__init__(message)
        self.config = config


class ToolSchemaError(SpecError):
    """A tool or a response schema the marker cannot offer: the message names the entry and what is wrong with it."""


class EngineMissing(SwarmError, RuntimeError):
    """The executable or package the spec's engine needs is not here; the message says what to install."""


class BootError(SwarmError, RuntimeError):
    """A server that could not be brought up; the message carries what its log said."""


class BuildError(SwarmError, RuntimeError):
    """An engine release that could not be installed from the package index; the message carries pip's reason."""


class ReleaseNotFound(BuildError):
    """A release the package index does not hold: a name to correct, never a build to measure around."""


class SleepError(SwarmError, RuntimeError):
    """A server that would not sleep or wake: which server (label, base URL), what was sent, what came back."""


class LockTimeout(SwarmError, TimeoutError):
    """The GPU stayed taken longer than the caller would wait."""


class TokenizeFailed(SwarmError, RuntimeError):
    """The server's tokenize route did not answer as its engine documents: the text it failed on is named."""


class DescriptorLimit(SwarmError, RuntimeError):
    """A round would hold more connections than a process may open: refused up front rather than failing request by
    request."""


class LoadGenError(SwarmError, RuntimeError):
    """A load generator that failed to start, does not share the parent's clock, or was lost."""


class RequestsBeyondContext(SwarmError, ValueError):
    """Requests of a trace that cannot fit the server's context: refused before the round, each named by its line."""


class ClusterError(SwarmError, RuntimeError):
    """The cluster cannot be joined, or it would make this run leave loopback."""


class PlacementError(SwarmError, RuntimeError):
    """The cluster cannot hold what the item asks for."""


class ClockError(SwarmError, RuntimeError):
    """A node whose clock offset cannot be bounded, or that claims the driver's clock but does not read it."""


class AddedFigureError(SwarmError, ValueError):
    """A figure a pytest_swarm_figures implementation returned that cannot join the item's figures."""


class BaselineError(SwarmError, ValueError):
    """A baseline file that cannot be trusted; the message names the file, the line and the key."""


class CompareError(SwarmError, ValueError):
    """A file given to `compare` that is not a saved run: the message names it and says what is wrong."""


class HistoryError(SwarmError):
    """A store that cannot be opened, read or written; the message names it with its credentials redacted."""
