"""The server pool's reuse: a capacity search over workers keeps the daemons running and boots or stops only the
difference; everything else boots whole. The engine's launch is replaced by a recorder, so what is counted is the
pool's own doing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_swarm import Server
from pytest_swarm.core.errors import BootError
from pytest_swarm.engines import pool as pool_module
from pytest_swarm.engines.pool import ServerPool
from pytest_swarm.settings import LaunchSettings, LockSettings


@dataclass
class FakeProcess:
    pid: int
    stopped: bool = False
    managed: bool = True

    def poll(self) -> int | None:
        return None

    def lost(self) -> list[str]:
        return []


@dataclass
class FakeServer:
    index: int
    process: FakeProcess = field(default_factory=lambda: FakeProcess(0))

    def stop(self) -> None:
        self.process.stopped = True


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[FakeServer]:
    """Every server the pool launched, in order; index 13 fails to boot."""
    servers: list[FakeServer] = []

    def launch(spec: Any, settings: Any, index: int) -> FakeServer:
        if index == 13:
            raise BootError("server 13 did not come up")
        servers.append(FakeServer(index, FakeProcess(1000 + len(servers))))
        return servers[-1]

    monkeypatch.setattr(pool_module, "launch", launch)
    return servers


def _pool(tmp_path: Path) -> ServerPool:
    return ServerPool(LaunchSettings(tmp_path), LockSettings(tmp_path / "locks"))


def test_resizing_keeps_the_running_servers_and_boots_or_stops_only_the_difference(
    tmp_path: Path, launched: list[FakeServer]
) -> None:
    pool, spec = _pool(tmp_path), Server.llamacpp(slots=1)
    one = pool.get(spec, 1, resize=True)
    four = pool.get(spec, 4, resize=True)
    assert [s.index for s in launched] == [0, 1, 2, 3], "three more booted, at the indices after the first"
    assert four[0] is one[0]
    two = pool.get(spec, 2, resize=True)
    assert two == four[:2] and [s.process.stopped for s in launched] == [False, False, True, True]
    assert pool.pids() == [1000, 1001]
    three = pool.get(spec, 3, resize=True)
    assert three[:2] == two and [s.index for s in launched] == [0, 1, 2, 3, 2]
    pool.stop()
    assert all(s.process.stopped for s in launched)


def test_without_resize_another_count_boots_every_server_again(tmp_path: Path, launched: list[FakeServer]) -> None:
    pool, spec = _pool(tmp_path), Server.llamacpp(slots=1)
    first = pool.get(spec, 2)
    assert pool.get(spec, 2) is first, "the same count is reused"
    pool.get(spec, 3)
    assert [s.index for s in launched] == [0, 1, 0, 1, 2] and all(s.process.stopped for s in launched[:2])
    pool.get(spec, 3, fresh=True, resize=True)
    assert len(launched) == 8, "fresh boots whole, resize or not"
    pool.stop()


def test_a_failed_resize_stops_every_server_and_the_spec_is_not_booted_again(
    tmp_path: Path, launched: list[FakeServer]
) -> None:
    pool, spec = _pool(tmp_path), Server.llamacpp(slots=1)
    pool.get(spec, 12, resize=True)
    with pytest.raises(BootError, match=r"server 13 did not come up \(1 of 4 servers failed to boot"):
        pool.get(spec, 16, resize=True)
    assert all(s.process.stopped for s in launched) and pool.pids() == []
    with pytest.raises(BootError, match="server 13"):
        pool.get(spec, 1, resize=True)
    assert len(launched) == 15
