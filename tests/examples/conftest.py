"""Fixtures for the example tests: a fresh game world on a temporary SQLite file per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors import ActorSystem
from actors.testing import VirtualClock
from examples import world

from .support import CHARACTERS, ITEMS, RESOURCES, T, WorldView


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def db_path(tmp_path) -> str:
    return str(tmp_path / "world.db")


@pytest.fixture
def system(db_path: str, clock: VirtualClock) -> Iterator[ActorSystem]:
    world.use_database(db_path)
    s = ActorSystem(db_path, clock=clock)
    try:
        world.init_world(s, CHARACTERS, ITEMS, RESOURCES, timeout=T)
        yield s
    finally:
        s.shutdown()


@pytest.fixture
def view(db_path: str, system: ActorSystem) -> WorldView:
    return WorldView(db_path)
