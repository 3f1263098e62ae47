"""Fixtures shared by the tests that start real servers."""

from __future__ import annotations

import uuid

import psutil
import pytest

TAG = "PYTEST_SWARM_TEST_TAG"


@pytest.fixture
def tagged(monkeypatch: pytest.MonkeyPatch) -> str:
    """A tag in the environment that every server the run starts inherits."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(TAG, tag)
    return tag


def servers_left(tag: str) -> list[psutil.Process]:
    left = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(TAG) == tag:
                left.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return left
