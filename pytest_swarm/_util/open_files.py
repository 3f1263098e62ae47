"""The open-file limit: raised at the start and checked before a round, since a socket refused for want of
descriptors reads as the server's fault."""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

FLOOR = 64
"""Descriptors kept free beyond the streams and what the process already holds (pipes, logs, a probe's connection)."""
UNBOUNDED_SOFT = 1 << 20
"""The soft limit asked for where the hard one is unlimited (RLIM_INFINITY): Linux's default ceiling (nr_open)."""


@dataclass(frozen=True)
class Raised:
    """The soft limit before and after the start's raise, and the hard limit above it."""

    before: int
    soft: int
    hard: int
    error: str | None = None
    """Why the raise failed, where it did."""

    def header(self) -> str:
        """The report header's line."""
        hard = _shown(self.hard)
        if self.error is not None:
            return f"swarm: open-file limit {_shown(self.soft)} (hard {hard}); raising it failed: {self.error}"
        if self.soft > self.before:
            return f"swarm: open-file limit raised from {_shown(self.before)} to {_shown(self.soft)} (hard {hard})"
        return f"swarm: open-file limit {_shown(self.soft)} (hard {hard})"


def _shown(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else f"{limit:,}"


def _set_soft(soft: int, hard: int) -> str | None:
    """Set the soft limit; why not, if the system refused."""
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    except (ValueError, OSError) as exc:
        return str(exc)
    return None


def raise_soft_limit() -> Raised:
    """Raise this process's soft open-file limit to its hard limit (or to 2^20 where that is unlimited)."""
    before, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = UNBOUNDED_SOFT if hard == resource.RLIM_INFINITY else hard
    if before != resource.RLIM_INFINITY and before >= wanted:
        return Raised(before, before, hard)
    error = _set_soft(wanted, hard)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return Raised(before, soft, hard, error)


def open_now() -> int:
    """Descriptors this process holds now (0 where /proc does not say)."""
    try:
        return sum(1 for _ in Path("/proc/self/fd").iterdir())
    except OSError:
        return 0


def needed(streams: int) -> int:
    """Descriptors `streams` concurrent streams need: a socket each, a margin for unreleased ones, a floor."""
    return open_now() + streams + streams // 10 + FLOOR


def room_for(streams: int, where: str) -> str | None:
    """Make room for `streams` concurrent streams (`where`: whose); None when there is room, else why not, naming the
    limit."""
    need = needed(streams)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or need <= soft:
        return None
    unbounded = hard == resource.RLIM_INFINITY
    if (unbounded or need <= hard) and _set_soft(max(need, UNBOUNDED_SOFT) if unbounded else hard, hard) is None:
        return None
    return (
        f"{where} would hold {streams:,} streams at once, about {need:,} open files with what the process holds "
        f"already, above its open-file limit (soft {_shown(soft)}, hard {_shown(hard)}): raise the hard limit "
        "(`ulimit -Hn` as root, LimitNOFILE= for a systemd unit, --ulimit nofile= for Docker) or spread the agents "
        "over more load generators (generators=), each a process with a limit of its own"
    )


def limit_words() -> str:
    """The limit a failed connect ran into, for its failure message."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return f"the process's open-file limit, soft {_shown(soft)}, hard {_shown(hard)}: too many streams for one process"
