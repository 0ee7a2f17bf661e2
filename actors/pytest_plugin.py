"""pytest plugin (installed with actorflow): fixtures for testing your own workflows.

``workflow_system`` is an ``ActorSystem`` on a temporary SQLite file with a ``VirtualClock``
(``workflow_clock``), shut down after the test::

    def test_buff_expires(workflow_system, workflow_clock):
        ref = workflow_system.start(buff, 10)
        workflow_clock.advance(10)
        workflow_system.idle(timeout=10)
        assert ref.result(timeout=1) == {"stacks": 1}
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._clock import VirtualClock
from ._system import ActorSystem


@pytest.fixture
def workflow_clock() -> VirtualClock:
    """A virtual clock for the test's ActorSystem; move it with ``advance(seconds)``."""
    return VirtualClock()


@pytest.fixture
def workflow_db(tmp_path: Path) -> str:
    """Path of a fresh SQLite file for the test."""
    return str(tmp_path / "workflows.db")


@pytest.fixture
def workflow_system(workflow_db: str, workflow_clock: VirtualClock) -> Iterator[ActorSystem]:
    """An ActorSystem on a temporary file, driven by ``workflow_clock``."""
    system = ActorSystem(workflow_db, clock=workflow_clock)
    try:
        yield system
    finally:
        system.shutdown()
