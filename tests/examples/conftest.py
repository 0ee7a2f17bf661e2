"""Fixtures for the example tests: a fresh game world per test, on each backend: a temporary
SQLite file, and a PostgreSQL schema of the test's own."""

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


@pytest.fixture(params=["sqlite", "postgres"])
def db_path(request: pytest.FixtureRequest, tmp_path) -> str:
    """Where the world lives: a SQLite file, or a PostgreSQL URL (the store's tables and the
    world's in the test's own schema)."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_store_url"))
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
        world.close_database()


@pytest.fixture
def view(db_path: str, system: ActorSystem) -> WorldView:
    return WorldView()
