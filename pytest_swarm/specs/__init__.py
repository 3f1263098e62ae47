"""What to boot, what to send, and how: plain frozen dataclasses, validated on creation.

Specs are hashable on purpose: the plugin keys its server pool and its ordering of
items on them, so two markers that name the same server share one boot. The engine
specs (LlamaCppSpec, VllmSpec, ...) subclass ServerSpec in their engine's module
(engines/); this module holds what every stage shares and imports nothing heavier
than the figure names.
"""

from ..core.errors import NoServerForHardware, SpecError
from .marker_config import (
    CAPACITY_LEVELS,
    CONCURRENCY,
    DEFAULT_INTERACTIVE,
    RATE,
    WORKERS,
    Axis,
    CapacityRange,
    Criteria,
    MarkerConfig,
    PairBudget,
    PairingAsked,
    PairingMode,
    PlannedItem,
    Reference,
    in_units,
)
from .server import (
    EMBEDDED_MODEL,
    ServerChoice,
    ServerSpec,
    gpus_for,
    launch_fields,
    optional_bool,
    optional_fraction,
    optional_positive,
    optional_str,
    pick,
    positive_int,
    str_tuple,
)
from .workload import (
    ARRIVALS,
    CACHE_MODES,
    REASONING_MODES,
    TOOL_CHOICES,
    AgentTraffic,
    Conversation,
    Load,
    OpenLoop,
    Pause,
    Trace,
    TraceRequest,
    Workload,
)

__all__ = [
    "ARRIVALS",
    "CACHE_MODES",
    "CAPACITY_LEVELS",
    "CONCURRENCY",
    "DEFAULT_INTERACTIVE",
    "EMBEDDED_MODEL",
    "RATE",
    "REASONING_MODES",
    "TOOL_CHOICES",
    "WORKERS",
    "AgentTraffic",
    "Axis",
    "CapacityRange",
    "Conversation",
    "Criteria",
    "Load",
    "MarkerConfig",
    "NoServerForHardware",
    "OpenLoop",
    "PairBudget",
    "PairingAsked",
    "PairingMode",
    "Pause",
    "PlannedItem",
    "Reference",
    "ServerChoice",
    "ServerSpec",
    "SpecError",
    "Trace",
    "TraceRequest",
    "Workload",
    "gpus_for",
    "in_units",
    "launch_fields",
    "optional_bool",
    "optional_fraction",
    "optional_positive",
    "optional_str",
    "pick",
    "positive_int",
    "str_tuple",
]
