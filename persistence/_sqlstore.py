"""``SqlStore``: the ``Store`` methods both backends share, written once over the shared SQL.

A backend (``SqliteStore``, ``PgStore``) subclasses it and supplies how it is opened and closed,
its ``dialect``, its writer (``_writer``, a ``persistence._writer.Writer``), and a few
primitives: ``_read`` (a function of a read connection), ``_snapshot`` (several reads seen at
one instant), ``_external`` (a short write of a store that does not own the database),
``changed``, ``owner_info`` and ``read_table``. Everything else (every read the runtime and the
tools run, every write they queue) is here.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Self, TypeVar

from persistence import _sql, _talk, _tombstones, _writes
from persistence._errors import PersistenceError, StoreClosed
from persistence._history import step_of
from persistence._promise import Promise
from persistence._sql import Dialect
from persistence._talk import AskRow
from persistence._tombstones import Tombstone
from persistence._types import (
    CANCEL,
    FINISHED,
    RUNNING,
    STATUSES,
    Delivered,
    Dropped,
    ExternalRow,
    HistoryRow,
    InboxRow,
    NewWorkflow,
    ProcedureRow,
    StepAck,
    StepWrite,
    Store,
    TimerRow,
    WorkflowRecord,
    browse_check,
    merge_pages,
)
from persistence._writer import Writer

T = TypeVar("T")

HISTORY_LIMIT_KEY = "history_limit"  # in the meta table: the limit its owning system keeps

# What ``_snapshot`` gives its function: run a template with params, get its rows.
Query = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


def _record(row: tuple[Any, ...]) -> WorkflowRecord:
    return WorkflowRecord(
        id=row[0], type=row[1], status=row[2], parent_id=row[3], detached=bool(row[4]),
        test_mode=bool(row[5]), continuation=row[6], fingerprint=row[7], waiting_on=row[8],
        result=row[9], error=row[10], step_seq=int(row[11]),
        created_at=row[12], updated_at=row[13], recent_steps=row[14], finished_at=row[15],
    )


def _procedure(row: tuple[Any, ...]) -> ProcedureRow:
    return ProcedureRow(row[0], row[1], row[2], row[3], row[4], int(row[5]), row[6], row[7], row[8])


def _inbox(row: tuple[Any, ...]) -> InboxRow:
    return InboxRow(int(row[0]), row[1], row[2], row[3], row[4], row[5])


def _timer(row: tuple[Any, ...]) -> TimerRow:
    return TimerRow(int(row[0]), row[1], row[2], row[3])


def recent_steps(workflow_id: str, text: str | None) -> list[HistoryRow]:
    """The steps a workflow's row describes (its ``recent_steps``), as history events.

    Each line is ``[at, event, detail]`` JSON, ``at`` in milliseconds. A line that is not (the
    row was edited by hand) is kept as an ``unreadable_step`` event holding the line, not
    dropped.
    """
    events = []
    for line in text.split("\n") if text else ():
        try:
            at_ms, event, detail = json.loads(line)
            events.append(HistoryRow(None, workflow_id, at_ms / 1000, str(event), json.dumps(detail)))
        except (ValueError, TypeError):
            events.append(HistoryRow(None, workflow_id, 0.0, "unreadable_step", json.dumps({"line": line})))
    return events


def _history_events(steps: list[HistoryRow], rows: list[Any]) -> list[tuple[int, int, int, HistoryRow]]:
    """The steps a workflow's row describes and its history table's ``rows`` (by seq, as read),
    in history order, each with what it is ordered by."""
    # By millisecond, the precision the steps are kept at; in one millisecond, steps in
    # their order (those the row no longer describes are in the table), then other events.
    events: list[tuple[int, int, int, HistoryRow]] = []
    for i, h in enumerate(steps):
        n = step_of(h.detail)
        events.append((round(h.at * 1000), 0, n if n is not None else i, h))
    for i, r in enumerate(rows):
        h = HistoryRow(int(r[0]), *r[1:])
        n = step_of(h.detail) if h.event not in FINISHED else None
        events.append((int(r[2] * 1000), 0 if n is not None else 1, n if n is not None else i, h))
    events.sort(key=lambda e: e[:3])
    return events


class SqlStore(Store):
    """The shared part of the SQL stores (see the module's docstring for what a backend adds)."""

    dialect: Dialect
    path: str
    inbox_limit: int
    _closed: bool
    _close_lock: threading.Lock
    _writer: Writer | None

    # -- what a backend supplies ------------------------------------------------------------------
    def _read(self, fn: Callable[[Any], T]) -> T:
        """``fn(connection)`` on a read-only connection, errors as the store's."""
        raise NotImplementedError

    def _snapshot(self, fn: Callable[[Query], T]) -> T:
        """``fn(query)``, every query seeing the database at one instant."""
        raise NotImplementedError

    def _external(self, fn: Callable[[Any], T]) -> T:
        """``fn(connection)`` as a short write transaction of its own (a store that does not own
        the database writes only its requests for the owner, and takes their results)."""
        raise NotImplementedError

    def _notify_owner(self, conn: Any, seq: int) -> None:
        """Tell the owner that request ``seq`` is there (a backend whose owner polls: nothing)."""

    def _close_connections(self) -> None:
        """Finish queued writes and close every connection (once)."""
        raise NotImplementedError

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Finish queued writes, close every connection and give up ownership (idempotent)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._close_connections()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(
                f"the store on {self.path} is closed; open it again with open_store().",
                path=self.path,
            )

    def _write(self, fn: Callable[[Writer], Any], *, here: bool = False) -> Promise[Any]:
        self._check_open()
        if self._writer is None:
            raise PersistenceError(
                f"the store on {self.path} was opened with owner=False: it only reads (and may "
                f"post_external requests for the owner). Open it with owner=True to write.",
                path=self.path,
            )
        return self._writer.submit(fn, here=here)

    def _write_wait(self, fn: Callable[[Writer], Any]) -> Any:
        return self._write(fn).result()

    def _rows(self, template: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        sql = self.dialect.sql(template)
        return self._read(lambda c: list(c.execute(sql, params).fetchall()))

    def _rows_in(self, template: str, keys: list[str]) -> list[tuple[Any, ...]]:
        """The rows of ``template``, whose one parameter list is ``IN_CHUNK`` keys, for every key
        of ``keys`` (a statement per chunk; the last one padded with a key it holds)."""
        keys = list(dict.fromkeys(keys))
        out: list[tuple[Any, ...]] = []
        for i in range(0, len(keys), _sql.IN_CHUNK):
            chunk = keys[i:i + _sql.IN_CHUNK]
            out.extend(self._rows(template, tuple(chunk + [chunk[0]] * (_sql.IN_CHUNK - len(chunk)))))
        return out

    # -- writes -------------------------------------------------------------------------------
    def create_workflow(self, wf: NewWorkflow) -> bool:
        """Insert ``wf``; False (and nothing written) if the id exists."""
        return self.create_workflows([wf])[0]

    def create_workflows(self, wfs: list[NewWorkflow]) -> list[bool]:
        """Insert many workflows in one transaction; for each, False if its id existed."""
        created: list[bool] = self.submit_create_workflows(wfs).result()
        return created

    def submit_create_workflows(self, wfs: list[NewWorkflow]) -> Promise[list[bool]]:
        """``create_workflows``, queued: the future resolves after COMMIT."""
        wfs = list(wfs)
        return self._write(lambda w: _writes.insert_workflows(w, wfs))

    def submit_step(self, step: StepWrite, *, here: bool = False) -> Promise[StepAck]:
        """Queue ``step`` for the group-commit writer; the future resolves after COMMIT.

        ``here``: from an engine thread, staged until it flushes (``flush_staged``).
        """
        write = functools.partial(_writes.apply_step, step=step, limit=self.inbox_limit)
        writer = self._writer
        if writer is None or self._closed:
            return self._write(write, here=here)  # (raises why not)
        return writer.submit(write, here=here)

    def flush_staged(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def staged_writes(self) -> int:
        return self._writer.staged() if self._writer is not None else 0

    def barrier(self, timeout: float | None = None) -> None:
        """Return once every write queued before this call has committed or failed.

        Writes run in queue order, so an empty write queued now settles after all of them.
        """
        self._write(lambda w: None).result(timeout)

    def append_inbox(
        self, workflow_id: str, kind: str, name: str, payload: bytes, *, at: float,
        external_seq: int | None = None,
    ) -> Delivered:
        """Append a message to a running workflow's inbox (signal, cancel, child outcome)."""
        delivered: Delivered = self.submit_append_inbox(
            workflow_id, kind, name, payload, at=at, external_seq=external_seq
        ).result()
        return delivered

    def submit_append_inbox(
        self, workflow_id: str, kind: str, name: str, payload: bytes, *, at: float,
        external_seq: int | None = None,
    ) -> Promise[Delivered]:
        """``append_inbox``, queued: the future resolves after COMMIT."""
        return self._write(
            lambda w: _writes.append_inbox(
                w, workflow_id, kind, name, payload, at, self.inbox_limit, external_seq
            )
        )

    def broadcast(
        self, name: str, filter_key: str, payload: bytes, *, at: float,
        dropped: list[tuple[str, Dropped]] | None = None,
    ) -> list[Delivered]:
        """Append a signal to every subscriber of ``(name, filter_key)``, in one transaction."""
        got, lost = self.submit_broadcast(name, filter_key, payload, at=at).result()
        if dropped is not None:
            dropped.extend(lost)
        return list(got)

    def submit_broadcast(
        self, name: str, filter_key: str, payload: bytes, *, at: float
    ) -> Promise[tuple[list[Delivered], list[tuple[str, Dropped]]]]:
        """``broadcast``, queued: the future resolves after COMMIT with what was delivered and
        what was dropped (``(workflow_id, why)``)."""
        return self._write(
            lambda w: _writes.broadcast(w, name, filter_key, payload, at, self.inbox_limit)
        )

    def procedure_finished(
        self, key: str, *, result: bytes | None, error: str | None, attempts: int
    ) -> bool:
        """Record a procedure's outcome (status done or failed); False if the row is gone."""
        return bool(self._write_wait(
            lambda w: _writes.procedure_finished(w, key, result, error, attempts)
        ))

    def procedure_retry(self, key: str, *, attempts: int, next_attempt_at: float) -> bool:
        """Record a failed attempt and when to try again; False if the row is gone."""
        return bool(self._write_wait(
            lambda w: _writes.procedure_retry(w, key, attempts, next_attempt_at)
        ))

    def post_external(
        self, kind: str, workflow_id: str, name: str | None, payload: str | None, *, at: float
    ) -> int:
        """Append a request for the owner (works without owning the database). Returns its seq."""
        self._check_open()
        _writes.check_external(self.path, kind, workflow_id)
        values = (kind, workflow_id, name, payload, at)
        if self._writer is not None:
            return int(self._write_wait(lambda w: _writes.insert_external(w, values)))
        sql = self.dialect.sql(_sql.INSERT_EXTERNAL + " RETURNING seq")

        def insert(conn: Any) -> int:
            seq = int(conn.execute(sql, values).fetchall()[0][0])
            self._notify_owner(conn, seq)
            return seq

        return self._external(insert)

    def external_done(self, seq: int, result: str) -> None:
        """Delete the handled request ``seq`` and keep ``result`` (text) for the process that
        posted it, in one transaction (``take_external_result`` reads it back)."""
        self._write_wait(lambda w: _writes.external_done(w, seq, result))

    def take_external_result(self, seq: int) -> str | None:
        """The result the owner left for request ``seq``, removed as it is read; None while the
        request is not done. Works without owning the database."""
        self._check_open()
        key = f"external_result_{seq}"
        if not self._rows(_sql.META_VALUE, (key,)):
            return None  # not done yet: a read, no write transaction
        if self._writer is not None:
            value: str | None = self._write_wait(lambda w: _writes.take_meta(w, key))
            return value
        sql = self.dialect.sql(_sql.TAKE_META)

        def take(conn: Any) -> str | None:
            rows = conn.execute(sql, (key,)).fetchall()
            return str(rows[0][0]) if rows else None

        return self._external(take)

    def prune_finished(self, before: float, limit: int = 1000, *, at: float | None = None) -> list[str]:
        """Delete up to ``limit`` workflows that finished at or before ``before`` (oldest first), with
        every row they left in any table, in one transaction; return their ids.

        Call it again until it returns fewer than ``limit``: each call is one short write, so
        the steps of running workflows queued meanwhile commit between two calls.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"prune_finished() limit must be a positive int, got {limit!r}")
        pruned_at = time.time() if at is None else float(at)
        ids: list[str] = self._write_wait(lambda w: _writes.prune_finished(w, float(before), limit, pruned_at))
        return ids

    def tombstone(self, workflow_id: str) -> Tombstone | None:
        """What a pruned workflow of this id left (its tombstone), or None."""
        rows = self._rows(_tombstones.TOMBSTONE, (workflow_id,))
        return _tombstones.tombstone(rows[0]) if rows else None

    def tombstones(self, workflow_ids: list[str]) -> dict[str, Tombstone]:
        """The tombstones of those of ``workflow_ids`` that have one, by id."""
        return {r[0]: _tombstones.tombstone(r) for r in self._rows_in(_tombstones.TOMBSTONES, workflow_ids)}

    def expire_tombstones(self, before: float) -> int:
        """Delete the tombstones left by prunes before ``before``; how many. A read of the
        index's first entry first: no write while none is that old."""
        oldest = self._rows(_tombstones.OLDEST)[0][0]
        if oldest is None or oldest >= before:
            return 0
        n: int = self._write_wait(lambda w: _tombstones.expire(w, float(before)))
        return n

    def oldest_reply(self) -> float | None:
        """When the earliest answered ask still kept was answered, or None (by index)."""
        at: float | None = self._rows(_talk.oldest_reply_sql(self.dialect))[0][0]
        return at

    def expire_replies(self, before: float, limit: int = 1000) -> int:
        """Delete up to ``limit`` answered asks answered at or before ``before`` (oldest first),
        their replies with them, in one transaction; how many. A pending ask is never deleted.

        Call it again until it returns fewer than ``limit``, as ``prune_finished``.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"expire_replies() limit must be a positive int, got {limit!r}")
        n: int = self._write_wait(lambda w: _talk.expire_replies(w, float(before), limit))
        return n

    def tombstone_count(self) -> int:
        """How many pruned workflows' ids are kept taken (their tombstones)."""
        return int(self._rows(_tombstones.COUNT)[0][0])

    def delete_external(self, seqs: list[int]) -> None:
        """Delete handled requests."""
        seqs = list(seqs)
        self._write_wait(lambda w: _writes.delete_external(w, seqs))

    # -- reads --------------------------------------------------------------------------------
    def _finished_at(self, fn: str) -> float | None:
        at: float | None = self._rows(
            f"SELECT {fn}(finished_at) FROM {{s}}.workflows"
            f"{self.dialect.indexed('workflows_finished')} WHERE finished_at IS NOT NULL"
        )[0][0]
        return at

    def oldest_finished(self) -> float | None:
        """When the workflow that finished first (of those still kept) ended, or None (by index)."""
        return self._finished_at("min")

    def newest_finished(self) -> float | None:
        """When the workflow that finished last ended, or None (by index)."""
        return self._finished_at("max")

    def pruned_total(self) -> int:
        """How many finished workflows were ever pruned from this database."""
        rows = self._rows(_sql.PRUNED_TOTAL)
        return int(rows[0][0]) if rows else 0

    def take_external(self, after_seq: int) -> list[ExternalRow]:
        """Requests with seq > after_seq, oldest first (the owner deletes them when done)."""
        rows = self._rows(_sql.EXTERNAL_AFTER, (after_seq,))
        return [ExternalRow(int(r[0]), r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def load_workflow(self, workflow_id: str) -> WorkflowRecord | None:
        """Return the workflow's row, or None if there is no such workflow."""
        rows = self._rows(_sql.WORKFLOW, (workflow_id,))
        return _record(rows[0]) if rows else None

    def load_workflows(self, workflow_ids: list[str]) -> dict[str, WorkflowRecord]:
        """The rows of those of ``workflow_ids`` that exist, by id."""
        return {r[0]: _record(r) for r in self._rows_in(_sql.WORKFLOWS, workflow_ids)}

    def scheduled_tick(self, workflow_id: str) -> float | None:
        rows = self._rows(_sql.SCHEDULED_TICK, (workflow_id,))
        return float(rows[0][0]) if rows else None

    def load_state(
        self, workflow_id: str
    ) -> tuple[WorkflowRecord | None, list[InboxRow], list[TimerRow], list[ProcedureRow]]:
        """The workflow's row, inbox, timers and procedures, read in one snapshot."""

        def run(q: Query) -> tuple[Any, ...]:
            rows = q(_sql.WORKFLOW, (workflow_id,))
            if not rows:
                return None, [], [], []
            return (
                _record(rows[0]),
                [_inbox(r) for r in q(_sql.INBOX, (workflow_id,))],
                [_timer(r) for r in q(_sql.TIMERS, (workflow_id,))],
                [_procedure(r) for r in q(_sql.PROCEDURES, (workflow_id,))],
            )

        state: tuple[Any, ...] = self._snapshot(run)
        return state

    def inbox(self, workflow_id: str) -> list[InboxRow]:
        """The workflow's buffered messages, in arrival order."""
        return [_inbox(r) for r in self._rows(_sql.INBOX, (workflow_id,))]

    def timers(self, workflow_id: str) -> list[TimerRow]:
        """The workflow's armed timers, soonest first."""
        return [_timer(r) for r in self._rows(_sql.TIMERS, (workflow_id,))]

    def procedures(self, workflow_id: str) -> list[ProcedureRow]:
        """The workflow's procedure calls (pending or finished, not yet consumed)."""
        return [_procedure(r) for r in self._rows(_sql.PROCEDURES, (workflow_id,))]

    def subscribers(self, name: str, filter_key: str) -> list[str]:
        """Ids of the workflows subscribed to ``(name, filter_key)``."""
        return [r[0] for r in self._rows(_sql.SUBSCRIBERS, (name, filter_key))]

    def timers_due(self, before: float, limit: int) -> list[TimerRow]:
        """Timers due before ``before``, soonest first (by index)."""
        return [_timer(r) for r in self._rows(_sql.TIMERS_DUE, (before, limit))]

    def next_timer_due(self) -> float | None:
        """Return the due time of the soonest armed timer, or None (by index)."""
        due: float | None = self._rows(_sql.NEXT_TIMER)[0][0]
        return due

    def procedures_to_run(self) -> Iterator[ProcedureRow]:
        """Every pending (not finished) procedure, soonest attempt first."""
        rows = self._rows(
            f"SELECT {_sql.PROCEDURE_COLUMNS} FROM {{s}}.procedures"
            f"{self.dialect.indexed('procedures_pending')} WHERE status = 'pending' "
            f"ORDER BY next_attempt_at"
        )
        return iter([_procedure(r) for r in rows])

    def workflows_with_work(self) -> Iterator[str]:
        """Ids of running workflows that have work now (by index, see ``_sql``'s queries)."""
        return iter([r[0] for r in self._rows(self.dialect.with_work)])

    def workflows_cancelling(self) -> set[str]:
        """Ids of the workflows with a cancel waiting in their inbox (one query, by index)."""
        return {r[0] for r in self._rows(_sql.CANCELLING, (CANCEL,))}

    def list_workflows(
        self,
        status: str | None = None,
        type: str | None = None,
        parent_id: str | None = None,
        limit: int | None = None,
    ) -> list[WorkflowRecord]:
        """Workflows matching every given filter, oldest first."""
        if limit is not None and status is None and parent_id is None:
            # The first ``limit`` of each status, from its range of the index (workflows_listed,
            # or workflows_type), put in order by the same ORDER BY: the first ``limit`` of all
            # are among them. Ordering every workflow to show the first 50 cost 42 ms with
            # 50,000 (as ``browse_workflows``, a status is one of STATUSES).
            by_type = " AND type = ?" if type is not None else ""
            ranges = " UNION ALL ".join(
                f"SELECT * FROM (SELECT {_sql.WORKFLOW_COLUMNS} FROM {{s}}.workflows "
                f"WHERE status = ?{by_type} ORDER BY created_at, id LIMIT ?) AS r{i}"
                for i in range(len(STATUSES))
            )
            args = [p for st in STATUSES for p in (st, *((type,) if type is not None else ()), limit)]
            sql = f"SELECT * FROM ({ranges}) AS u ORDER BY created_at, id LIMIT ?"
            return [_record(r) for r in self._rows(sql, (*args, limit))]
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("status", status), ("type", type), ("parent_id", parent_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = f"SELECT {_sql.WORKFLOW_COLUMNS} FROM {{s}}.workflows"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_record(r) for r in self._rows(sql, tuple(params))]

    def browse_workflows(
        self,
        *,
        status: str | None = None,
        type: str | None = None,
        id_prefix: str | None = None,
        newest_first: bool = True,
        after: tuple[float, str] | None = None,
        limit: int = 50,
    ) -> list[WorkflowRecord]:
        """A page of workflows in creation order, after the ``(created_at, id)`` ``after``.

        One range of ``workflows_listed`` (or ``workflows_type``, given a type) per status, each
        at most ``limit`` long, merged, in one snapshot: the id prefix is matched on the index's
        own id, so no row is read that is not shown. Ids compare in code point order (the order
        Python sorts them in) on both backends.
        """
        statuses = browse_check(status, id_prefix, after, limit)
        by_code_point = self.dialect.binary
        where = ["status = ?"]
        params: list[Any] = []
        if type is not None:
            where.append("type = ?")
            params.append(type)
        if id_prefix:
            where.append("substr(id, 1, ?) = ?")
            params += [len(id_prefix), id_prefix]
        if after is not None:
            where.append(f"(created_at, id{by_code_point}) {'<' if newest_first else '>'} (?, ?)")
            params += [float(after[0]), after[1]]
        order = "DESC" if newest_first else "ASC"
        # Two statements in one snapshot. The page's keys first, from the index alone (every
        # column the filters and the order name is in it: an index-only scan, which on
        # PostgreSQL tests a prefix without reading the rows it skips), one range per status in
        # one statement; then the rows of the page, by primary key.
        ranges = " UNION ALL ".join(
            f"SELECT * FROM (SELECT created_at, id FROM {{s}}.workflows WHERE {' AND '.join(where)} "
            f"ORDER BY created_at {order}, id{by_code_point} {order} LIMIT ?) AS r{i}"
            for i in range(len(statuses))
        )
        keys_params = tuple(p for st in statuses for p in (st, *params, limit))

        def read(q: Query) -> list[WorkflowRecord]:
            keys = sorted(((float(at), str(k)) for at, k in q(ranges, keys_params)),
                          reverse=newest_first)[:limit]
            if not keys:
                return []
            rows = q(f"SELECT {_sql.WORKFLOW_COLUMNS} FROM {{s}}.workflows WHERE id IN "
                     f"({', '.join('?' for _ in keys)})", tuple(k for _, k in keys))
            return [_record(r) for r in rows]

        pages = [self._snapshot(read)]
        return merge_pages(pages, newest_first, limit)

    def children_of(self, parent_ids: list[str], limit: int) -> dict[str, list[WorkflowRecord]]:
        """The first ``limit`` children of each of ``parent_ids``, oldest first, in one query
        (by the parent index): a tree costs a round trip per level, not one per workflow."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"children_of() limit must be a positive int, got {limit!r}")
        ids = list(dict.fromkeys(parent_ids))
        out: dict[str, list[WorkflowRecord]] = {p: [] for p in ids}
        for start in range(0, len(ids), 500):  # bounded statements, whatever the fan-out
            chunk = ids[start:start + 500]
            sql = (
                f"SELECT {_sql.WORKFLOW_COLUMNS} FROM (SELECT {_sql.WORKFLOW_COLUMNS}, row_number() "
                f"OVER (PARTITION BY parent_id ORDER BY created_at, id) AS n FROM {{s}}.workflows "
                f"WHERE parent_id IN ({', '.join('?' for _ in chunk)})) AS c WHERE n <= ? "
                f"ORDER BY parent_id, n"
            )
            for r in self._rows(sql, (*chunk, limit)):
                rec = _record(r)
                out[str(rec.parent_id)].append(rec)
        return out

    def subscriptions(self, workflow_id: str) -> list[tuple[str, str]]:
        """The workflow's subscriptions, ``(name, filter_key)``, by name (by index)."""
        b = self.dialect.binary
        rows = self._rows(
            f"SELECT name, filter_key FROM {{s}}.subscriptions WHERE workflow_id = ? "
            f"ORDER BY name{b}, filter_key{b}",
            (workflow_id,),
        )
        return [(str(n), str(k)) for n, k in rows]

    def count_workflows(self) -> dict[tuple[str, str], int]:
        """{(type, status): count}."""
        return {(t, s): int(n) for t, s, n in self._rows(_sql.COUNT_WORKFLOWS)}

    def history(self, workflow_id: str, limit: int = 100) -> list[HistoryRow]:
        """The workflow's newest ``limit`` history events, oldest first.

        The events of the history table (ends, blocks and resumes, dropped signals) and the
        newest steps its row describes (``seq`` None; what woke each step), in time order; in
        one millisecond, steps come before the table's events (an end is written by its last
        step).
        """
        return self.history_from(workflow_id, limit)[0]

    def history_from(self, workflow_id: str, limit: int = 100) -> tuple[list[HistoryRow], int]:
        """``history``, and the position of its first event in the whole history: the events
        before it that a history limit dropped (counted by the table's "trimmed" row) or hides,
        and those ``limit`` left out of the rows it read (exact where it reads every row, as
        ``history_page`` has it do where reading less could give another page)."""
        counted = self._rows(_sql.HISTORY_TRIMMED, (workflow_id,))
        gone = int(counted[0][0]) if counted else 0
        rows = [r for r in self._rows(_sql.HISTORY, (workflow_id, limit + 1)) if r[3] != _sql.TRIMMED]
        recent = self._rows(_sql.RECENT_STEPS, (workflow_id,))
        events = _history_events(recent_steps(workflow_id, recent[0][0] if recent else None), rows)
        keep = self._kept_steps()
        if keep is not None:
            # The row and the table hold a few more steps than the limit between two trims: the
            # history is the newest ``keep`` steps all the same, and the events among them.
            at_step = [i for i, e in enumerate(events) if e[1] == 0]
            if len(at_step) > keep:
                gone += at_step[-keep]
                events = events[at_step[-keep]:]
        shown = [e[3] for e in events[-limit:]] if limit > 0 else []
        return shown, gone + len(events) - len(shown)

    def history_page(self, workflow_id: str, limit: int | None, before: int | None) -> tuple[list[HistoryRow], int]:
        """``Store.history_page``, reading only the newest rows it needs where that gives the same
        page: a workflow of 100,000 steps shows its last page without reading them all."""
        if limit is None or self._kept_steps() is not None:
            return super().history_page(workflow_id, limit, before)
        counted = self._rows(_sql.HISTORY_TRIMMED, (workflow_id,))
        gone = int(counted[0][0]) if counted else 0
        stored = int(self._rows(_sql.HISTORY_COUNT, (workflow_id,))[0][0]) - len(counted)
        recent = self._rows(_sql.RECENT_STEPS, (workflow_id,))
        steps = recent_steps(workflow_id, recent[0][0] if recent else None)
        total = stored + len(steps)
        end = total if before is None else max(0, min(before - gone, total))
        start = max(0, end - limit)
        if start == end:
            return [], gone + start
        # The page is among the newest ``total - start`` events. Read the steps the row
        # describes and the table's newest rows (by seq) to make that many: the whole history is
        # those, in the order ``history_from`` puts them, after the older rows, if every older
        # row is of an earlier millisecond than each of them (one aggregate over their times,
        # none sent here). Else (events in one millisecond, a clock that went back) the whole
        # history is read.
        want = min(stored, max(0, total - start - len(steps)))
        rows = [r for r in self._rows(_sql.HISTORY, (workflow_id, want + len(counted))) if r[3] != _sql.TRIMMED]
        rows = rows[-want:] if want else []
        if len(rows) < want:  # pruned meanwhile: as the whole read says
            return super().history_page(workflow_id, limit, before)
        events = _history_events(steps, rows)
        if want < stored:
            below = int(rows[0][0]) if rows else 2**62  # (none read: every row is older)
            older = self._rows(_sql.HISTORY_LATEST_BEFORE, (workflow_id, below))[0][0]
            if older is None or int(older * 1000) >= min(e[0] for e in events):
                return super().history_page(workflow_id, limit, before)
        skipped = total - len(events)
        return [e[3] for e in events[start - skipped:end - skipped]], gone + start

    _history_limit: int | None = None
    _history_limit_set = False  # told by the system that owns this store (else: as stored)

    def keep_history(self, limit: int | None) -> None:
        """Keep the newest ``limit`` steps of each workflow's history (None: every step). An
        owning store records it in the database, so that a reader (``wf show``, the web view)
        shows the history the system keeps, not the few more steps held between two trims."""
        self._history_limit, self._history_limit_set = limit, True
        if self._writer is not None:
            value = "none" if limit is None else str(limit)
            self._write_wait(lambda w: w.execute(_sql.PUT_META, (HISTORY_LIMIT_KEY, value)))

    def _kept_steps(self) -> int | None:
        """The history limit that applies: this store's system's, else the one in the database."""
        return self._history_limit if self._history_limit_set else self._stored_history_limit()

    def _stored_history_limit(self) -> int | None:
        """The history limit the database's system keeps (None: every step, or never told)."""
        rows = self._rows(_sql.GET_META, (HISTORY_LIMIT_KEY,))
        value = rows[0][0] if rows else None
        return int(value) if value is not None and value.isdigit() else None

    def history_limit(self) -> int | None:
        """The newest steps of each workflow the history keeps (None: every step)."""
        return self._history_limit

    # -- what workflows say to the outside (``persistence/_talk.py``) ----------------------------
    def submit_ask(
        self, workflow_id: str, ask_id: str, name: str, payload: bytes, *, at: float
    ) -> Promise[tuple[AskRow | None, Delivered | None]]:
        """Store an ask and its request (or find the one stored with that id), queued: the
        future resolves after COMMIT with ``(row found, None)`` or ``(None, request delivered)``."""
        return self._write(lambda w: _talk.ask(w, workflow_id, ask_id, name, payload, at, self.inbox_limit))

    def ask(self, workflow_id: str, ask_id: str) -> AskRow | None:
        """The ask ``ask_id`` of ``workflow_id`` as stored, or None (by primary key)."""
        return _talk.read_ask(self._rows, workflow_id, ask_id)

    def running(self, workflow_id: str) -> bool | None:
        """True if the workflow runs, False if it ended, None if there is no such workflow."""
        return _talk.is_running(self._rows, workflow_id)

    def published(self, workflow_id: str, key: str) -> bytes | None:
        """The value ``workflow_id`` last published under ``key`` (pickled), or None."""
        rows = self._rows(_talk.PUBLISHED_ONE, (workflow_id, key))
        return bytes(rows[0][0]) if rows else None

    def published_of(self, workflow_ids: list[str]) -> dict[str, dict[str, bytes]]:
        """Every value each of ``workflow_ids`` published, by workflow and key (pickled)."""
        out: dict[str, dict[str, bytes]] = {}
        ids = list(dict.fromkeys(workflow_ids))
        for start in range(0, len(ids), _writes.CONSUME_CHUNK):
            cond, params = self.dialect.any_of("workflow_id", ids[start : start + _writes.CONSUME_CHUNK], "text")
            for wid, key, value in self._rows(
                f"SELECT workflow_id, key, value FROM {{s}}.published WHERE {cond} ORDER BY key", params
            ):
                out.setdefault(str(wid), {})[str(key)] = bytes(value)
        return out

    def inbox_depth(self) -> tuple[int, int]:
        (total, most), = self._rows(_sql.INBOX_DEPTH)
        return int(total), int(most)

    def oldest_step_kept(self, workflow_id: str) -> int | None:
        """The number of the oldest step the workflow's history still holds (by index: the
        table's first rows, else the row's newest steps; under a history limit, no older than
        the newest steps it keeps); None if it holds no step."""
        oldest = self._oldest_step_stored(workflow_id)
        keep = self._kept_steps()
        if oldest is None or keep is None:
            return oldest
        rows = self._rows("SELECT step_seq FROM {s}.workflows WHERE id = ?", (workflow_id,))
        return max(oldest, int(rows[0][0]) - keep + 1) if rows else oldest

    def _oldest_step_stored(self, workflow_id: str) -> int | None:
        for (detail,) in self._rows(
            "SELECT detail FROM {s}.history WHERE workflow_id = ? ORDER BY seq LIMIT 50", (workflow_id,)
        ):
            n = step_of(detail)
            if n is not None:
                return n
        recent = self._rows(_sql.RECENT_STEPS, (workflow_id,))
        for h in recent_steps(workflow_id, recent[0][0] if recent else None):
            n = step_of(h.detail)
            if n is not None:
                return n
        return None

    def running_count(self) -> int:
        """Return how many workflows are running (by the range of the status index)."""
        return int(self._rows(
            f"SELECT count(*) FROM {{s}}.workflows{self.dialect.indexed('workflows_listed')} "
            f"WHERE status = '{RUNNING}'"
        )[0][0])
