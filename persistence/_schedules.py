"""Schedules in the store: their definitions, their progress, and the one write that starts a tick.

A schedule's row holds what to start (a workflow type and its pickled arguments), when (a cron
expression or a period, read by ``actors._schedules``), and how far it got: ``done_until``, the
time up to which every tick is done (started or skipped), and ``next_tick``, a hint of when the
next one is due (the driver always recomputes from ``done_until``).

A tick is started by one transaction (``start_tick``): the workflow's record with the tick's id,
the ``schedule_runs`` row that gives its tick, and the schedule's progress. Two drivers that both
think a tick is theirs (a cluster's leader changing hands) insert the same workflow id, which
goes in once; a crash before the commit leaves nothing, so the next driver starts the tick again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from persistence._promise import Promise
from persistence._types import RUNNING, NewWorkflow
from persistence._writer import Deferred
from persistence._writes import insert_workflow

if TYPE_CHECKING:
    from persistence._sqlstore import SqlStore
    from persistence._writer import Writer

COLUMNS = (
    "id, workflow, args, cron, every, timezone, overlap, catchup, created_at, updated_at, "
    "done_until, next_tick, last_started"
)
ALL = f"SELECT {COLUMNS} FROM {{s}}.schedules ORDER BY id"
ONE = f"SELECT {COLUMNS} FROM {{s}}.schedules WHERE id = ?"
DUE = f"SELECT {COLUMNS} FROM {{s}}.schedules WHERE next_tick <= ? ORDER BY next_tick, id"
NEXT_DUE = "SELECT min(next_tick) FROM {s}.schedules"
# Scheduling an id again changes what it starts and when, and keeps how far it got (so that an
# application that schedules at every start catches up on the ticks it missed while down).
PUT = (
    f"INSERT INTO {{s}}.schedules ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET workflow = excluded.workflow, args = excluded.args, "
    "cron = excluded.cron, every = excluded.every, timezone = excluded.timezone, "
    "overlap = excluded.overlap, catchup = excluded.catchup, updated_at = excluded.updated_at, "
    "next_tick = excluded.next_tick, done_until = CASE WHEN excluded.done_until > "
    "{s}.schedules.done_until THEN excluded.done_until ELSE {s}.schedules.done_until END"
)
DELETE = "DELETE FROM {s}.schedules WHERE id = ?"
STATUS = "SELECT status FROM {s}.workflows WHERE id = ?"
# A tick's run, recorded only if the workflow of its id is of the schedule's type: one of another
# type started by hand under that id is no run of the schedule's.
RUN = (
    "INSERT INTO {s}.schedule_runs (workflow_id, schedule_id, tick) SELECT ?, ?, ? "
    "WHERE EXISTS (SELECT 1 FROM {s}.workflows WHERE id = ? AND type = ?) "
    "ON CONFLICT (workflow_id) DO NOTHING"
)
TYPE = "SELECT type FROM {s}.workflows WHERE id = ?"
# Progress only forward: a driver that read the schedule before another one moved it on changes
# nothing (its workflow insert found the id taken, too).
PROGRESS = (
    "UPDATE {s}.schedules SET done_until = ?, next_tick = ?, "
    "last_started = coalesce(?, last_started) WHERE id = ? AND done_until < ?"
)
PROGRESS_RUN = (
    "UPDATE {s}.schedules SET done_until = ?, next_tick = ?, last_started = coalesce("
    "(SELECT id FROM {s}.workflows WHERE id = ? AND type = ?), last_started) "
    "WHERE id = ? AND done_until < ?"
)
TICKS_OF = "SELECT workflow_id, tick FROM {s}.schedule_runs WHERE workflow_id IN ({ids})"


@dataclass(frozen=True)
class ScheduleRow:
    """A schedule as the store holds it (``args`` pickled; times in epoch seconds)."""

    id: str
    workflow: str
    args: bytes
    cron: str | None
    every: float | None
    timezone: str
    overlap: str
    catchup: str
    created_at: float
    updated_at: float
    done_until: float
    next_tick: float | None
    last_started: str | None


def _row(r: tuple[Any, ...]) -> ScheduleRow:
    return ScheduleRow(
        r[0],
        r[1],
        bytes(r[2]),
        r[3],
        None if r[4] is None else float(r[4]),
        r[5],
        r[6],
        r[7],
        float(r[8]),
        float(r[9]),
        float(r[10]),
        None if r[11] is None else float(r[11]),
        r[12],
    )


def schedules(store: SqlStore) -> list[ScheduleRow]:
    return [_row(r) for r in store._rows(ALL)]


def schedule(store: SqlStore, schedule_id: str) -> ScheduleRow | None:
    rows = store._rows(ONE, (schedule_id,))
    return _row(rows[0]) if rows else None


def due(store: SqlStore, now: float) -> list[ScheduleRow]:
    """The schedules whose next tick is at or before ``now``."""
    return [_row(r) for r in store._rows(DUE, (now,))]


def next_due(store: SqlStore) -> float | None:
    rows = store._rows(NEXT_DUE)
    return None if not rows or rows[0][0] is None else float(rows[0][0])


def put(store: SqlStore, row: ScheduleRow) -> None:
    """Insert ``row``, or update the schedule of its id (keeping how far that one got, unless
    ``row`` goes further: a schedule given another timing owes no tick before it was given)."""
    values = (
        row.id,
        row.workflow,
        row.args,
        row.cron,
        row.every,
        row.timezone,
        row.overlap,
        row.catchup,
        row.created_at,
        row.updated_at,
        row.done_until,
        row.next_tick,
        row.last_started,
    )
    store._write_wait(lambda w: w.execute(PUT, values))


def delete(store: SqlStore, schedule_id: str) -> bool:
    """Delete the schedule (its workflows stay); False if there was none."""

    def run(w: Writer) -> Deferred[bool]:
        cur = w.execute(DELETE, (schedule_id,))
        return Deferred(lambda: bool(cur.rowcount))

    done: bool = store._write_wait(run)
    return done


def start_tick(
    store: SqlStore,
    schedule_id: str,
    tick: float,
    wf: NewWorkflow | None,
    *,
    next_tick: float | None,
    skip_while_running: str | None,
) -> Promise[str]:
    """Do the tick ``tick`` of a schedule in one transaction: start ``wf`` (its id the tick's),
    or skip it (``wf`` None, or ``skip_while_running`` names a workflow still running); move the
    schedule on past it either way. Resolves after COMMIT to ``"started"``, ``"existed"`` (the
    id was taken: another driver started this tick), ``"taken"`` (the id is a workflow of another
    type's, started under it by hand: no run of the schedule's) or ``"skipped"``."""

    def run(w: Writer) -> Any:
        skip = wf is None
        if not skip and skip_while_running is not None:
            status = w.query_one(STATUS, (skip_while_running,))
            skip = status is not None and status[0] == RUNNING
        if skip or wf is None:
            w.execute(PROGRESS, (tick, next_tick, None, schedule_id, tick))
            return "skipped"
        inserted = insert_workflow(w, wf)
        w.execute(RUN, (wf.id, schedule_id, tick, wf.id, wf.type))
        w.execute(PROGRESS_RUN, (tick, next_tick, wf.id, wf.type, schedule_id, tick))
        held = w.execute(TYPE, (wf.id,))

        def outcome() -> str:
            if inserted():
                return "started"
            row = held.fetchone()
            return "existed" if row is not None and row[0] == wf.type else "taken"

        return Deferred(outcome)

    return store._write(run)


def ticks_of(store: SqlStore, workflow_ids: list[str]) -> dict[str, float]:
    """The tick each of these workflows was started for, for those a schedule started."""
    found: dict[str, float] = {}
    for i in range(0, len(workflow_ids), 500):
        chunk = workflow_ids[i : i + 500]
        sql = TICKS_OF.replace("{ids}", ", ".join("?" * len(chunk)))
        found.update((r[0], float(r[1])) for r in store._rows(sql, tuple(chunk)))
    return found
