"""Fixtures of the runtime's behaviour tests: every test that takes ``db`` runs once on SQLite and
once on PostgreSQL."""

from __future__ import annotations

import threading

import pytest

from actors import ActorSystem
from actors.testing import VirtualClock

from . import flows
from .runtime_support import Inside, _chain


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def fresh_flows() -> None:
    """Each test starts with the flows' counters empty (a test runs once per backend)."""
    with flows.CALLS_LOCK:
        flows.CALLS.clear()
    flows.FLAKY_FAILS.clear()
    flows.REDUCER_FAILS.clear()
    flows.GATE.clear()
    flows.LATER.clear()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path) -> str:
    """Where the system runs: a SQLite file, or a PostgreSQL schema of the test's own."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_store_url"))
    return str(tmp_path / "wf.db")


@pytest.fixture
def system(db, clock):
    s = ActorSystem(db, clock=clock)
    yield s
    s.shutdown()


@pytest.fixture
def held_commits(monkeypatch):
    """One actor thread, and every step's commit held until the test lets it through."""
    from persistence import Promise

    Inside.one_actor_thread(monkeypatch)
    held: list = []
    lock = threading.Lock()

    def hold(system, only: str | None = None):
        inside = Inside(system)
        real = inside.store_method("submit_step")

        def submit_step(sw, **kw):
            if only is not None and sw.workflow_id != only:
                return real(sw, **kw)
            p = Promise()
            with lock:
                held.append((sw, p, real))
            return p

        inside.patch_store("submit_step", submit_step)
        return held

    def let_go(system) -> None:
        """Stop holding: release what is held, and let later commits through at once."""
        Inside(system).unpatch_store("submit_step")
        with lock:
            pending = list(held)
            held.clear()
        for sw, p, real in pending:
            real(sw).add_done_callback(_chain(p))

    hold.let_go = let_go
    return hold
