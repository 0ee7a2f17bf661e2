"""The writes, each a function of the writer's connection, run inside the writer's savepoint.

Nothing here commits: the writer wraps each call in a savepoint of its group transaction, so a
write that raises leaves no trace.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from typing import Any

from persistence._errors import (
    InboxFull,
    PersistenceError,
    ReducerFailed,
    StaleStep,
    UnknownWorkflowId,
    WorkflowExists,
    WorkflowFinished,
)
from persistence._schema import HISTORY_KEEP, HISTORY_TRIM_EVERY
from persistence._types import (
    CANCEL,
    CHILD,
    FINISHED,
    RUNNING,
    SIGNAL,
    Delivered,
    NewWorkflow,
    StepAck,
    StepWrite,
)
from persistence._writer import Writer

INBOX_KINDS = (SIGNAL, CANCEL, CHILD)
EXTERNAL_KINDS = ("signal", "cancel", "fire_timer", "prune")
STATUSES = (RUNNING, *FINISHED)


def insert_workflow(conn: sqlite3.Connection, wf: NewWorkflow, step: StepWrite | None = None) -> bool:
    """Insert ``wf``; False if the id is taken.

    As a running, never-stepped workflow; or, with ``step`` (its step 1), as that step leaves it.
    """
    stepped: tuple[Any, ...]
    if step is None:
        stepped = ("running", wf.continuation, wf.fingerprint, wf.waiting_on, None, None, 0, 0,
                   wf.created_at, None)
    else:
        stepped = (
            step.status,
            step.continuation if step.continuation is not None else wf.continuation,
            step.fingerprint if step.fingerprint is not None else wf.fingerprint,
            step.waiting_on,
            step.result,
            step.error,
            step.step_seq,
            step.restarts if step.restarts is not None else 0,
            step.updated_at,
            step.recent,
        )
    status, continuation, fingerprint, waiting_on, result, error, seq, restarts, updated, recent = stepped
    # A workflow that ends in its first step keeps no continuation, and its end is its step's.
    kept: bytes | None = continuation
    finished_at = None
    if status in FINISHED:
        kept, finished_at = None, updated
    cur = conn.execute(
        "INSERT OR IGNORE INTO workflows (id, type, status, parent_id, detached, test_mode, "
        "continuation, fingerprint, waiting_on, result, error, step_seq, restarts, created_at, "
        "updated_at, recent_steps, finished_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (wf.id, wf.type, status, wf.parent_id, int(wf.detached), int(wf.test_mode), kept,
         fingerprint, waiting_on, result, error, seq, restarts, wf.created_at, updated, recent,
         finished_at),
    )
    return cur.rowcount == 1


def _inbox_count(conn: sqlite3.Connection, workflow_id: str, limit: int) -> int:
    # Counting stops at the limit, by index, so a full inbox costs at most `limit` index steps.
    count: int = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM inbox WHERE workflow_id = ? LIMIT ?)",
        (workflow_id, limit),
    ).fetchone()[0]
    return count


def deliver(
    w: Writer,
    workflow_id: str,
    kind: str,
    name: str,
    payload: bytes,
    at: float,
    limit: int,
) -> Delivered | str:
    """Append one inbox row; return it, or why it was not delivered (for a step's ``dropped``)."""
    row = w.conn.execute("SELECT status FROM workflows WHERE id = ?", (workflow_id,)).fetchone()
    if row is None:
        return "unknown workflow"
    if row[0] != RUNNING:
        return f"workflow {row[0]}"
    # Only signals count against the bound: a cancel or a child's outcome must always get through.
    if kind == SIGNAL and _inbox_count(w.conn, workflow_id, limit) >= limit:
        return f"inbox full ({limit} buffered signals)"
    cur = w.conn.execute(
        "INSERT INTO inbox (workflow_id, kind, name, payload, created_at) VALUES (?, ?, ?, ?, ?)",
        (workflow_id, kind, name, payload, at),
    )
    return Delivered(workflow_id, cur.lastrowid, kind, name, payload, at)  # type: ignore[arg-type]


def append_inbox(
    w: Writer, workflow_id: str, kind: str, name: str, payload: bytes, at: float, limit: int,
    external_seq: int | None = None,
) -> Delivered:
    """Append a message for a running workflow, or raise why it cannot take it.

    ``external_seq``: the external request this carries out, deleted with the append.
    """
    if kind not in INBOX_KINDS:
        raise PersistenceError(
            f"unknown inbox kind {kind!r} for workflow {workflow_id!r}; use one of "
            f"{', '.join(INBOX_KINDS)}.",
            path=w.path,
        )
    result = deliver(w, workflow_id, kind, name, payload, at, limit)
    if isinstance(result, Delivered):
        if external_seq is not None:
            w.conn.execute("DELETE FROM external WHERE seq = ?", (external_seq,))
        return result
    if result == "unknown workflow":
        raise UnknownWorkflowId(workflow_id, path=w.path)
    if result.startswith("inbox full"):
        raise InboxFull(workflow_id, limit=limit, path=w.path)
    status = w.conn.execute("SELECT status FROM workflows WHERE id = ?", (workflow_id,)).fetchone()
    raise WorkflowFinished(workflow_id, status[0], path=w.path)


def broadcast(
    w: Writer, name: str, filter_key: str, payload: bytes, at: float, limit: int
) -> tuple[list[Delivered], list[tuple[str, str]]]:
    """Append a signal to every running subscriber of ``(name, filter_key)``."""
    subscribers = [
        r[0]
        for r in w.conn.execute(
            "SELECT workflow_id FROM subscriptions WHERE name = ? AND filter_key = ? "
            "ORDER BY workflow_id",
            (name, filter_key),
        )
    ]
    delivered: list[Delivered] = []
    dropped: list[tuple[str, str]] = []
    for workflow_id in subscribers:
        result = deliver(w, workflow_id, SIGNAL, name, payload, at, limit)
        if isinstance(result, Delivered):
            delivered.append(result)
        else:
            dropped.append((workflow_id, result))
    return delivered, dropped


def _reducer_name(fn: object) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}:{qualname}" if module else qualname


def _stale(w: Writer, step: StepWrite, why: str) -> StaleStep:
    return StaleStep(
        f"step {step.step_seq} of workflow {step.workflow_id!r} is stale: {why} in {w.path}. "
        f"Nothing of it was written; reload the workflow (load_workflow, inbox, timers, "
        f"procedures) and step it again.",
        path=w.path,
        workflow_id=step.workflow_id,
    )


# Rows consumed by one DELETE: a gather of a hundred children consumes their hundred outcomes in
# one statement, not a hundred (each statement is a round trip through the interpreter's lock).
CONSUME_CHUNK = 500


def _consume(w: Writer, step: StepWrite, table: str, column: str, ids: list[Any], what: str) -> None:
    for start in range(0, len(ids), CONSUME_CHUNK):
        chunk = ids[start : start + CONSUME_CHUNK]
        marks = ",".join("?" * len(chunk))
        cur = w.conn.execute(
            f"DELETE FROM {table} WHERE workflow_id = ? AND {column} IN ({marks})",
            (step.workflow_id, *chunk),
        )
        if cur.rowcount != len(chunk):
            missing = len(chunk) - max(cur.rowcount, 0)
            which = f"{what} {chunk[0]!r}" if len(chunk) == 1 else (
                f"{missing} of the {len(chunk)} {what}s {_ids(chunk)}"
            )
            raise _stale(w, step, f"{which} it consumes {'is' if len(chunk) == 1 else 'are'} gone")


def _ids(ids: list[Any]) -> str:
    shown = ", ".join(repr(i) for i in ids[:5])
    return f"[{shown}{', ...' if len(ids) > 5 else ''}]"


_STEP_SET = (
    "fingerprint = coalesce(?, fingerprint), "
    "waiting_on = ?, result = ?, error = ?, step_seq = ?, updated_at = ?, "
    "restarts = coalesce(?, restarts), recent_steps = coalesce(?, recent_steps) WHERE id = ? AND step_seq = ? AND status = 'running'"
)
_STEP_RUNNING = "UPDATE workflows SET continuation = coalesce(?, continuation), " + _STEP_SET
# A step that ends the workflow drops its continuation (nothing resumes a finished workflow: its
# record keeps the result or error and the history) and stamps its end, for retention.
_STEP_ENDING = "UPDATE workflows SET status = ?, finished_at = ?, continuation = NULL, " + _STEP_SET


def _step_refused(w: Writer, step: StepWrite) -> None:
    """Raise why the guarded UPDATE of ``step`` matched no row."""
    wid = step.workflow_id
    row = w.conn.execute("SELECT status, step_seq FROM workflows WHERE id = ?", (wid,)).fetchone()
    if row is None:
        raise UnknownWorkflowId(wid, path=w.path)
    status, stored_seq = row
    if status != RUNNING:
        raise WorkflowFinished(wid, status, path=w.path)
    raise _stale(
        w, step, f"the stored step counter is {stored_seq}, so the next step is {stored_seq + 1}"
    )


def apply_step(w: Writer, step: StepWrite, limit: int) -> StepAck:
    """Write everything of one step; raise (and leave the rollback to the writer) on any failure."""
    conn = w.conn
    wid = step.workflow_id
    if step.status not in STATUSES:
        raise PersistenceError(
            f"step {step.step_seq} of workflow {wid!r} has unknown status {step.status!r}; use one "
            f"of {', '.join(STATUSES)}.",
            path=w.path,
        )
    at = step.updated_at
    if step.create is not None:
        if step.step_seq != 1 or step.create.id != wid:
            raise PersistenceError(
                f"step {step.step_seq} of workflow {wid!r} creates workflow "
                f"{step.create.id!r}; only a workflow's own first step (step 1) can create it.",
                path=w.path,
            )
        # The record and its first step in one row write: the never-stepped state (and its entry
        # in the index of workflows to start) never reaches the file.
        if not insert_workflow(conn, step.create, step):
            raise WorkflowExists(step.create.id, parent_id=step.create.parent_id, path=w.path)
    else:
        # The guard is the UPDATE's own WHERE clause; only when it matches nothing do we look
        # why. A step that leaves the workflow running does not name the status column: SQLite
        # then leaves the indexes on it alone, and the commit writes one page instead of three.
        cur = conn.execute(
            _STEP_RUNNING if step.status == RUNNING else _STEP_ENDING,
            (
                *((step.continuation,) if step.status == RUNNING else (step.status, at)),
                step.fingerprint,
                step.waiting_on,
                step.result,
                step.error,
                step.step_seq,
                at,
                step.restarts,
                step.recent,
                wid,
                step.step_seq - 1,
            ),
        )
        if cur.rowcount != 1:
            _step_refused(w, step)
    if step.consume_inbox:
        _consume(w, step, "inbox", "seq", step.consume_inbox, "inbox message")
    if step.consume_timers:
        _consume(w, step, "timers", "id", step.consume_timers, "timer")
    if step.consume_procedures:
        _consume(w, step, "procedures", "key", step.consume_procedures, "procedure")

    if step.consume_external:
        conn.executemany("DELETE FROM external WHERE seq = ?", [(s,) for s in step.consume_external])
    for timer_id in step.cancel_timers:
        conn.execute("DELETE FROM timers WHERE id = ? AND workflow_id = ?", (timer_id, wid))
    for key in step.cancel_procedures:
        conn.execute("DELETE FROM procedures WHERE key = ? AND workflow_id = ?", (key, wid))
    timer_ids: list[int] = []
    for timer in step.new_timers:
        cur = conn.execute(
            "INSERT INTO timers (workflow_id, name, due_at) VALUES (?, ?, ?)",
            (wid, timer.name, timer.due_at),
        )
        timer_ids.append(cur.lastrowid)  # type: ignore[arg-type]  # an INSERT's, never None
    for proc in step.new_procedures:
        try:
            conn.execute(
                "INSERT INTO procedures (key, workflow_id, function, args, status, attempts, "
                "next_attempt_at, created_at) VALUES (?, ?, ?, ?, 'pending', 0, ?, ?)",
                (proc.key, wid, proc.function, proc.args, proc.next_attempt_at, at),
            )
        except sqlite3.IntegrityError as exc:
            raise PersistenceError(
                f"step {step.step_seq} of workflow {wid!r} dispatches procedure key "
                f"{proc.key!r}, but a procedure with that idempotency key already exists in "
                f"{w.path}; the step was rolled back. Idempotency keys must be unique.",
                path=w.path,
            ) from exc

    # The waits table is the set of signal names awaited now, replaced when it changes.
    waits = tuple(sorted(set(step.wait_signals))) if step.status == RUNNING else ()
    # A workflow created by this step has no rows there yet.
    if (() if step.create is not None else w.waits.get(wid)) != waits:
        conn.execute("DELETE FROM waits WHERE workflow_id = ?", (wid,))
        if waits:
            conn.executemany(
                "INSERT INTO waits (workflow_id, name) VALUES (?, ?)",
                [(wid, name) for name in waits],
            )
    w.staged_waits[wid] = waits
    for name, filter_key in step.subscribe:
        conn.execute(
            "INSERT OR IGNORE INTO subscriptions (name, filter_key, workflow_id) VALUES (?, ?, ?)",
            (name, filter_key, wid),
        )
    for name, filter_key in step.unsubscribe:
        conn.execute(
            "DELETE FROM subscriptions WHERE name = ? AND filter_key = ? AND workflow_id = ?",
            (name, filter_key, wid),
        )

    created = []
    for child in step.new_workflows:
        if not insert_workflow(conn, child):
            raise WorkflowExists(child.id, parent_id=wid, path=w.path)
        created.append(child.id)

    if step.status in FINISHED:
        # A finished workflow takes nothing more: drop what it still held, before its own
        # outgoing messages (a message to itself is then dropped as "finished"). Its waits went
        # above. Timers and procedure calls are only ever made by its committed steps, so one
        # that ends in its first step has none.
        tables = ("timers", "procedures", "subscriptions", "inbox") if step.step_seq > 1 else (
            "subscriptions", "inbox"
        )
        for table in tables:
            conn.execute(f"DELETE FROM {table} WHERE workflow_id = ?", (wid,))

    delivered: list[Delivered] = []
    dropped: list[tuple[str, str]] = []
    lost_here: list[tuple[str, str, str]] = []  # (target, name, why) of signals lost by mistake
    for sig in step.signals:
        if sig.kind not in INBOX_KINDS:
            raise PersistenceError(
                f"step {step.step_seq} of workflow {wid!r} sends a message of unknown kind "
                f"{sig.kind!r}; use one of {', '.join(INBOX_KINDS)}.",
                path=w.path,
            )
        result = deliver(w, sig.workflow_id, sig.kind, sig.name, sig.payload, at, limit)
        if isinstance(result, Delivered):
            delivered.append(result)
        else:
            if result == "unknown workflow" and sig.kind != SIGNAL:
                # A child's outcome for its parent, or a parent's cancel for its child: that
                # workflow existed (the runtime made the link), so it ended and was pruned.
                result = "workflow pruned"
            dropped.append((sig.workflow_id, result))
            if sig.kind == SIGNAL and not result.startswith("workflow "):
                lost_here.append((sig.workflow_id, sig.name, result))
    for b in step.broadcasts:
        got, lost = broadcast(w, b.name, b.filter_key, b.payload, at, limit)
        delivered.extend(got)
        dropped.extend(lost)
        lost_here.extend((target, b.name, why) for target, why in lost if not why.startswith("workflow "))

    history = step.history
    if lost_here:
        # A signal sent to an unknown id or a full inbox is a mistake the sender's own history
        # shows (`wf show`), not only the log; one that finds its target ended is expected.
        history = [*(
            ("signal_dropped", json.dumps({"to": target, "name": name, "reason": why}))
            for target, name, why in lost_here
        ), *history]
    if history:
        conn.executemany(
            "INSERT INTO history (workflow_id, at, event, detail) VALUES (?, ?, ?, ?)",
            [(wid, at, event, detail) for event, detail in history],
        )
    if step.step_seq % HISTORY_TRIM_EVERY == 0:
        conn.execute(
            "DELETE FROM history WHERE workflow_id = ? AND seq < (SELECT seq FROM history "
            "WHERE workflow_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
            (wid, wid, HISTORY_KEEP - 1),
        )

    for reducer in step.reducers:
        try:
            reducer(w.db)
        except Exception as exc:
            raise ReducerFailed(
                path=w.path, workflow_id=wid, reducer=_reducer_name(reducer), original=exc
            ) from exc

    return StepAck(timer_ids=timer_ids, delivered=delivered, created=created, dropped=dropped)


def procedure_finished(
    w: Writer, key: str, result: bytes | None, error: str | None, attempts: int
) -> bool:
    """Record a procedure's outcome once; True while its row exists."""
    status = "failed" if error is not None else "done"
    cur = w.conn.execute(
        "UPDATE procedures SET status = ?, result = ?, error = ?, attempts = ? "
        "WHERE key = ? AND status = 'pending'",
        (status, result, error, attempts, key),
    )
    if cur.rowcount:
        return True
    # At least once: a second run's outcome for an already-finished call is ignored.
    return conn_has(w.conn, "SELECT 1 FROM procedures WHERE key = ?", (key,))


def procedure_retry(w: Writer, key: str, attempts: int, next_attempt_at: float) -> bool:
    """Record a failed attempt and the time of the next one; False if the row is gone."""
    cur = w.conn.execute(
        "UPDATE procedures SET attempts = ?, next_attempt_at = ? "
        "WHERE key = ? AND status = 'pending'",
        (attempts, next_attempt_at, key),
    )
    return cur.rowcount == 1


def conn_has(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> bool:
    """Return True if ``sql`` yields a row."""
    return conn.execute(sql, params).fetchone() is not None


def insert_external(
    conn: sqlite3.Connection,
    path: str,
    kind: str,
    workflow_id: str,
    name: str | None,
    payload: str | None,
    at: float,
) -> int:
    """Append a request for the owner; return its seq."""
    if kind not in EXTERNAL_KINDS:
        raise PersistenceError(
            f"unknown external request kind {kind!r} for workflow {workflow_id!r} in {path}; use "
            f"one of {', '.join(EXTERNAL_KINDS)}.",
            path=path,
        )
    cur = conn.execute(
        "INSERT INTO external (kind, workflow_id, name, payload, created_at) VALUES (?, ?, ?, ?, ?)",
        (kind, workflow_id, name, payload, at),
    )
    return cur.lastrowid  # type: ignore[return-value]


# Every table of the schema whose rows belong to one workflow, by its ``workflow_id`` column
# (besides the workflow's own row): pruning a workflow deletes its rows in each. Application
# tables (the reducers' own) are never touched. ``tests/persistence/test_retention.py`` checks
# that this names every such table of the schema.
WORKFLOW_TABLES = ("history", "inbox", "timers", "procedures", "waits", "subscriptions", "external")
# Ids per DELETE statement (SQLite binds at most 32766 parameters; a few hundred keep each
# statement short).
PRUNE_CHUNK = 500


def prune_finished(w: Writer, before: float, limit: int) -> list[str]:
    """Delete up to ``limit`` workflows that finished before ``before``, oldest first, with every
    row they left; return their ids.

    Selected inside the write transaction, so a workflow is deleted once, whoever else prunes.
    A finished workflow holds no timer, procedure, wait or subscription (its last step dropped
    them) and takes no message, but its rows are deleted in each table all the same: a file
    written by an older version, or edited by hand, may hold some.
    """
    conn = w.conn
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM workflows INDEXED BY workflows_finished "
            "WHERE finished_at IS NOT NULL AND finished_at < ? ORDER BY finished_at LIMIT ?",
            (before, limit),
        )
    ]
    for start in range(0, len(ids), PRUNE_CHUNK):
        chunk = ids[start : start + PRUNE_CHUNK]
        marks = ",".join("?" * len(chunk))
        for table in WORKFLOW_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE workflow_id IN ({marks})", chunk)
        conn.execute(
            f"DELETE FROM workflows WHERE id IN ({marks}) AND finished_at IS NOT NULL", chunk
        )
    if ids:
        for wid in ids:
            w.waits.pop(wid, None)  # a finished workflow's, remembered as awaiting nothing
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('pruned_total', ?) ON CONFLICT (key) "
            "DO UPDATE SET value = CAST(value AS INTEGER) + excluded.value",
            (str(len(ids)),),
        )
    return ids


def external_done(w: Writer, seq: int, result: str) -> None:
    """Delete request ``seq`` and keep its result for the process that posted it."""
    w.conn.execute("DELETE FROM external WHERE seq = ?", (seq,))
    w.conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (f"external_result_{seq}", result)
    )
