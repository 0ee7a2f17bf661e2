"""Recovery: what a system carries on with when it opens a database, and what a cluster's node
carries on with when it takes shards over (``Runtime.shards_gained``): nothing is replayed; the
workflows with work now are woken, from their last committed step, and the procedure calls left
pending run again under their keys (at least once). Due timers are the timer service's: its first
load (or a refill) includes those that fell due while nothing ran."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors._log import Log
from persistence import RUNNING
from persistence._types import RecoveryWork

from ._actor import Kick

if TYPE_CHECKING:
    from ._runtime import Runtime


def carry_on(rt: Runtime, work: RecoveryWork, *, reload: bool) -> None:
    """Run again the pending procedure calls of ``work`` and wake its workflows with work
    (``reload``: an actor live here reads its workflow again, its memory being stale).

    A workflow with a cancel waiting (`wf cancel` while no system ran, or a cancel the last one
    had not carried out) takes it first: its cancel disarms the procedures it awaits, which must
    not run again meanwhile (one that kills the process would never let the cancel land)."""
    for row in work.procedures:
        if row.workflow_id not in work.cancelling:
            rt.procedures.dispatch(row, recovered=True)
    for wid in work.with_work:
        rt.activator.deliver(wid, Kick(reload=reload))


def recover(rt: Runtime, log: Log, db: str) -> dict[str, int]:
    """At the opening of a system: start the timer service and carry on with what the store
    holds (of the shards this node owns); the figures describe the database as it was found."""
    store = rt.store
    counts = store.count_workflows()  # before anything runs
    running = sum(c for (_t, s), c in counts.items() if s == RUNNING)
    timers = len(store.timers_due(float("inf"), 1 << 30)) if running else 0
    procedures = list(store.procedures_to_run())
    work = RecoveryWork(
        with_work=list(store.workflows_with_work()),
        procedures=procedures,
        cancelling=store.workflows_cancelling() if procedures else set(),
    )
    rt.timers.start()
    carry_on(rt, work, reload=False)
    stats = {"running": running, "activated": len(work.with_work), "procedures": len(procedures),
             "timers": timers}
    log.info("system_recovered", db=db, **stats)
    return stats
