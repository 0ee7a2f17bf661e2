"""The writes, each a function of the writer, run inside the writer's group transaction.

Written once for both backends: the statements are ``persistence._sql``'s templates, sent
through the writer (``w.execute``), which fits them to its dialect. Nothing here commits: the
writer wraps the calls in its transaction (and, when one fails, each in a savepoint), so a write
that raises leaves no trace.

One thing in their shape comes from PostgreSQL: a writer may pipeline statements, sending them
without waiting for each answer. So ``apply_step`` sends every statement of a step and returns a
``Deferred`` whose ``finish()`` (run by the writer once the statements are answered, before
COMMIT) reads their results: the guard's row count, the rows consumed, the ids handed out, what
was delivered. On SQLite every answer is there at once and ``finish()`` runs right after the
write. A step's statements are written so that none fails in the ordinary course (``ON CONFLICT
DO NOTHING``, guards in WHERE clauses, read back); a stale step raises from ``finish()``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from persistence import _history, _sql, _talk, _tombstones
from persistence._errors import (
    InboxFull,
    PersistenceError,
    ReducerFailed,
    StaleStep,
    UnknownWorkflowId,
    WorkflowExists,
    WorkflowFinished,
)
from persistence._format import HISTORY_TRIM_EVERY
from persistence._types import (
    CANCEL,
    CHILD,
    FINISHED,
    RUNNING,
    SIGNAL,
    Delivered,
    DropCause,
    Dropped,
    NewWorkflow,
    StepAck,
    StepWrite,
)
from persistence._writer import Deferred

if TYPE_CHECKING:
    from persistence._writer import Writer

INBOX_KINDS = (SIGNAL, CANCEL, CHILD)
EXTERNAL_KINDS = ("signal", "cancel", "fire_timer", "prune", "ask")
STATUSES = (RUNNING, *FINISHED)
# Rows consumed by one DELETE: a gather of a hundred children consumes their hundred outcomes in
# one statement, not a hundred. (SQLite binds at most 32766 parameters; a few hundred keep each
# statement short.)
CONSUME_CHUNK = 500
PRUNE_CHUNK = 500
# Every table of the schema whose rows belong to one workflow, by its ``workflow_id`` column
# (besides the workflow's own row): pruning a workflow deletes its rows in each. Application
# tables (the reducers' own) are never touched. ``tests/persistence/test_retention.py`` checks
# that this names every such table of the schema.
WORKFLOW_TABLES = ("history", "inbox", "timers", "procedures", "waits", "subscriptions", "external",
                   "schedule_runs", "limit_waits", "published", "asks")


def _workflow_values(w: Writer, wf: NewWorkflow, step: StepWrite | None) -> tuple[Any, ...]:
    values: tuple[Any, ...]
    if step is None:
        values = (wf.id, wf.type, RUNNING, wf.parent_id, wf.detached, wf.test_mode,
                  wf.continuation, wf.fingerprint, wf.waiting_on, None, None, 0, wf.created_at,
                  wf.created_at, None, None)
    else:
        # A workflow that ends in its first step keeps no continuation, and its end is its step's.
        ended = step.status in FINISHED
        continuation = step.continuation if step.continuation is not None else wf.continuation
        values = (
            wf.id, wf.type, step.status, wf.parent_id, wf.detached, wf.test_mode,
            None if ended else continuation,
            step.fingerprint if step.fingerprint is not None else wf.fingerprint,
            step.waiting_on, step.result, step.error, step.step_seq, wf.created_at,
            step.updated_at, step.recent, step.updated_at if ended else None,
        )
    if w.dialect.fresh:
        values += (step is None,)
    return values


def insert_workflow(w: Writer, wf: NewWorkflow, step: StepWrite | None = None) -> Callable[[], bool]:
    """Send the insert of ``wf`` (never stepped, or as its step 1 leaves it); the returned
    function says, once answered, whether it went in (False: the id is taken)."""
    cur = w.execute(w.dialect.insert_workflow, _workflow_values(w, wf, step))
    return lambda: bool(cur.rowcount == 1)


def _insert_workflow_checked(
    w: Writer, wf: NewWorkflow, step: StepWrite | None, parent_id: str | None
) -> Callable[[], None] | None:
    """Send the insert of ``wf``, which must go in; the check that raises ``WorkflowExists``
    if it did not (None: the server makes it, ``server_checks``)."""
    if w.server_checks:
        w.expect(w.dialect.insert_workflow, _workflow_values(w, wf, step), 1)
        return None
    went_in = insert_workflow(w, wf, step)

    def check() -> None:
        if not went_in():
            raise WorkflowExists(wf.id, parent_id=parent_id, path=w.path)

    return check


def insert_workflows(w: Writer, wfs: list[NewWorkflow]) -> Deferred[list[bool]]:
    """Insert many never-stepped workflows; for each, whether it went in."""
    done = [insert_workflow(w, wf) for wf in wfs]
    return Deferred(lambda: [d() for d in done])


def _deliver(
    w: Writer, workflow_id: str, kind: str, name: str, payload: bytes, at: float, limit: int
) -> Callable[[], Delivered | Dropped]:
    """Send one inbox append; the returned function gives the row, or why it did not go in.

    Only signals count against the bound: a cancel or a child's outcome must always get through,
    and so must a signal the workflow awaits now when none of its name is buffered already. A
    child's outcome goes only to the parent the child's row names (``DELIVER_CHILD``).
    """
    values = (workflow_id, kind, name, payload, at, workflow_id)
    if kind == CHILD:
        cur = w.insert_id(_sql.DELIVER_CHILD, "seq", (*values, name))
    elif kind != SIGNAL:
        cur = w.insert_id(_sql.DELIVER, "seq", values)
    elif w.pipelined:
        cur = w.insert_id(
            _sql.DELIVER_BOUNDED, "seq", (*values, workflow_id, limit, limit, workflow_id, name)
        )
    else:
        row = w.query_one(_sql.COUNT_INBOX, (workflow_id, limit))
        full = row is not None and row[0] >= limit
        if full and w.query_one(_sql.AWAITED_NOW, (workflow_id, name)) is not None:
            full = False  # awaited now, the first of its name: taken (it lets the workflow go on)
        cur = None if full else w.insert_id(_sql.DELIVER, "seq", values)

    def result() -> Delivered | Dropped:
        row = cur.fetchone() if cur is not None else None
        if row is not None:
            return Delivered(workflow_id, int(row[0]), kind, name, payload, at)
        status = w.query_one(_sql.STATUS, (workflow_id,))
        if status is None:
            return Dropped(DropCause.UNKNOWN)
        return why_dropped(kind, status[0], limit)

    return result


def why_dropped(kind: str, status: str, limit: int) -> Dropped:
    """Why a message for a workflow of ``status`` did not go into its inbox."""
    if status != RUNNING:
        return Dropped(DropCause.ENDED, status=status)
    if kind == CHILD:
        # Not the child's parent: the one it had was pruned (which unlinked the child), and a
        # new workflow runs under its id (``DELIVER_CHILD``). Expected, as for a parent pruned.
        return Dropped(DropCause.ENDED, status="pruned")
    return Dropped(DropCause.INBOX_FULL, limit=limit)


def append_inbox(
    w: Writer, workflow_id: str, kind: str, name: str, payload: bytes, at: float, limit: int,
    external_seq: int | None = None,
) -> Deferred[Delivered]:
    """Send the append of a message for a running workflow; the result's ``finish()`` gives the
    row, or raises why the workflow cannot take it (the writer then rolls the write back).

    ``external_seq``: the external request this carries out, deleted with the append.
    """
    if kind not in INBOX_KINDS:
        raise PersistenceError(
            f"unknown inbox kind {kind!r} for workflow {workflow_id!r}; use one of "
            f"{', '.join(INBOX_KINDS)}.",
            path=w.path,
        )
    sent = _deliver(w, workflow_id, kind, name, payload, at, limit)
    if external_seq is not None:
        w.execute(_sql.DELETE_EXTERNAL, (external_seq,))  # undone with the append, if it fails
    return delivered(w, workflow_id, limit, sent)


def delivered(
    w: Writer, workflow_id: str, limit: int, sent: Callable[[], Delivered | Dropped]
) -> Deferred[Delivered]:
    """What an append of one message hands back: the ``Delivered`` row once committed, or the
    error that says why the message was not appended (unknown id, full inbox, finished)."""

    def finish() -> Delivered:
        result = sent()
        if isinstance(result, Delivered):
            return result
        if result.cause is DropCause.UNKNOWN:
            raise UnknownWorkflowId(workflow_id, path=w.path)
        if result.cause is DropCause.INBOX_FULL:
            raise InboxFull(workflow_id, limit=limit, path=w.path)
        raise WorkflowFinished(workflow_id, str(result.status), path=w.path)

    return Deferred(finish)


def _send_broadcast(
    w: Writer, name: str, filter_key: str, payload: bytes, at: float, limit: int
) -> list[tuple[str, Callable[[], Delivered | Dropped]]]:
    subscribers = [r[0] for r in w.query_all(_sql.BROADCAST_TO, (name, filter_key))]
    return [(wid, _deliver(w, wid, SIGNAL, name, payload, at, limit)) for wid in subscribers]


def broadcast(
    w: Writer, name: str, filter_key: str, payload: bytes, at: float, limit: int
) -> tuple[list[Delivered], list[tuple[str, Dropped]]]:
    """Append a signal to every running subscriber of ``(name, filter_key)``."""
    delivered: list[Delivered] = []
    dropped: list[tuple[str, Dropped]] = []
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


def _stale(w: Writer, step: StepWrite, why: str) -> StaleStep:
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
    w: Writer, step: StepWrite, table: str, column: str, kind: str, ids: list[Any], what: str
) -> list[Callable[[], None]]:
    checks: list[Callable[[], None]] = []
    for start in range(0, len(ids), CONSUME_CHUNK):
        chunk = ids[start : start + CONSUME_CHUNK]
        cond, params = w.dialect.any_of(column, chunk, kind)
        delete = f"DELETE FROM {{s}}.{table} WHERE workflow_id = ? AND {cond}"
        if w.server_checks:
            w.expect(delete, (step.workflow_id, *params), len(chunk))
            continue
        cur = w.execute(delete, (step.workflow_id, *params))

        def check(cur: Any = cur, chunk: list[Any] = chunk) -> None:
            if cur.rowcount != len(chunk):
                missing = len(chunk) - max(cur.rowcount, 0)
                which = f"{what} {chunk[0]!r}" if len(chunk) == 1 else (
                    f"{missing} of the {len(chunk)} {what}s {_ids(chunk)}"
                )
                raise _stale(w, step, f"{which} it consumes {'is' if len(chunk) == 1 else 'are'} gone")

        checks.append(functools.partial(check, cur, chunk))
    return checks


def _sparing(w: Writer, step: StepWrite, table: str, template: str) -> tuple[str, tuple[Any, ...]]:
    """The delete ``template`` of the rows of ``step``'s workflow in ``table``, sparing those the
    step consumes from it."""
    column, kind, ids = _CONSUMED[table](step) if table in _CONSUMED else ("", "", ())
    if not ids:
        return template, (step.workflow_id,)
    cond, params = w.dialect.any_of(column, list(ids), kind)
    return f"{template} AND NOT ({cond})", (step.workflow_id, *params)


_CONSUMED: dict[str, Callable[[StepWrite], tuple[str, str, Any]]] = {
    "inbox": lambda step: ("seq", "bigint", step.consume_inbox),
    "timers": lambda step: ("id", "bigint", step.consume_timers),
    "procedures": lambda step: ("key", "text", step.consume_procedures),
}


def _delete_of(w: Writer, table: str, column: str, kind: str, ids: list[Any], wid: str | None) -> None:
    """Delete the rows of ``table`` whose ``column`` is one of ``ids`` (of workflow ``wid``)."""
    for start in range(0, len(ids), CONSUME_CHUNK):
        cond, params = w.dialect.any_of(column, ids[start : start + CONSUME_CHUNK], kind)
        if wid is None:
            w.execute(f"DELETE FROM {{s}}.{table} WHERE {cond}", params)
        else:
            w.execute(f"DELETE FROM {{s}}.{table} WHERE workflow_id = ? AND {cond}", (wid, *params))


def _trim_history(w: Writer, wid: str, at: float, keep: int | None, dropped: int) -> None:
    """Delete the workflow's history rows but the newest ``keep`` (None: none), and add what
    they were, and the ``dropped`` entries kept nowhere, to its count of entries gone."""
    if w.dialect.writable_ctes:
        if keep is None:
            keep = 1 << 62  # (deletes nothing)
        w.execute(_sql.TRIM_AND_COUNT_HISTORY, (wid, wid, keep - 1, dropped, wid, wid))
        return
    gone = dropped
    if keep is not None:
        gone += max(w.execute(_sql.TRIM_HISTORY, (wid, wid, keep - 1)).rowcount, 0)
    if gone and w.execute(_sql.COUNT_TRIMMED, (gone, wid)).rowcount == 0:
        w.execute(_sql.FIRST_TRIMMED, (wid, gone))


def _step_refused(w: Writer, step: StepWrite) -> BaseException:
    """Why the guarded UPDATE of ``step`` matched no row."""
    wid = step.workflow_id
    row = w.query_one(_sql.STATUS_AND_SEQ, (wid,))
    if row is None:
        return UnknownWorkflowId(wid, path=w.path)
    status, stored_seq = row
    if status != RUNNING:
        return WorkflowFinished(wid, status, path=w.path)
    return _stale(w, step, f"the stored step counter is {stored_seq}, so the next step is {stored_seq + 1}")


def apply_step(w: Writer, step: StepWrite, limit: int) -> Deferred[StepAck]:
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
        # The record and its first step in one row write: the never-stepped state (and its entry
        # in the index of workflows to start) never reaches the database.
        check_created = _insert_workflow_checked(w, step.create, step, step.create.parent_id)
        if check_created is not None:
            checks.append(check_created)
    else:
        running = step.status == RUNNING
        update = w.dialect.step_running if running else w.dialect.step_ending
        values = (
            *((step.continuation,) if running else (step.status, at)),
            step.fingerprint, step.waiting_on, step.result, step.error,
            step.step_seq, at, step.recent, wid, step.step_seq - 1,
        )
        if w.server_checks:
            w.expect(update, values, 1)
        else:
            guard = w.execute(update, values)

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
        _delete_of(w, "external", "seq", "bigint", list(step.consume_external), None)
    if step.cancel_timers:
        _delete_of(w, "timers", "id", "bigint", list(step.cancel_timers), wid)
    if step.cancel_procedures:
        _delete_of(w, "procedures", "key", "text", list(step.cancel_procedures), wid)
    # Under server checks the writer draws the timers' ids itself (``timer_ids``), so the ack
    # needs no answer; otherwise the store assigns them and the ack reads them back.
    drawn = w.timer_ids(len(step.new_timers)) if w.server_checks and step.new_timers else None
    if drawn is not None:
        w.add_rows(_sql.INSERT_TIMER_WITH_ID,
                   [(tid, wid, t.name, t.due_at) for tid, t in zip(drawn, step.new_timers, strict=True)])
        timer_curs = []
    elif step.new_timers:
        timer_curs = [
            w.insert_id(_sql.INSERT_TIMER, "id", (wid, t.name, t.due_at)) for t in step.new_timers
        ]
    else:
        timer_curs = []
    for proc in step.new_procedures:
        values = (proc.key, wid, proc.function, proc.args, proc.next_attempt_at, at)
        if w.server_checks:
            w.expect(_sql.INSERT_PROCEDURE, values, 1)
            continue
        cur = w.execute(_sql.INSERT_PROCEDURE, values)

        def check_procedure(cur: Any = cur, key: str = proc.key) -> None:
            if cur.rowcount != 1:
                raise PersistenceError(
                    f"step {step.step_seq} of workflow {wid!r} dispatches procedure key "
                    f"{key!r}, but a procedure with that idempotency key already exists in "
                    f"{w.path}; the step was rolled back. Idempotency keys must be unique.",
                    path=w.path,
                )

        checks.append(functools.partial(check_procedure, cur, proc.key))

    def write_history(lost_here: list[tuple[str, str, Dropped]]) -> None:
        # A signal sent to an unknown id or a full inbox is a mistake the sender's own history
        # shows (`wf show`), before the step's events; one that finds its target ended is
        # expected.
        rows = [(wid, at, event, detail) for event, detail in (*(
            ("signal_dropped", json.dumps({"to": t, "name": n, "reason": str(why)}))
            for t, n, why in lost_here
        ), *step.history)] if lost_here or step.history else []
        if step.evicted is not None:  # the steps the row no longer describes: kept here
            rows[:0] = [(wid, *_history.split_line(line)) for line in step.evicted.split("\n")]
        if rows:
            w.add_rows(_sql.INSERT_HISTORY, rows)
        keep = step.history_keep
        trim = keep is not None and step.step_seq % min(HISTORY_TRIM_EVERY, keep) == 0
        if trim or step.history_dropped:
            _trim_history(w, wid, at, keep if trim else None, step.history_dropped)

    # Sealed: the server checks everything, nothing is sent to another workflow (whose answer
    # could add a "signal_dropped" line) and the timers' ids were drawn here, so the history goes
    # now, with the step's checked writes, and the ack needs no answer (the batch's COMMIT can go
    # with its statements).
    sealed = w.server_checks and not step.signals and not step.broadcasts and (
        drawn is not None or not step.new_timers
    )
    if sealed:
        write_history([])

    # The waits table is the set of signal names awaited now, replaced when it changes (the
    # writer remembers the committed sets). A workflow created by this step has no rows there.
    # A step that ends the workflow deletes its rows with the rest of what it held, below.
    ended = step.status in FINISHED
    waits = () if ended else tuple(sorted(set(step.wait_signals)))
    before = () if step.create is not None else w.waits.get(wid)
    drop_waits = before != () and before != waits  # rows there (or not known) to replace
    if drop_waits and not ended:
        w.execute(_sql.DELETE_WAITS, (wid,))
    if waits and before != waits:
        w.add_rows(_sql.INSERT_WAIT, [(wid, name) for name in waits])
    w.staged_waits[wid] = waits
    for name, filter_key in step.subscribe:
        w.execute(_sql.SUBSCRIBE, (name, filter_key, wid))
    for name, filter_key in step.unsubscribe:
        w.execute(_sql.UNSUBSCRIBE, (name, filter_key, wid))

    for child in step.new_workflows:
        check_child = _insert_workflow_checked(w, child, None, wid)
        if check_child is not None:
            checks.append(check_child)

    if step.published or step.replies:
        _talk.step_writes(w, step)
    if ended:
        # A finished workflow takes nothing more: its asks left unanswered end, and what it still
        # held goes (its waits too, unless it had none), before its own outgoing messages (a
        # message to itself is then dropped as "finished"). Timers and procedure calls are only
        # ever made by its committed steps, so one that ends in its first step has none.
        tables = ("timers", "procedures", "subscriptions", "inbox") if step.step_seq > 1 else (
            "subscriptions", "inbox"
        )
        tables = ("waits", *tables) if drop_waits else tables
        deletes = w.dialect.delete_of_workflow(tables)
        if w.server_checks and not step.new_timers and not step.new_procedures:
            # In the statement of the step's checked writes (its guard, the rows it consumes):
            # one statement fewer. All its parts see the rows as they were before it, so these
            # deletes spare the rows the step consumes (else which of the two deletes takes a
            # row, and so whether the consume's count holds, is the server's choice); the step
            # inserts none of the rows they delete.
            w.write_with([_talk.asks_ended(step), *(
                _sparing(w, step, table, d) for table, d in zip(tables, deletes, strict=True)
            )])
        else:
            w.write_after([_talk.asks_ended(step), *((d, (wid,)) for d in deletes)])

    sends = [
        (sig.workflow_id, sig.name, sig.kind,
         _deliver(w, sig.workflow_id, sig.kind, sig.name, sig.payload, at, limit))
        for sig in step.signals
    ] if step.signals else []
    casts = [(b.name, _send_broadcast(w, b.name, b.filter_key, b.payload, at, limit))
             for b in step.broadcasts] if step.broadcasts else []
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
                w.reducer_returned()
            except Exception as exc:
                if w.transient(exc):
                    raise  # not the reducer's fault: the writer runs the batch again
                raise ReducerFailed(
                    path=w.path, workflow_id=wid, reducer=_reducer_name(reducer), original=exc
                ) from exc

    def finish() -> StepAck:
        for check in checks:
            check()
        delivered: list[Delivered] = []
        dropped: list[tuple[str, Dropped]] = []
        lost_here: list[tuple[str, str, Dropped]] = []  # (target, name, why) of signals lost by mistake
        for target, name, kind, result in sends:
            got = result()
            if isinstance(got, Delivered):
                delivered.append(got)
            else:
                if got.cause is DropCause.UNKNOWN and kind != SIGNAL:
                    # A child's outcome for its parent, or a parent's cancel for its child: that
                    # workflow existed (the runtime made the link), so it ended and was pruned.
                    got = Dropped(DropCause.ENDED, status="pruned")
                dropped.append((target, got))
                if kind == SIGNAL and not got.expected:
                    lost_here.append((target, name, got))
        broadcast_to = 0
        for name, results in casts:
            for target, result in results:
                got = result()
                if isinstance(got, Delivered):
                    delivered.append(got)
                    broadcast_to += 1
                else:
                    dropped.append((target, got))
                    if not got.expected:
                        lost_here.append((target, name, got))
        if not sealed:
            write_history(lost_here)
        return StepAck(
            timer_ids=drawn if drawn is not None else [_first(c) for c in timer_curs] if timer_curs else [],
            delivered=delivered,
            created=[child.id for child in step.new_workflows] if step.new_workflows else [],
            dropped=dropped, broadcast_to=broadcast_to,
        )

    return Deferred(finish, sealed=sealed)


def _first(cur: Any) -> int:
    row = cur.fetchone()
    assert row is not None  # an insert that did not fail gives its key
    return int(row[0])


def procedure_finished(
    w: Writer, key: str, result: bytes | None, error: str | None, attempts: int
) -> bool | Deferred[bool]:
    """Record a procedure's outcome once; True while its row exists."""
    status = "failed" if error is not None else "done"
    values = (status, result, error, attempts, key)
    if w.pipelined:  # one statement, answered with the batch's others
        cur = w.execute(
            f"WITH u AS ({_sql.PROCEDURE_FINISHED} RETURNING 1) SELECT EXISTS (SELECT 1 FROM u) "
            f"OR EXISTS ({_sql.PROCEDURE_EXISTS})", (*values, key),
        )
        return Deferred(lambda: bool(cur.fetchone()[0]))
    cur = w.execute(_sql.PROCEDURE_FINISHED, values, wait=True)
    if cur.rowcount:
        return True
    # At least once: a second run's outcome for an already-finished call is ignored.
    return w.query_one(_sql.PROCEDURE_EXISTS, (key,)) is not None


def procedure_retry(w: Writer, key: str, attempts: int, next_attempt_at: float) -> bool | Deferred[bool]:
    """Record a failed attempt and the time of the next one; False if the row is gone."""
    cur = w.execute(_sql.PROCEDURE_RETRY, (attempts, next_attempt_at, key), wait=not w.pipelined)
    if w.pipelined:
        return Deferred(lambda: bool(cur.rowcount == 1))  # answered with the batch's others
    return bool(cur.rowcount == 1)


def check_external(path: str, kind: str, workflow_id: str) -> None:
    """Raise if ``kind`` is not a kind of external request."""
    if kind not in EXTERNAL_KINDS:
        raise PersistenceError(
            f"unknown external request kind {kind!r} for workflow {workflow_id!r} in {path}; use "
            f"one of {', '.join(EXTERNAL_KINDS)}.",
            path=path,
        )


def insert_external(w: Writer, values: tuple[Any, ...]) -> int:
    """Append a request (kind, workflow_id, name, payload, created_at) for the owner; its seq."""
    return _first(w.insert_id(_sql.INSERT_EXTERNAL, "seq", values, wait=True))


def take_meta(w: Writer, key: str) -> str | None:
    """Delete the meta row ``key``; its value, or None if there was none."""
    row = w.query_one(_sql.TAKE_META, (key,))
    return None if row is None else str(row[0])


def prune_finished(w: Writer, before: float, limit: int, at: float | None = None) -> list[str]:
    """Delete up to ``limit`` workflows that finished at or before ``before``, oldest first, with every
    row they left; return their ids. Each leaves a tombstone (pruned ``at``; None: not).

    Selected inside the write transaction (on PostgreSQL, locked, skipping rows another prune
    holds), so a workflow is deleted once, whoever else prunes. A finished workflow holds no
    timer, procedure, wait or subscription (its last step dropped them) and takes no message,
    but its rows are deleted in each table all the same: a database edited by hand may hold some.
    """
    d = w.dialect
    ids = [
        r[0]
        for r in w.query_all(
            f"SELECT id FROM {{s}}.workflows{d.indexed('workflows_finished')} "
            f"WHERE finished_at IS NOT NULL AND finished_at <= ? ORDER BY finished_at LIMIT ?"
            f"{' FOR UPDATE SKIP LOCKED' if d.skip_locked else ''}",
            (before, limit),
        )
    ]
    for start in range(0, len(ids), PRUNE_CHUNK):
        chunk = ids[start : start + PRUNE_CHUNK]
        if at is not None:
            _tombstones.bury(w, chunk, at)
        for table in WORKFLOW_TABLES:
            _delete_of(w, table, "workflow_id", "text", chunk, None)
        cond, params = d.any_of("id", chunk, "text")
        w.execute(f"DELETE FROM {{s}}.workflows WHERE {cond} AND finished_at IS NOT NULL", params)
        # The one row a pruned workflow leaves in another's: its children (detached, or still
        # ending) name it as their parent. Unlinked, so that a new workflow started under its id
        # (``reuse_id``) neither lists them as its own nor takes their outcomes (``DELIVER_CHILD``).
        cond, params = d.any_of("parent_id", chunk, "text")
        w.execute(f"UPDATE {{s}}.workflows SET parent_id = NULL WHERE {cond}", params)  # by index
    if ids:
        for wid in ids:
            w.waits.pop(wid, None)  # a finished workflow's, remembered as awaiting nothing
        w.execute(_sql.ADD_PRUNED, (str(len(ids)),))
    return ids


def external_done(w: Writer, seq: int, result: str) -> None:
    """Delete request ``seq`` and keep its result for the process that posted it."""
    w.execute(_sql.DELETE_EXTERNAL, (seq,))
    w.execute(_sql.SET_META, (f"external_result_{seq}", result))


def delete_external(w: Writer, seqs: list[int]) -> None:
    """Delete handled requests."""
    _delete_of(w, "external", "seq", "bigint", seqs, None)
