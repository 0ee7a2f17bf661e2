"""``PgStore``: the ``Store`` on a PostgreSQL database (``postgresql://`` URL).

The same data, writes and reads as ``SqliteStore``, in a schema of its own (``_schema``), with
the group-commit writer of ``_writer`` (pipelined, READ COMMITTED) and a pool of read-only
connections. One running system owns a schema at a time, as one owns a SQLite file: the owner
holds a session advisory lock named after the schema, which the server releases the moment the
owner's session ends (a crash included).

``durability="full"`` commits with ``synchronous_commit=on`` (a commit is on the server's disk
before it is acknowledged); ``"normal"`` with ``synchronous_commit=off``: a crash of the
*database server* can lose the last fraction of a second of acknowledged commits (at most three
times ``wal_writer_delay``, 0.6 s by default), while a crash of this process loses nothing in
either mode, and the database stays consistent in both.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
import psycopg.conninfo
import psycopg_pool

from persistence._errors import DatabaseLocked, PersistenceError, StoreClosed
from persistence._pg import _writes
from persistence._pg._errors import ConnectionLost, display_url, translate_error
from persistence._pg._reducer_db import PgDatabase
from persistence._pg._schema import (
    CONNECT_DEFAULTS,
    PG_SCHEMA_VERSION,
    classify,
    connect,
    migrate,
    not_initialised,
    parse_url,
    quote,
)
from persistence._pg._writer import PgWriter
from persistence._promise import Promise
from persistence._store import recent_steps
from persistence._types import (
    CANCEL,
    Delivered,
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

T = TypeVar("T")

SYNCHRONOUS_COMMIT = {"normal": "off", "full": "on"}
READER_POOL = 8
# Readers wait this long for a connection of the pool, then connect on their own.
POOL_TIMEOUT = 5.0
# changed() says True at least this often (seconds), whatever it was told.
CHANGED_EVERY = 1.0

_WORKFLOW_COLUMNS = (
    "id, type, status, parent_id, detached, test_mode, continuation, fingerprint, waiting_on, "
    "result, error, step_seq, restarts, created_at, updated_at, recent_steps, finished_at"
)
_PROCEDURE_COLUMNS = (
    "key, workflow_id, function, args, status, attempts, result, error, next_attempt_at"
)
_SQL_WORKFLOW = f"SELECT {_WORKFLOW_COLUMNS} FROM {{s}}.workflows WHERE id = %s"
_SQL_INBOX = (
    "SELECT seq, workflow_id, kind, name, payload, created_at FROM {s}.inbox "
    "WHERE workflow_id = %s ORDER BY seq"
)
_SQL_TIMERS = (
    "SELECT id, workflow_id, name, due_at FROM {s}.timers WHERE workflow_id = %s "
    "ORDER BY due_at, id"
)
_SQL_PROCEDURES = (
    f"SELECT {_PROCEDURE_COLUMNS} FROM {{s}}.procedures WHERE workflow_id = %s "
    f"ORDER BY created_at, key"
)
# Running workflows with something to do now; each arm starts from a small set (a partial index)
# and reaches the workflow by its key.
_WITH_WORK = """
SELECT id FROM {s}.workflows WHERE status = 'running' AND fresh
UNION
SELECT i.workflow_id FROM {s}.inbox AS i JOIN {s}.workflows AS w ON w.id = i.workflow_id
  WHERE i.kind != 'signal' AND w.status = 'running'
UNION
SELECT i.workflow_id FROM {s}.inbox AS i
  JOIN {s}.waits AS a ON a.workflow_id = i.workflow_id AND a.name = i.name
  JOIN {s}.workflows AS w ON w.id = i.workflow_id
  WHERE i.kind = 'signal' AND w.status = 'running'
UNION
SELECT p.workflow_id FROM {s}.procedures AS p JOIN {s}.workflows AS w ON w.id = p.workflow_id
  WHERE p.status != 'pending' AND w.status = 'running'
"""


def _record(row: tuple[Any, ...]) -> WorkflowRecord:
    return WorkflowRecord(
        id=row[0], type=row[1], status=row[2], parent_id=row[3], detached=bool(row[4]),
        test_mode=bool(row[5]), continuation=row[6], fingerprint=row[7], waiting_on=row[8],
        result=row[9], error=row[10], step_seq=int(row[11]), restarts=int(row[12]),
        created_at=row[13], updated_at=row[14], recent_steps=row[15], finished_at=row[16],
    )


def _procedure(row: tuple[Any, ...]) -> ProcedureRow:
    return ProcedureRow(row[0], row[1], row[2], row[3], row[4], int(row[5]), row[6], row[7], row[8])


def _owner_key(schema: str) -> str:
    return f"actorflow-owner:{schema}"


# Seconds a new owner waits for the owner lock of a session that is ending.
OWNER_LOCK_GRACE = 1.0


class PgStore(Store):
    """The store on a PostgreSQL database. Build it with ``open_store("postgresql://...")``.

    With ``owner=True`` it owns the URL's schema (one running system per schema) and every write
    goes through the writer thread. With ``owner=False`` it only reads, and may ``post_external``
    requests for the owner.
    """

    def __init__(
        self,
        url: str,
        *,
        durability: str = "normal",
        owner: bool = True,
        inbox_limit: int = 10_000,
    ) -> None:
        if durability not in SYNCHRONOUS_COMMIT:
            raise ValueError(
                f"durability must be one of {', '.join(map(repr, SYNCHRONOUS_COMMIT))}, got "
                f"{durability!r}"
            )
        if not isinstance(inbox_limit, int) or inbox_limit < 1:
            raise ValueError(f"inbox_limit must be a positive int, got {inbox_limit!r}")
        self.url = url
        self._conninfo, self.schema = parse_url(url)
        self.path = display_url(url)
        self.durability = durability
        self.owner = owner
        self.inbox_limit = inbox_limit
        self._s = quote(self.schema)
        self._channel = f"af_external_{self.schema}"[:63]
        self._closed = False
        self._close_lock = threading.Lock()
        self._writer: PgWriter | None = None
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._listener: psycopg.Connection[Any] | None = None
        self._ext_conn: psycopg.Connection[Any] | None = None
        self._ext_lock = threading.Lock()
        self._changed_lock = threading.Lock()
        self._seen_commits = 0
        self._changed_at = 0.0
        self._first_connect = True
        try:
            if owner:
                self._writer = PgWriter(self._connect_writer, self.schema, self.path)
                self._listen()
            else:
                with connect(self._conninfo, self.path, autocommit=True) as conn:
                    version = self._translated(lambda: classify(conn, self.schema, self.path), conn)
                if version == 0:
                    raise not_initialised(self.schema, self.path)
                if version < PG_SCHEMA_VERSION:
                    raise PersistenceError(
                        f"{self.path} has actorflow schema version {version} in schema "
                        f"{self.schema!r}, older than this actorflow's {PG_SCHEMA_VERSION}; start "
                        f"the system on it once (owner=True) to migrate it, then read it.",
                        path=self.path,
                    )
            given = psycopg.conninfo.conninfo_to_dict(self._conninfo)
            options = f"{given.get('options', '')} -c default_transaction_read_only=on".strip()
            self._pool = psycopg_pool.ConnectionPool(
                self._conninfo, min_size=1, max_size=READER_POOL, open=False,
                name=f"actorflow-readers-{self.schema}",
                kwargs={**{k: v for k, v in CONNECT_DEFAULTS.items() if k not in given},
                        "autocommit": True, "options": options,
                        "application_name": "actorflow-reader"},
                timeout=POOL_TIMEOUT,
            )
            self._pool.open(wait=False)
        except BaseException:
            self._close_connections()
            raise

    # -- opening ------------------------------------------------------------------------------
    def _translated(self, fn: Callable[[], T], conn: Any = None) -> T:
        try:
            return fn()
        except psycopg.Error as exc:
            raise translate_error(exc, self.path, conn) from exc

    def _connect_writer(self) -> psycopg.Connection[Any]:
        """A write connection: durability set, schema migrated (first time), owner lock held."""
        conn = connect(
            self._conninfo, self.path, autocommit=True,
            synchronous_commit=SYNCHRONOUS_COMMIT[self.durability],
        )
        try:
            if self._first_connect:
                migrate(conn, self.schema, self.path)
            # A session that just ended (an owner closed or killed a moment ago) keeps its lock
            # until its server process has exited: give it a second before calling it an owner.
            deadline = time.monotonic() + OWNER_LOCK_GRACE
            while True:
                got = self._translated(lambda: conn.execute(
                    "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))",
                    (_owner_key(self.schema),),
                ).fetchone(), conn)
                if got and got[0]:
                    break
                if time.monotonic() >= deadline:
                    raise self._locked(conn)
                time.sleep(0.05)
            facts = [("owner_pid", str(os.getpid())), ("owner_host", socket.gethostname()),
                     ("owner_since", time.strftime("%Y-%m-%dT%H:%M:%S%z")),
                     ("owner_backend_pid", str(conn.info.backend_pid))]
            self._translated(lambda: conn.execute(
                f"INSERT INTO {self._s}.meta (key, value) SELECT * FROM unnest(%s::text[], "
                f"%s::text[]) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                ([k for k, _ in facts], [v for _, v in facts]),
            ), conn)
        except BaseException:
            conn.close()
            raise
        self._first_connect = False
        return conn

    def _locked(self, conn: psycopg.Connection[Any]) -> DatabaseLocked:
        facts = dict(conn.execute(
            f"SELECT key, value FROM {self._s}.meta WHERE key IN "
            f"('owner_pid', 'owner_host', 'owner_since')"
        ).fetchall())
        pid = facts.get("owner_pid")
        return DatabaseLocked(
            f"{self.path} (schema {self.schema})",
            pid=int(pid) if pid and pid.isdigit() else None, host=facts.get("owner_host"),
            since=facts.get("owner_since"),
        )

    def _listen(self) -> None:
        self._listener = connect(self._conninfo, self.path, autocommit=True)
        self._translated(lambda: self._listener.execute(  # type: ignore[union-attr]
            f"LISTEN {quote(self._channel)}"
        ))

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Finish queued writes, close every connection and give up ownership (idempotent)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._close_connections()

    def _close_connections(self) -> None:
        try:
            if self._writer is not None:
                self._writer.close()  # its connection's session, and so the owner lock, ends
        finally:
            for conn in (self._listener, self._ext_conn):
                if conn is not None:
                    conn.close()
            if self._pool is not None:
                self._pool.close()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        role = "owner" if self.owner else "reader"
        return f"<PgStore {self.path} schema={self.schema} {role}{' closed' if self._closed else ''}>"

    def owner_info(self) -> dict[str, object] | None:
        """The running owner of the schema (pid, host, since), or None if none runs."""
        def run(conn: psycopg.Connection[Any]) -> dict[str, object] | None:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
                "((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, 0)",
                (_owner_key(self.schema),),
            ).fetchone()
            if not row or not row[0]:
                return None
            facts = dict(conn.execute(
                f"SELECT key, value FROM {self._s}.meta WHERE key IN "
                f"('owner_pid', 'owner_host', 'owner_since')"
            ).fetchall())
            pid = facts.get("owner_pid")
            return {"pid": int(pid) if pid and pid.isdigit() else None,
                    "host": facts.get("owner_host"), "since": facts.get("owner_since")}

        return self._read(run)

    # -- plumbing -----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(
                f"the store on {self.path} is closed; open it again with open_store().",
                path=self.path,
            )

    def _write(self, fn: Callable[[PgWriter], Any]) -> Promise[Any]:
        self._check_open()
        if self._writer is None:
            raise PersistenceError(
                f"the store on {self.path} was opened with owner=False: it only reads (and may "
                f"post_external requests for the owner). Open it with owner=True to write.",
                path=self.path,
            )
        return self._writer.submit(fn)

    def _write_wait(self, fn: Callable[[PgWriter], T]) -> T:
        value: T = self._write(fn).result()
        return value

    def _read(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        self._check_open()
        assert self._pool is not None
        try:
            with self._pool.connection(timeout=POOL_TIMEOUT) as conn:
                try:
                    return fn(conn)
                except psycopg.Error as exc:
                    err = translate_error(exc, self.path, conn)
                    if not isinstance(err, ConnectionLost):
                        raise err from exc
        except psycopg_pool.PoolTimeout:
            pass
        # The pooled connection was lost, or the pool has none to give (the server went away and
        # the pool is between two attempts): a connection of its own for this read, so that a
        # server that is back answers at once. It says why, if it cannot connect either.
        conn = connect(self._conninfo, self.path, autocommit=True,
                       default_transaction_read_only="on")
        try:
            return fn(conn)
        except psycopg.Error as exc:
            raise translate_error(exc, self.path, conn) from exc
        finally:
            conn.close()

    def _rows(self, template: str, params: Any = ()) -> list[tuple[Any, ...]]:
        sql = _writes.sql_for(template, self.schema)
        return self._read(lambda c: list(c.execute(sql, params).fetchall()))

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

    def submit_step(self, step: StepWrite) -> Promise[StepAck]:
        """Queue ``step`` for the group-commit writer; the future resolves after COMMIT."""
        return self._write(
            functools.partial(_writes.apply_step, step=step, limit=self.inbox_limit)
        )

    def barrier(self, timeout: float | None = None) -> None:
        """Return once every write queued before this call has committed or failed."""
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
        dropped: list[tuple[str, str]] | None = None,
    ) -> list[Delivered]:
        """Append a signal to every subscriber of ``(name, filter_key)``, in one transaction."""
        got, lost = self.submit_broadcast(name, filter_key, payload, at=at).result()
        if dropped is not None:
            dropped.extend(lost)
        return list(got)

    def submit_broadcast(
        self, name: str, filter_key: str, payload: bytes, *, at: float
    ) -> Promise[tuple[list[Delivered], list[tuple[str, str]]]]:
        """``broadcast``, queued: the future resolves after COMMIT."""
        return self._write(
            lambda w: _writes.broadcast(w, name, filter_key, payload, at, self.inbox_limit)
        )

    def procedure_finished(
        self, key: str, *, result: bytes | None, error: str | None, attempts: int
    ) -> bool:
        """Record a procedure's outcome (status done or failed); False if the row is gone."""
        return self._write_wait(
            lambda w: _writes.procedure_finished(w, key, result, error, attempts)
        )

    def procedure_retry(self, key: str, *, attempts: int, next_attempt_at: float) -> bool:
        """Record a failed attempt and when to try again; False if the row is gone."""
        return self._write_wait(lambda w: _writes.procedure_retry(w, key, attempts, next_attempt_at))

    def post_external(
        self, kind: str, workflow_id: str, name: str | None, payload: str | None, *, at: float
    ) -> int:
        """Append a request for the owner (works without owning the schema). Returns its seq."""
        self._check_open()
        _writes.check_external(self.path, kind, workflow_id)
        values = (kind, workflow_id, name, payload, at)
        if self._writer is not None:
            row = self._write_wait(lambda w: w.query_one(_writes.INSERT_EXTERNAL, values))
            assert row is not None
            return int(row[0])
        # Not the owner: a short transaction of its own, then a notification for the owner.
        sql = _writes.sql_for(_writes.INSERT_EXTERNAL, self.schema)

        def insert(conn: psycopg.Connection[Any]) -> int:
            got = conn.execute(sql, values).fetchone()
            assert got is not None
            conn.execute("SELECT pg_notify(%s, %s)", (self._channel, str(got[0])))
            return int(got[0])

        return self._external(insert)

    def _external(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``fn`` on this (not owning) store's own autocommit connection; reconnect once if
        the connection was lost."""
        with self._ext_lock:
            for attempt in (1, 2):
                if self._ext_conn is None or self._ext_conn.closed:
                    self._ext_conn = connect(self._conninfo, self.path, autocommit=True)
                conn = self._ext_conn
                try:
                    return fn(conn)
                except psycopg.Error as exc:
                    err = translate_error(exc, self.path, conn)
                    if isinstance(err, ConnectionLost) and attempt == 1:
                        conn.close()
                        continue
                    raise err from exc
        raise AssertionError("unreachable")

    def external_done(self, seq: int, result: str) -> None:
        """Delete the handled request ``seq`` and keep ``result`` (text) for the process that
        posted it, in one transaction (``take_external_result`` reads it back)."""
        self._write_wait(lambda w: _writes.external_done(w, seq, result))

    def take_external_result(self, seq: int) -> str | None:
        """The result the owner left for request ``seq``, removed as it is read; None while the
        request is not done. Works without owning the schema."""
        self._check_open()
        sql = _writes.sql_for(
            "DELETE FROM {s}.meta WHERE key = %s RETURNING value", self.schema
        )
        key = (f"external_result_{seq}",)
        if not self._rows("SELECT 1 FROM {s}.meta WHERE key = %s", key):
            return None  # not done yet: a read, no write
        if self._writer is not None:
            row = self._write_wait(lambda w: w.query_one(sql, key))
        else:
            row = self._external(lambda conn: conn.execute(sql, key).fetchone())
        return None if row is None else str(row[0])

    def prune_finished(self, before: float, limit: int = 1000) -> list[str]:
        """Delete up to ``limit`` workflows that finished before ``before`` (oldest first), with
        every row they left in any table, in one transaction; return their ids."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"prune_finished() limit must be a positive int, got {limit!r}")
        return self._write_wait(lambda w: _writes.prune_finished(w, float(before), limit))

    def oldest_finished(self) -> float | None:
        """When the workflow that finished first (of those still kept) ended, or None (by index)."""
        at: float | None = self._rows(
            "SELECT min(finished_at) FROM {s}.workflows WHERE finished_at IS NOT NULL"
        )[0][0]
        return at

    def newest_finished(self) -> float | None:
        """When the workflow that finished last ended, or None (by index)."""
        at: float | None = self._rows(
            "SELECT max(finished_at) FROM {s}.workflows WHERE finished_at IS NOT NULL"
        )[0][0]
        return at

    def pruned_total(self) -> int:
        """How many finished workflows were ever pruned from this schema."""
        rows = self._rows("SELECT value FROM {s}.meta WHERE key = 'pruned_total'")
        return int(rows[0][0]) if rows else 0

    def take_external(self, after_seq: int) -> list[ExternalRow]:
        """Requests with seq > after_seq, oldest first (the owner deletes them when done)."""
        rows = self._rows(
            "SELECT seq, kind, workflow_id, name, payload, created_at FROM {s}.external "
            "WHERE seq > %s ORDER BY seq",
            (after_seq,),
        )
        return [ExternalRow(int(r[0]), r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def delete_external(self, seqs: list[int]) -> None:
        """Delete handled requests."""
        seqs = list(seqs)
        self._write_wait(lambda w: w.execute("DELETE FROM {s}.external WHERE seq = ANY(%s)", (seqs,)))

    def changed(self) -> bool:
        """True if a request may have come in since the last call: this store committed, a
        ``post_external`` notified, or a second has passed (a notification sent while the
        listener was away is not kept by the server)."""
        self._check_open()
        with self._changed_lock:
            now = time.monotonic()
            commits = self._writer.commits if self._writer is not None else 0
            seen = commits != self._seen_commits or now - self._changed_at >= CHANGED_EVERY
            self._seen_commits = commits
            listener = self._listener
            if listener is not None:
                try:
                    for _ in listener.notifies(timeout=0.0):
                        seen = True
                except psycopg.Error:
                    seen = True
                    try:
                        self._listener = None
                        listener.close()
                        self._listen()
                    except PersistenceError:
                        pass  # the server is away: the poll above stands in until it is back
            if seen:
                self._changed_at = now
            return seen

    # -- reads --------------------------------------------------------------------------------
    def load_workflow(self, workflow_id: str) -> WorkflowRecord | None:
        """Return the workflow's row, or None if there is no such workflow."""
        rows = self._rows(_SQL_WORKFLOW, (workflow_id,))
        return _record(rows[0]) if rows else None

    def load_state(
        self, workflow_id: str
    ) -> tuple[WorkflowRecord | None, list[InboxRow], list[TimerRow], list[ProcedureRow]]:
        """The workflow's row, inbox, timers and procedures, read in one snapshot."""

        def q(template: str) -> str:
            return _writes.sql_for(template, self.schema)

        def run(c: psycopg.Connection[Any]) -> tuple[Any, ...]:
            with c.transaction():
                c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                row = c.execute(q(_SQL_WORKFLOW), (workflow_id,)).fetchone()
                if row is None:
                    return None, [], [], []
                inbox = c.execute(q(_SQL_INBOX), (workflow_id,)).fetchall()
                timers = c.execute(q(_SQL_TIMERS), (workflow_id,)).fetchall()
                procs = c.execute(q(_SQL_PROCEDURES), (workflow_id,)).fetchall()
            return (
                _record(row),
                [InboxRow(int(r[0]), *r[1:]) for r in inbox],
                [TimerRow(int(r[0]), *r[1:]) for r in timers],
                [_procedure(r) for r in procs],
            )

        result: tuple[Any, ...] = self._read(run)
        return result

    def inbox(self, workflow_id: str) -> list[InboxRow]:
        """The workflow's buffered messages, in arrival order."""
        return [InboxRow(int(r[0]), *r[1:]) for r in self._rows(_SQL_INBOX, (workflow_id,))]

    def timers(self, workflow_id: str) -> list[TimerRow]:
        """The workflow's armed timers, soonest first."""
        return [TimerRow(int(r[0]), *r[1:]) for r in self._rows(_SQL_TIMERS, (workflow_id,))]

    def procedures(self, workflow_id: str) -> list[ProcedureRow]:
        """The workflow's procedure calls (pending or finished, not yet consumed)."""
        return [_procedure(r) for r in self._rows(_SQL_PROCEDURES, (workflow_id,))]

    def subscribers(self, name: str, filter_key: str) -> list[str]:
        """Ids of the workflows subscribed to ``(name, filter_key)``."""
        rows = self._rows(
            "SELECT workflow_id FROM {s}.subscriptions WHERE name = %s AND filter_key = %s",
            (name, filter_key),
        )
        return [r[0] for r in rows]

    def timers_due(self, before: float, limit: int) -> list[TimerRow]:
        """Timers due before ``before``, soonest first (by index)."""
        rows = self._rows(
            "SELECT id, workflow_id, name, due_at FROM {s}.timers WHERE due_at < %s "
            "ORDER BY due_at, id LIMIT %s",
            (before, limit),
        )
        return [TimerRow(int(r[0]), *r[1:]) for r in rows]

    def next_timer_due(self) -> float | None:
        """Return the due time of the soonest armed timer, or None (by index)."""
        due: float | None = self._rows("SELECT min(due_at) FROM {s}.timers")[0][0]
        return due

    def procedures_to_run(self) -> Iterator[ProcedureRow]:
        """Every pending (not finished) procedure, soonest attempt first."""
        rows = self._rows(
            f"SELECT {_PROCEDURE_COLUMNS} FROM {{s}}.procedures WHERE status = 'pending' "
            f"ORDER BY next_attempt_at"
        )
        return iter([_procedure(r) for r in rows])

    def workflows_with_work(self) -> Iterator[str]:
        """Ids of running workflows that have work now (by index, see ``_WITH_WORK``)."""
        return iter([r[0] for r in self._rows(_WITH_WORK)])

    def owns(self, workflow_id: str) -> bool:
        """True: an owning PgStore owns every workflow of its schema (one node per schema; a
        cluster's shard leases come with several nodes)."""
        return True

    def workflows_cancelling(self) -> set[str]:
        """Ids of the workflows with a cancel waiting in their inbox (one query, by index)."""
        return {r[0] for r in self._rows(
            "SELECT DISTINCT workflow_id FROM {s}.inbox WHERE kind = %s", (CANCEL,)
        )}

    def list_workflows(
        self,
        status: str | None = None,
        type: str | None = None,
        parent_id: str | None = None,
        limit: int | None = None,
    ) -> list[WorkflowRecord]:
        """Workflows matching every given filter, oldest first."""
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("status", status), ("type", type), ("parent_id", parent_id)):
            if value is not None:
                where.append(f"{column} = %s")
                params.append(value)
        sql = f"SELECT {_WORKFLOW_COLUMNS} FROM {{s}}.workflows"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, id"
        if limit is not None:
            sql += " LIMIT %s"
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
        """A page of workflows in creation order (as ``SqliteStore``'s): one range of
        ``workflows_listed`` (or ``workflows_type``) per status, ids compared in code point order
        (``COLLATE "C"``, the order Python and SQLite sort them in), in one snapshot."""
        statuses = browse_check(status, id_prefix, after, limit)
        where = ["status = %s"]
        params: list[Any] = []
        if type is not None:
            where.append("type = %s")
            params.append(type)
        if id_prefix:
            where.append("left(id, %s) = %s")
            params += [len(id_prefix), id_prefix]
        if after is not None:
            op = "<" if newest_first else ">"
            where.append(f'(created_at, id COLLATE "C") {op} (%s, %s)')
            params += [float(after[0]), after[1]]
        order = "DESC" if newest_first else "ASC"
        sql = _writes.sql_for(
            f"SELECT {_WORKFLOW_COLUMNS} FROM {{s}}.workflows WHERE {' AND '.join(where)} "
            f'ORDER BY created_at {order}, id COLLATE "C" {order} LIMIT %s',
            self.schema,
        )

        def run(c: psycopg.Connection[Any]) -> list[list[WorkflowRecord]]:
            with c.transaction():
                c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                return [
                    [_record(r) for r in c.execute(sql, (st, *params, limit)).fetchall()]
                    for st in statuses
                ]

        return merge_pages(self._read(run), newest_first, limit)

    def subscriptions(self, workflow_id: str) -> list[tuple[str, str]]:
        """The workflow's subscriptions, ``(name, filter_key)``, by name (by index)."""
        rows = self._rows(
            'SELECT name, filter_key FROM {s}.subscriptions WHERE workflow_id = %s '
            'ORDER BY name COLLATE "C", filter_key COLLATE "C"',
            (workflow_id,),
        )
        return [(str(n), str(k)) for n, k in rows]

    def count_workflows(self) -> dict[tuple[str, str], int]:
        """{(type, status): count}."""
        rows = self._rows("SELECT type, status, count(*) FROM {s}.workflows GROUP BY type, status")
        return {(t, s): int(n) for t, s, n in rows}

    def history(self, workflow_id: str, limit: int = 100) -> list[HistoryRow]:
        """The workflow's newest ``limit`` history events, oldest first (as ``SqliteStore``)."""
        rows = self._rows(
            "SELECT seq, workflow_id, at, event, detail FROM (SELECT * FROM {s}.history "
            "WHERE workflow_id = %s ORDER BY seq DESC LIMIT %s) AS h ORDER BY seq",
            (workflow_id, limit),
        )
        recent = self._rows("SELECT recent_steps FROM {s}.workflows WHERE id = %s", (workflow_id,))
        steps = recent_steps(workflow_id, recent[0][0] if recent else None)
        events = [(round(h.at * 1000), 0, i, h) for i, h in enumerate(steps)]
        events += [(int(r[2] * 1000), 1, i, HistoryRow(int(r[0]), *r[1:])) for i, r in enumerate(rows)]
        events.sort(key=lambda e: e[:3])
        return [e[3] for e in events[-limit:]] if limit > 0 else []

    def read_table(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Run a read-only query (``?`` placeholders, as for reducers); rows as dicts."""
        return self._read(lambda conn: list(PgDatabase(conn).query(sql, params)))

    def running_count(self) -> int:
        """Return how many workflows are running (by the partial index)."""
        return int(self._rows("SELECT count(*) FROM {s}.workflows WHERE status = 'running'")[0][0])
