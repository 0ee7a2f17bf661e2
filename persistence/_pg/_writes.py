"""The writes of the PostgreSQL store, each on the writer's connection inside its transaction.

They mirror ``persistence/_writes.py`` statement for statement, with PostgreSQL's SQL, and one
difference in shape: the writer's connection runs in pipeline mode, so a statement's result is
not waited for where it is not needed at once. ``apply_step`` sends every statement of a step,
and returns a ``Deferred`` whose ``finish()`` (run by the writer once the batch's statements have
been answered, before COMMIT) reads their results: the guard's row count, the rows consumed, the
ids handed out, what was delivered. A step's statements are written so that none fails in the
ordinary course (``ON CONFLICT DO NOTHING`` and guards in WHERE clauses, read back); a step that
turns out stale raises from ``finish()``, and the writer rolls it back as it would on SQLite.

SQL names the store's tables as ``{s}.name``; ``sql_for`` puts the schema in, once per string.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from persistence._errors import (
    InboxFull,
    PersistenceError,
    ReducerFailed,
    StaleStep,
    UnknownWorkflowId,
    WorkflowExists,
    WorkflowFinished,
)
from persistence._pg._errors import ConnectionLost, Retryable, translate_error
from persistence._pg._schema import quote
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

if TYPE_CHECKING:
    from persistence._pg._writer import PgWriter

T = TypeVar("T")

INBOX_KINDS = (SIGNAL, CANCEL, CHILD)
EXTERNAL_KINDS = ("signal", "cancel", "fire_timer", "prune")
STATUSES = (RUNNING, *FINISHED)
CONSUME_CHUNK = 500


@functools.lru_cache(maxsize=512)
def sql_for(template: str, schema: str) -> str:
    """``template`` with its tables in ``schema``."""
    return template.replace("{s}", quote(schema))


class Deferred(Generic[T]):
    """A write whose statements are sent; ``finish()`` reads their results (and may raise)."""

    __slots__ = ("finish",)

    def __init__(self, finish: Callable[[], T]) -> None:
        self.finish = finish


# A step's UPDATE: the guard is its WHERE clause. It names no indexed column whose value a running
# step changes (``fresh`` is set false, which changes it once, at the first step; ``status`` only
# by a step that ends the workflow), so PostgreSQL can write the new row version on the same page
# without touching an index (a HOT update).
_STEP_SET = (
    "fingerprint = coalesce(%s, fingerprint), "
    "waiting_on = %s, result = %s, error = %s, step_seq = %s, updated_at = %s, "
    "restarts = coalesce(%s, restarts), recent_steps = coalesce(%s, recent_steps), fresh = false "
    "WHERE id = %s AND step_seq = %s AND status = 'running'"
)
STEP_RUNNING = "UPDATE {s}.workflows SET continuation = coalesce(%s, continuation), " + _STEP_SET
# A step that ends the workflow drops its continuation (nothing resumes a finished workflow) and
# stamps its end, for retention.
STEP_ENDING = (
    "UPDATE {s}.workflows SET status = %s, finished_at = %s, continuation = NULL, " + _STEP_SET
)

_INSERT_WORKFLOW = (
    "INSERT INTO {s}.workflows (id, type, status, parent_id, detached, test_mode, continuation, "
    "fingerprint, waiting_on, result, error, step_seq, restarts, created_at, updated_at, "
    "recent_steps, fresh, finished_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
    "%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id"
)

# One inbox row, if its target is running and (for a signal) has room: the checks and the insert
# in one statement, so that it needs no answer before the next statement goes.
_DELIVER = (
    "INSERT INTO {s}.inbox (workflow_id, kind, name, payload, created_at) "
    "SELECT %s, %s, %s, %s, %s FROM {s}.workflows w WHERE w.id = %s AND w.status = 'running' "
    "AND (%s != 'signal' OR (SELECT count(*) FROM (SELECT 1 FROM {s}.inbox "
    "WHERE workflow_id = %s LIMIT %s) AS x) < %s) RETURNING seq"
)


def _workflow_values(wf: NewWorkflow, step: StepWrite | None) -> tuple[Any, ...]:
    if step is None:
        return (wf.id, wf.type, RUNNING, wf.parent_id, wf.detached, wf.test_mode, wf.continuation,
                wf.fingerprint, wf.waiting_on, None, None, 0, 0, wf.created_at, wf.created_at,
                None, True, None)
    # A workflow that ends in its first step keeps no continuation, and its end is its step's.
    ended = step.status in FINISHED
    continuation = step.continuation if step.continuation is not None else wf.continuation
    return (
        wf.id, wf.type, step.status, wf.parent_id, wf.detached, wf.test_mode,
        None if ended else continuation,
        step.fingerprint if step.fingerprint is not None else wf.fingerprint,
        step.waiting_on, step.result, step.error, step.step_seq,
        step.restarts if step.restarts is not None else 0, wf.created_at, step.updated_at,
        step.recent, False, step.updated_at if ended else None,
    )


def insert_workflow(w: PgWriter, wf: NewWorkflow, step: StepWrite | None = None) -> Callable[[], bool]:
    """Send the insert of ``wf`` (never stepped, or as its step 1 leaves it); the returned
    function says, once answered, whether it went in (False: the id is taken)."""
    cur = w.execute(_INSERT_WORKFLOW, _workflow_values(wf, step))
    return lambda: cur.fetchone() is not None


def insert_workflows(w: PgWriter, wfs: list[NewWorkflow]) -> Deferred[list[bool]]:
    """Insert many never-stepped workflows; for each, whether it went in."""
    done = [insert_workflow(w, wf) for wf in wfs]
    return Deferred(lambda: [d() for d in done])


def _deliver(
    w: PgWriter, workflow_id: str, kind: str, name: str, payload: bytes, at: float, limit: int
) -> Callable[[], Delivered | str]:
    """Send one inbox append; the returned function gives the row, or why it did not go in."""
    cur = w.execute(
        _DELIVER, (workflow_id, kind, name, payload, at, workflow_id, kind, workflow_id, limit, limit)
    )

    def result() -> Delivered | str:
        row = cur.fetchone()
        if row is not None:
            return Delivered(workflow_id, int(row[0]), kind, name, payload, at)
        status = w.query_one("SELECT status FROM {s}.workflows WHERE id = %s", (workflow_id,))
        if status is None:
            return "unknown workflow"
        if status[0] != RUNNING:
            return f"workflow {status[0]}"
        return f"inbox full ({limit} buffered signals)"

    return result


def append_inbox(
    w: PgWriter, workflow_id: str, kind: str, name: str, payload: bytes, at: float, limit: int,
    external_seq: int | None = None,
) -> Delivered:
    """Append a message for a running workflow, or raise why it cannot take it."""
    if kind not in INBOX_KINDS:
        raise PersistenceError(
            f"unknown inbox kind {kind!r} for workflow {workflow_id!r}; use one of "
            f"{', '.join(INBOX_KINDS)}.",
            path=w.path,
        )
    result = _deliver(w, workflow_id, kind, name, payload, at, limit)()
    if isinstance(result, Delivered):
        if external_seq is not None:
            w.execute("DELETE FROM {s}.external WHERE seq = %s", (external_seq,))
        return result
    if result == "unknown workflow":
        raise UnknownWorkflowId(workflow_id, path=w.path)
    if result.startswith("inbox full"):
        raise InboxFull(workflow_id, limit=limit, path=w.path)
    raise WorkflowFinished(workflow_id, result.removeprefix("workflow "), path=w.path)


def _subscribers_sql() -> str:
    return (
        "SELECT workflow_id FROM {s}.subscriptions WHERE name = %s AND filter_key = %s "
        "ORDER BY workflow_id"
    )


def _send_broadcast(
    w: PgWriter, name: str, filter_key: str, payload: bytes, at: float, limit: int
) -> list[tuple[str, Callable[[], Delivered | str]]]:
    subscribers = [r[0] for r in w.query_all(_subscribers_sql(), (name, filter_key))]
    return [(wid, _deliver(w, wid, SIGNAL, name, payload, at, limit)) for wid in subscribers]


def broadcast(
    w: PgWriter, name: str, filter_key: str, payload: bytes, at: float, limit: int
) -> tuple[list[Delivered], list[tuple[str, str]]]:
    """Append a signal to every running subscriber of ``(name, filter_key)``."""
    delivered: list[Delivered] = []
    dropped: list[tuple[str, str]] = []
    for wid, result in _send_broadcast(w, name, filter_key, payload, at, limit):
        got = result()
        if isinstance(got, Delivered):
            delivered.append(got)
        else:
            dropped.append((wid, got))
    return delivered, dropped


def _reducer_name(fn: object) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}:{qualname}" if module else qualname


def _stale(w: PgWriter, step: StepWrite, why: str) -> StaleStep:
    return StaleStep(
        f"step {step.step_seq} of workflow {step.workflow_id!r} is stale: {why} in {w.path}. "
        f"Nothing of it was written; reload the workflow (load_workflow, inbox, timers, "
        f"procedures) and step it again.",
        path=w.path,
        workflow_id=step.workflow_id,
    )


def _ids(ids: list[Any]) -> str:
    shown = ", ".join(repr(i) for i in ids[:5])
    return f"[{shown}{', ...' if len(ids) > 5 else ''}]"


def _consume(
    w: PgWriter, step: StepWrite, table: str, column: str, kind: str, ids: list[Any], what: str
) -> list[Callable[[], None]]:
    checks: list[Callable[[], None]] = []
    for start in range(0, len(ids), CONSUME_CHUNK):
        chunk = ids[start : start + CONSUME_CHUNK]
        cur = w.execute(
            f"DELETE FROM {{s}}.{table} WHERE workflow_id = %s AND {column} = ANY(%s::{kind}[])",
            (step.workflow_id, [str(i) for i in chunk] if kind == "text" else chunk),
        )

        def check(cur: Any = cur, chunk: list[Any] = chunk) -> None:
            if cur.rowcount != len(chunk):
                missing = len(chunk) - max(cur.rowcount, 0)
                which = f"{what} {chunk[0]!r}" if len(chunk) == 1 else (
                    f"{missing} of the {len(chunk)} {what}s {_ids(chunk)}"
                )
                raise _stale(w, step, f"{which} it consumes {'is' if len(chunk) == 1 else 'are'} gone")

        checks.append(functools.partial(check, cur, chunk))
    return checks


def _step_refused(w: PgWriter, step: StepWrite) -> BaseException:
    """Why the guarded UPDATE of ``step`` matched no row."""
    wid = step.workflow_id
    row = w.query_one("SELECT status, step_seq FROM {s}.workflows WHERE id = %s", (wid,))
    if row is None:
        return UnknownWorkflowId(wid, path=w.path)
    status, stored_seq = row
    if status != RUNNING:
        return WorkflowFinished(wid, status, path=w.path)
    return _stale(w, step, f"the stored step counter is {stored_seq}, so the next step is {stored_seq + 1}")


def apply_step(w: PgWriter, step: StepWrite, limit: int) -> Deferred[StepAck]:
    """Send everything of one step; the result's ``finish()`` checks it and builds its ack."""
    wid = step.workflow_id
    if step.status not in STATUSES:
        raise PersistenceError(
            f"step {step.step_seq} of workflow {wid!r} has unknown status {step.status!r}; use one "
            f"of {', '.join(STATUSES)}.",
            path=w.path,
        )
    for sig in step.signals:
        if sig.kind not in INBOX_KINDS:
            raise PersistenceError(
                f"step {step.step_seq} of workflow {wid!r} sends a message of unknown kind "
                f"{sig.kind!r}; use one of {', '.join(INBOX_KINDS)}.",
                path=w.path,
            )
    at = step.updated_at
    checks: list[Callable[[], None]] = []
    if step.create is not None:
        if step.step_seq != 1 or step.create.id != wid:
            raise PersistenceError(
                f"step {step.step_seq} of workflow {wid!r} creates workflow "
                f"{step.create.id!r}; only a workflow's own first step (step 1) can create it.",
                path=w.path,
            )
        created_self = insert_workflow(w, step.create, step)
        create = step.create

        def check_created() -> None:
            if not created_self():
                raise WorkflowExists(create.id, parent_id=create.parent_id, path=w.path)

        checks.append(check_created)
    else:
        guard = w.execute(
            STEP_RUNNING if step.status == RUNNING else STEP_ENDING,
            (
                *((step.continuation,) if step.status == RUNNING else (step.status, at)),
                step.fingerprint, step.waiting_on, step.result, step.error,
                step.step_seq, at, step.restarts, step.recent, wid, step.step_seq - 1,
            ),
        )

        def check_guard() -> None:
            if guard.rowcount != 1:
                raise _step_refused(w, step)

        checks.append(check_guard)
    if step.consume_inbox:
        checks += _consume(w, step, "inbox", "seq", "bigint", step.consume_inbox, "inbox message")
    if step.consume_timers:
        checks += _consume(w, step, "timers", "id", "bigint", step.consume_timers, "timer")
    if step.consume_procedures:
        checks += _consume(w, step, "procedures", "key", "text", step.consume_procedures, "procedure")

    if step.consume_external:
        w.execute("DELETE FROM {s}.external WHERE seq = ANY(%s::bigint[])",
                  (list(step.consume_external),))
    if step.cancel_timers:
        w.execute("DELETE FROM {s}.timers WHERE workflow_id = %s AND id = ANY(%s::bigint[])",
                  (wid, list(step.cancel_timers)))
    if step.cancel_procedures:
        w.execute("DELETE FROM {s}.procedures WHERE workflow_id = %s AND key = ANY(%s::text[])",
                  (wid, [str(k) for k in step.cancel_procedures]))
    timer_curs = [
        w.execute("INSERT INTO {s}.timers (workflow_id, name, due_at) VALUES (%s, %s, %s) RETURNING id",
                  (wid, t.name, t.due_at))
        for t in step.new_timers
    ]
    for proc in step.new_procedures:
        cur = w.execute(
            "INSERT INTO {s}.procedures (key, workflow_id, function, args, status, attempts, "
            "next_attempt_at, created_at) VALUES (%s, %s, %s, %s, 'pending', 0, %s, %s) "
            "ON CONFLICT (key) DO NOTHING RETURNING key",
            (proc.key, wid, proc.function, proc.args, proc.next_attempt_at, at),
        )

        def check_procedure(cur: Any = cur, key: str = proc.key) -> None:
            if cur.fetchone() is None:
                raise PersistenceError(
                    f"step {step.step_seq} of workflow {wid!r} dispatches procedure key "
                    f"{key!r}, but a procedure with that idempotency key already exists in "
                    f"{w.path}; the step was rolled back. Idempotency keys must be unique.",
                    path=w.path,
                )

        checks.append(functools.partial(check_procedure, cur, proc.key))

    waits = tuple(sorted(set(step.wait_signals))) if step.status == RUNNING else ()
    if (() if step.create is not None else w.waits.get(wid)) != waits:
        w.execute("DELETE FROM {s}.waits WHERE workflow_id = %s", (wid,))
        if waits:
            w.execute(
                "INSERT INTO {s}.waits (workflow_id, name) SELECT %s, unnest(%s::text[])",
                (wid, list(waits)),
            )
    w.staged_waits[wid] = waits
    for name, filter_key in step.subscribe:
        w.execute(
            "INSERT INTO {s}.subscriptions (name, filter_key, workflow_id) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            (name, filter_key, wid),
        )
    for name, filter_key in step.unsubscribe:
        w.execute(
            "DELETE FROM {s}.subscriptions WHERE name = %s AND filter_key = %s AND workflow_id = %s",
            (name, filter_key, wid),
        )

    children = [(child, insert_workflow(w, child)) for child in step.new_workflows]

    def check_children() -> None:
        for child, went_in in children:
            if not went_in():
                raise WorkflowExists(child.id, parent_id=wid, path=w.path)

    checks.append(check_children)

    if step.status in FINISHED:
        tables = ("timers", "procedures", "subscriptions", "inbox") if step.step_seq > 1 else (
            "subscriptions", "inbox"
        )
        for table in tables:
            w.execute(f"DELETE FROM {{s}}.{table} WHERE workflow_id = %s", (wid,))

    sends = [
        (sig.workflow_id, sig.name, sig.kind,
         _deliver(w, sig.workflow_id, sig.kind, sig.name, sig.payload, at, limit))
        for sig in step.signals
    ]
    casts = [(b.name, _send_broadcast(w, b.name, b.filter_key, b.payload, at, limit))
             for b in step.broadcasts]
    if step.reducers:
        # Reducers read what the step wrote: check the step first (its guard above all), so a
        # stale step is reported as stale, not as whatever its reducer then made of it.
        w.sync()
        for check in checks:
            check()
        checks = []
        for reducer in step.reducers:
            try:
                reducer(w.db)
            except Exception as exc:
                if isinstance(translate_error(exc, w.path, w.conn), (Retryable, ConnectionLost)):
                    raise  # not the reducer's fault: the writer runs the batch again
                raise ReducerFailed(
                    path=w.path, workflow_id=wid, reducer=_reducer_name(reducer), original=exc
                ) from exc

    def finish() -> StepAck:
        for check in checks:
            check()
        delivered: list[Delivered] = []
        dropped: list[tuple[str, str]] = []
        lost_here: list[tuple[str, str, str]] = []
        for target, name, kind, result in sends:
            got = result()
            if isinstance(got, Delivered):
                delivered.append(got)
            else:
                if got == "unknown workflow" and kind != SIGNAL:
                    # A child's outcome for its parent, or a parent's cancel for its child: that
                    # workflow existed (the runtime made the link), so it ended and was pruned.
                    got = "workflow pruned"
                dropped.append((target, got))
                if kind == SIGNAL and not got.startswith("workflow "):
                    lost_here.append((target, name, got))
        for name, results in casts:
            for target, result in results:
                got = result()
                if isinstance(got, Delivered):
                    delivered.append(got)
                else:
                    dropped.append((target, got))
                    if not got.startswith("workflow "):
                        lost_here.append((target, name, got))
        # Sent once the deliveries are known: a signal lost by mistake (unknown id, inbox full)
        # is in the sender's own history, before the step's events (`wf show`).
        history = [*(
            ("signal_dropped", json.dumps({"to": t, "name": n, "reason": why}))
            for t, n, why in lost_here
        ), *step.history]
        if history:
            _history(w, wid, at, history)
        if step.step_seq % HISTORY_TRIM_EVERY == 0:
            w.execute(
                "DELETE FROM {s}.history WHERE workflow_id = %s AND seq < (SELECT seq FROM "
                "{s}.history WHERE workflow_id = %s ORDER BY seq DESC LIMIT 1 OFFSET %s)",
                (wid, wid, HISTORY_KEEP - 1),
            )
        return StepAck(
            timer_ids=[_first(c) for c in timer_curs],
            delivered=delivered, created=[child.id for child, _ in children], dropped=dropped,
        )

    return Deferred(finish)


def _first(cur: Any) -> int:
    row = cur.fetchone()
    assert row is not None  # an INSERT ... RETURNING that did not fail returns its row
    return int(row[0])


def _history(w: PgWriter, wid: str, at: float, events: list[tuple[str, str]]) -> None:
    w.execute(
        "INSERT INTO {s}.history (workflow_id, at, event, detail) "
        "SELECT %s, %s, e, d FROM unnest(%s::text[], %s::text[]) AS x(e, d)",
        (wid, at, [e for e, _ in events], [d for _, d in events]),
    )


def procedure_finished(
    w: PgWriter, key: str, result: bytes | None, error: str | None, attempts: int
) -> bool:
    """Record a procedure's outcome once; True while its row exists."""
    status = "failed" if error is not None else "done"
    cur = w.execute(
        "UPDATE {s}.procedures SET status = %s, result = %s, error = %s, attempts = %s "
        "WHERE key = %s AND status = 'pending'",
        (status, result, error, attempts, key),
        wait=True,
    )
    if cur.rowcount:
        return True
    return w.query_one("SELECT 1 FROM {s}.procedures WHERE key = %s", (key,)) is not None


def procedure_retry(w: PgWriter, key: str, attempts: int, next_attempt_at: float) -> bool:
    """Record a failed attempt and the time of the next one; False if the row is gone."""
    cur = w.execute(
        "UPDATE {s}.procedures SET attempts = %s, next_attempt_at = %s "
        "WHERE key = %s AND status = 'pending'",
        (attempts, next_attempt_at, key),
        wait=True,
    )
    return cur.rowcount == 1


def check_external(path: str, kind: str, workflow_id: str) -> None:
    if kind not in EXTERNAL_KINDS:
        raise PersistenceError(
            f"unknown external request kind {kind!r} for workflow {workflow_id!r} in {path}; use "
            f"one of {', '.join(EXTERNAL_KINDS)}.",
            path=path,
        )


INSERT_EXTERNAL = (
    "INSERT INTO {s}.external (kind, workflow_id, name, payload, created_at) "
    "VALUES (%s, %s, %s, %s, %s) RETURNING seq"
)


# Every table whose rows belong to one workflow, by its ``workflow_id`` (besides the workflow's
# own row): pruning a workflow deletes its rows in each (the same list as SQLite's).
WORKFLOW_TABLES = ("history", "inbox", "timers", "procedures", "waits", "subscriptions", "external")


def prune_finished(w: PgWriter, before: float, limit: int) -> list[str]:
    """Delete up to ``limit`` workflows that finished before ``before``, oldest first, with every
    row they left; return their ids (selected and locked inside the write transaction, so a
    workflow is deleted once, whoever else prunes)."""
    ids = [
        r[0]
        for r in w.query_all(
            "SELECT id FROM {s}.workflows WHERE finished_at IS NOT NULL AND finished_at < %s "
            "ORDER BY finished_at LIMIT %s FOR UPDATE SKIP LOCKED",
            (before, limit),
        )
    ]
    if not ids:
        return ids
    for table in WORKFLOW_TABLES:
        w.execute(f"DELETE FROM {{s}}.{table} WHERE workflow_id = ANY(%s::text[])", (ids,))
    w.execute(
        "DELETE FROM {s}.workflows WHERE id = ANY(%s::text[]) AND finished_at IS NOT NULL", (ids,)
    )
    for wid in ids:
        w.waits.pop(wid, None)
    w.execute(
        "INSERT INTO {s}.meta (key, value) VALUES ('pruned_total', %s) ON CONFLICT (key) "
        "DO UPDATE SET value = (meta.value::bigint + EXCLUDED.value::bigint)::text",
        (str(len(ids)),),
    )
    return ids


def external_done(w: PgWriter, seq: int, result: str) -> None:
    """Delete request ``seq`` and keep its result for the process that posted it."""
    w.execute("DELETE FROM {s}.external WHERE seq = %s", (seq,))
    w.execute(
        "INSERT INTO {s}.meta (key, value) VALUES (%s, %s) ON CONFLICT (key) "
        "DO UPDATE SET value = EXCLUDED.value",
        (f"external_result_{seq}", result),
    )
