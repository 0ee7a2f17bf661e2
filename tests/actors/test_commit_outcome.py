"""A signal consumed by a step whose COMMIT's outcome the store could not tell is never appended
again when that step did commit (PostgreSQL: the writer's connection broke once COMMIT was sent,
and the server could not be asked in time)."""

from __future__ import annotations

from typing import Any

from actors import ActorSystem
from persistence._pg._store import PgStore
from persistence._pg._writer import PgWriter
from tests.persistence.pgfault import PipelineExitFault

from . import flows

T = 60


def _writer(system: ActorSystem) -> PgWriter:
    store = system._rt.store  # type: ignore[attr-defined]
    assert isinstance(store, PgStore) and store._writer is not None
    return store._writer


def test_a_signal_whose_step_committed_unknown_is_consumed_once(
    pg_store_url: str, monkeypatch: Any
) -> None:
    with ActorSystem(pg_store_url) as system:
        ref = system.start(flows.counter, 3)
        system.idle(timeout=T)
        w = _writer(system)
        shim = PipelineExitFault(w, close=True)
        real = w._commit_outcome
        told: list[bool | None] = []

        def unknown(cause: BaseException) -> bool | None:
            told.append(real(cause))
            return None  # as if the server could not be asked: the step's outcome is unknown

        monkeypatch.setattr(w, "_commit_outcome", unknown)
        shim.arm()
        ref.signal("inc", 1)  # consumed by a step whose COMMIT breaks (and went through)
        monkeypatch.setattr(w, "_commit_outcome", real)
        assert told == [True] and shim.fired == 1
        ref.signal("inc", 10)
        ref.signal("inc", 100)
        assert ref.result(timeout=T) == 111
        rec = system._rt.store.load_workflow(ref.id)  # type: ignore[attr-defined]
        assert rec is not None and system._rt.store.inbox(ref.id) == []  # type: ignore[attr-defined]
