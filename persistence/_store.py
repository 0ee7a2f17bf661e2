"""``SqliteStore``: the ``Store`` on one SQLite file (or a throwaway in-memory database)."""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import os
import sqlite3
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from persistence import _writes
from persistence._errors import (
    CorruptDatabase,
    ForeignDatabase,
    PersistenceError,
    ReadOnlyDatabase,
    StoreClosed,
)
from persistence._ownership import OwnerLock, current_owner
from persistence._promise import Promise
from persistence._schema import (
    SCHEMA_VERSION,
    classify,
    migrate,
    not_initialised,
    translate_error,
)
from persistence._types import (
    CANCEL,
    RUNNING,
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
from persistence._writer import Writer

T = TypeVar("T")

DURABILITY = {"normal": "NORMAL", "full": "FULL"}
MEMORY = ":memory:"
# Readers kept open between reads; more are opened while many threads read at once.
READER_POOL = 8
BUSY_TIMEOUT = 10.0

_WORKFLOW_COLUMNS = (
    "id, type, status, parent_id, detached, test_mode, continuation, fingerprint, waiting_on, "
    "result, error, step_seq, restarts, created_at, updated_at, recent_steps, finished_at"
)
_PROCEDURE_COLUMNS = (
    "key, workflow_id, function, args, status, attempts, result, error, next_attempt_at"
)

# One workflow's rows, by index (each read is shared by its method and by load_state).
_SQL_WORKFLOW = f"SELECT {_WORKFLOW_COLUMNS} FROM workflows WHERE id = ?"
_SQL_INBOX = (
    "SELECT seq, workflow_id, kind, name, payload, created_at FROM inbox "
    "WHERE workflow_id = ? ORDER BY seq"
)
_SQL_TIMERS = (
    "SELECT id, workflow_id, name, due_at FROM timers WHERE workflow_id = ? ORDER BY due_at, id"
)
_SQL_PROCEDURES = (
    f"SELECT {_PROCEDURE_COLUMNS} FROM procedures WHERE workflow_id = ? ORDER BY created_at, key"
)

# Running workflows with something to do now. Every arm starts from a small set (never-stepped
# workflows by their partial index, control messages by their partial index, buffered signals,
# finished procedures by their partial index) and reaches the workflows table by primary key;
# CROSS JOIN pins that order so the planner never walks the (huge) set of idle workflows.
_WITH_WORK = """
SELECT id FROM workflows INDEXED BY workflows_fresh WHERE status = 'running' AND step_seq = 0
UNION
SELECT i.workflow_id FROM inbox AS i INDEXED BY inbox_control
  CROSS JOIN workflows AS w ON w.id = i.workflow_id
  WHERE i.kind != 'signal' AND w.status = 'running'
UNION
SELECT i.workflow_id FROM inbox AS i
  CROSS JOIN waits AS s ON s.workflow_id = i.workflow_id AND s.name = i.name
  CROSS JOIN workflows AS w ON w.id = i.workflow_id
  WHERE i.kind = 'signal' AND w.status = 'running'
UNION
SELECT p.workflow_id FROM procedures AS p INDEXED BY procedures_finished
  CROSS JOIN workflows AS w ON w.id = p.workflow_id
  WHERE p.status != 'pending' AND w.status = 'running'
"""


def _record(row: tuple[Any, ...]) -> WorkflowRecord:
    return WorkflowRecord(
        id=row[0],
        type=row[1],
        status=row[2],
        parent_id=row[3],
        detached=bool(row[4]),
        test_mode=bool(row[5]),
        continuation=row[6],
        fingerprint=row[7],
        waiting_on=row[8],
        result=row[9],
        error=row[10],
        step_seq=row[11],
        restarts=row[12],
        created_at=row[13],
        updated_at=row[14],
        recent_steps=row[15],
        finished_at=row[16],
    )


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


def _procedure(row: tuple[Any, ...]) -> ProcedureRow:
    return ProcedureRow(*row)


class SqliteStore(Store):
    """The store on one SQLite file, in WAL mode, with one group-commit writer thread.

    Build it with ``open_store``. With ``owner=True`` it owns the file (an exclusive lock; one
    running system per file) and every write goes through the writer thread. With
    ``owner=False`` it only reads, and may ``post_external`` requests for the owner.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: str = "normal",
        owner: bool = True,
        inbox_limit: int = 10_000,
    ) -> None:
        if durability not in DURABILITY:
            raise ValueError(
                f"durability must be one of {', '.join(map(repr, DURABILITY))}, got {durability!r}"
            )
        if not isinstance(inbox_limit, int) or inbox_limit < 1:
            raise ValueError(f"inbox_limit must be a positive int, got {inbox_limit!r}")
        self.memory = str(path) == MEMORY
        self.path = MEMORY if self.memory else os.path.abspath(os.fspath(path))
        self.durability = durability
        self.owner = owner
        self.inbox_limit = inbox_limit
        self._closed = False
        self._close_lock = threading.Lock()
        self._readers: collections.deque[sqlite3.Connection] = collections.deque()
        self._lock: OwnerLock | None = None
        self._writer: Writer | None = None
        self._ext_conn: sqlite3.Connection | None = None
        self._ext_lock = threading.Lock()
        self._dv_lock = threading.Lock()
        self._dv_conn: sqlite3.Connection | None = None
        self._dv_last = 0
        # A reader of a file in a read-only directory with no write-ahead log left: SQLite cannot
        # create the -shm file it reads through, and nothing can change the file, so readers open
        # it immutable.
        self._immutable = False
        # Shared-cache memory databases lock whole tables instead of giving readers snapshots:
        # reads and write transactions take turns on this gate (throwaway use only).
        self._gate: threading.RLock | None = threading.RLock() if self.memory else None
        if self.memory:
            self._uri = f"file:actorflow-{uuid.uuid4().hex}?mode=memory&cache=shared"
            self._open_memory()
        elif owner:
            self._open_owner()
        else:
            self._open_reader_only()

    # -- opening ------------------------------------------------------------------------------
    def _connect(self, *, timeout: float = BUSY_TIMEOUT) -> sqlite3.Connection:
        if self.memory:
            return sqlite3.connect(
                self._uri, uri=True, isolation_level=None, check_same_thread=False
            )
        if self._immutable:
            return sqlite3.connect(
                f"file:{urllib.parse.quote(self.path)}?immutable=1", uri=True,
                isolation_level=None, check_same_thread=False, timeout=timeout,
            )
        return sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=timeout
        )

    def _check_directory(self) -> str:
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            raise PersistenceError(
                f"cannot open {self.path}: the directory {directory} does not exist; create it "
                f"first or pass another path.",
                path=self.path,
            )
        if os.path.isdir(self.path):
            raise PersistenceError(
                f"cannot open {self.path}: it is a directory; pass the path of a database file.",
                path=self.path,
            )
        return directory

    def _open_memory(self) -> None:
        conn = self._connect()
        migrate(conn, self.path, classify(conn, self.path))
        self._writer = Writer(conn, self.path, self._gate)
        self._dv_last = self._writer.commits

    def _open_owner(self) -> None:
        directory = self._check_directory()
        self._lock = OwnerLock(self.path)
        self._lock.acquire()
        conn: sqlite3.Connection | None = None
        try:
            if os.path.exists(self.path) and not os.access(self.path, os.W_OK):
                raise ReadOnlyDatabase(
                    f"{self.path} is read-only; make it writable to run a system on it, or open "
                    f"it with owner=False to read it.",
                    path=self.path,
                )
            if not os.access(directory, os.W_OK):
                raise ReadOnlyDatabase(
                    f"the directory {directory} of {self.path} is read-only, and SQLite needs to "
                    f"create its -wal and -shm files there; make it writable, or open the file "
                    f"with owner=False to read it.",
                    path=self.path,
                )
            self._check_sidecars()
            conn = self._connect()
            version = classify(conn, self.path)
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise PersistenceError(
                    f"{self.path} could not be switched to WAL mode (got {mode!r}); put it on a "
                    f"local file system that supports shared memory.",
                    path=self.path,
                )
            conn.execute(f"PRAGMA synchronous = {DURABILITY[self.durability]}")
            conn.execute("PRAGMA journal_size_limit = 67108864")
            conn.execute("PRAGMA cache_size = -32000")
            migrate(conn, self.path, version)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [(f"owner_{k}", str(v)) for k, v in self._lock.info.items()],
            )
            conn.execute("COMMIT")
            self._writer = Writer(conn, self.path)
            conn = None
            self._dv_conn = self._connect()
            self._dv_last = self._dv_conn.execute("PRAGMA data_version").fetchone()[0]
        except BaseException as exc:
            if conn is not None:
                conn.close()
            err = translate_error(exc, self.path)
            # Another application's file, or no database at all: leave no lock file beside it.
            self._lock.release(remove=isinstance(err, (ForeignDatabase, CorruptDatabase)))
            if err is exc:
                raise
            raise err from exc

    def _check_sidecars(self) -> None:
        """Make the -wal and -shm files writable if a reader left them read-only (SQLite gives
        them the file's mode, and the file was read-only then), or say which one is in the way.

        Without this the owner's first write failed with a message blaming the file and its
        directory, both writable.
        """
        for suffix in ("-wal", "-shm"):
            side = self.path + suffix
            if not os.path.exists(side) or os.access(side, os.W_OK):
                continue
            try:
                st = os.stat(side)
                if st.st_uid != os.geteuid():
                    raise PermissionError(f"owned by uid {st.st_uid}")
                os.chmod(side, (os.stat(self.path).st_mode | 0o600) & 0o7777)
            except OSError as exc:
                raise ReadOnlyDatabase(
                    f"{side} is read-only ({exc}), though {self.path} and its directory are "
                    f"writable: a reader opened the file while it was read-only and SQLite gave "
                    f"its {suffix} file the same mode. Make {side} writable (or delete it while no "
                    f"process has the database open), then start the system again.",
                    path=self.path,
                ) from exc

    def _open_reader_only(self) -> None:
        directory = self._check_directory()
        if not os.path.exists(self.path):
            raise PersistenceError(
                f"no database at {self.path}; check the path (--db), or start a system on it "
                f"first.",
                path=self.path,
            )
        # A file this user may not write (or in a directory it may not write), with no -shm
        # file yet: SQLite would create one (read-only, as the file is, and left behind to stop
        # the owner later) or fail to. With no owner running and no write-ahead log, nothing can
        # change the file, so it is read immutable.
        read_only = not os.access(directory, os.W_OK) or not os.access(self.path, os.W_OK)
        if read_only and not os.path.exists(self.path + "-shm") and current_owner(self.path) is None:
            wal = self.path + "-wal"
            if not os.access(directory, os.W_OK) and os.path.exists(wal) and os.path.getsize(wal) > 0:
                raise ReadOnlyDatabase(
                    f"{self.path} cannot be read here: its directory {directory} is read-only, "
                    f"and SQLite must create {self.path}-shm to read the write-ahead log {wal} "
                    f"that is not yet in the file. Copy the database and its -wal file to a "
                    f"writable directory, or make this one writable.",
                    path=self.path,
                )
            self._immutable = not (os.path.exists(wal) and os.path.getsize(wal) > 0)
        conn = None
        try:
            conn = self._connect()
            version = classify(conn, self.path)
            if version == 0:
                raise not_initialised(self.path)
            if version < SCHEMA_VERSION:
                raise PersistenceError(
                    f"{self.path} has schema version {version}, older than this actorflow's "
                    f"{SCHEMA_VERSION}; start the system on it once (owner=True) to migrate it, "
                    f"then read it.",
                    path=self.path,
                )
            conn.execute("PRAGMA query_only = 1")
            self._readers.append(conn)
            conn = None
            self._dv_conn = self._connect()
            self._dv_last = self._dv_conn.execute("PRAGMA data_version").fetchone()[0]
        except BaseException as exc:
            if conn is not None:
                conn.close()
            err = translate_error(exc, self.path)
            if err is exc:
                raise
            raise err from exc

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Finish queued writes, close every connection and give up ownership (idempotent)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            if self._writer is not None:
                self._writer.close()
        finally:
            for conn in (self._dv_conn, self._ext_conn):
                if conn is not None:
                    conn.close()
            while self._readers:
                self._readers.pop().close()
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        role = "owner" if self.owner else "reader"
        return f"<SqliteStore {self.path} {role}{' closed' if self._closed else ''}>"

    def owner_info(self) -> dict[str, object] | None:
        """Return the running owner of the file (pid, host, since), or None if none runs."""
        if self.memory:
            return None
        return current_owner(self.path)

    # -- plumbing -----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(
                f"the store on {self.path} is closed; open it again with open_store().",
                path=self.path,
            )

    def _write(self, fn: Callable[[Writer], T]) -> Promise[T]:
        self._check_open()
        if self._writer is None:
            raise PersistenceError(
                f"the store on {self.path} was opened with owner=False: it only reads (and may "
                f"post_external requests for the owner). Open it with owner=True to write.",
                path=self.path,
            )
        return self._writer.submit(fn)

    def _write_wait(self, fn: Callable[[Writer], T]) -> T:
        return self._write(fn).result()

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._check_open()
        try:
            conn = self._readers.pop()
        except IndexError:
            conn = self._connect()
            conn.execute("PRAGMA query_only = 1")
        try:
            gate = self._gate if self._gate is not None else contextlib.nullcontext()
            with gate:
                return fn(conn)
        except sqlite3.Error as exc:
            raise translate_error(exc, self.path) from exc
        finally:
            if self._closed or len(self._readers) >= READER_POOL:
                conn.close()
            else:
                self._readers.append(conn)

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self._read(lambda c: c.execute(sql, params).fetchall())

    # -- writes -------------------------------------------------------------------------------
    def create_workflow(self, wf: NewWorkflow) -> bool:
        """Insert ``wf``; False (and nothing written) if the id exists."""
        return self._write_wait(lambda w: _writes.insert_workflow(w.conn, wf))

    def create_workflows(self, wfs: list[NewWorkflow]) -> list[bool]:
        """Insert many workflows in one transaction; for each, False if its id existed."""
        return self.submit_create_workflows(wfs).result()

    def submit_create_workflows(self, wfs: list[NewWorkflow]) -> Promise[list[bool]]:
        """``create_workflows``, queued: the future resolves after COMMIT."""
        wfs = list(wfs)
        return self._write(lambda w: [_writes.insert_workflow(w.conn, wf) for wf in wfs])

    def submit_step(self, step: StepWrite) -> Promise[StepAck]:
        """Queue ``step`` for the group-commit writer; the future resolves after COMMIT."""
        return self._write(functools.partial(_writes.apply_step, step=step, limit=self.inbox_limit))

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
        return self.submit_append_inbox(
            workflow_id, kind, name, payload, at=at, external_seq=external_seq
        ).result()

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
        return got

    def submit_broadcast(
        self, name: str, filter_key: str, payload: bytes, *, at: float
    ) -> Promise[tuple[list[Delivered], list[tuple[str, str]]]]:
        """``broadcast``, queued: the future resolves after COMMIT with what was delivered and
        what was dropped (``(workflow_id, why)``)."""
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
        """Append a request for the owner (works without owning the file). Returns its seq."""
        self._check_open()
        if self._writer is not None:
            return self._write_wait(
                lambda w: _writes.insert_external(
                    w.conn, self.path, kind, workflow_id, name, payload, at
                )
            )
        # Not the owner: a short transaction of its own.
        return self._external_write(
            lambda conn: _writes.insert_external(
                conn, self.path, kind, workflow_id, name, payload, at
            )
        )

    def _external_write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a short write transaction of a store that does not own the file.

        It waits (busy_timeout) for the owner's writer to finish its current commit.
        """
        with self._ext_lock:
            if self._ext_conn is None:
                self._ext_conn = self._connect()
            conn = self._ext_conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    value = fn(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise translate_error(exc, self.path) from exc
            return value

    def external_done(self, seq: int, result: str) -> None:
        """Delete the handled request ``seq`` and keep ``result`` (text) for the process that
        posted it, in one transaction (``take_external_result`` reads it back)."""
        self._write_wait(lambda w: _writes.external_done(w, seq, result))

    def take_external_result(self, seq: int) -> str | None:
        """The result the owner left for request ``seq``, removed as it is read; None while the
        request is not done. Works without owning the file."""
        key = f"external_result_{seq}"

        def take(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if row is not None:
                conn.execute("DELETE FROM meta WHERE key = ?", (key,))
            return None if row is None else str(row[0])

        self._check_open()
        if not self._rows("SELECT 1 FROM meta WHERE key = ?", (key,)):
            return None  # not done yet: a read, no write transaction
        if self._writer is not None:
            return self._write_wait(lambda w: take(w.conn))
        return self._external_write(take)

    def prune_finished(self, before: float, limit: int = 1000) -> list[str]:
        """Delete up to ``limit`` workflows that finished before ``before`` (oldest first), with
        every row they left in any table, in one transaction; return their ids.

        Call it again until it returns fewer than ``limit``: each call is one short write, so
        the steps of running workflows queued meanwhile commit between two calls.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"prune_finished() limit must be a positive int, got {limit!r}")
        return self._write_wait(lambda w: _writes.prune_finished(w, float(before), limit))

    def oldest_finished(self) -> float | None:
        """When the workflow that finished first (of those still kept) ended, or None (by index)."""
        rows = self._rows(
            "SELECT min(finished_at) FROM workflows INDEXED BY workflows_finished "
            "WHERE finished_at IS NOT NULL"
        )
        at: float | None = rows[0][0]
        return at

    def newest_finished(self) -> float | None:
        """When the workflow that finished last ended, or None (by index)."""
        rows = self._rows(
            "SELECT max(finished_at) FROM workflows INDEXED BY workflows_finished "
            "WHERE finished_at IS NOT NULL"
        )
        at: float | None = rows[0][0]
        return at

    def pruned_total(self) -> int:
        """How many finished workflows were ever pruned from this file."""
        rows = self._rows("SELECT value FROM meta WHERE key = 'pruned_total'")
        return int(rows[0][0]) if rows else 0

    def take_external(self, after_seq: int) -> list[ExternalRow]:
        """Requests with seq > after_seq, oldest first (the owner deletes them when done)."""
        rows = self._rows(
            "SELECT seq, kind, workflow_id, name, payload, created_at FROM external "
            "WHERE seq > ? ORDER BY seq",
            (after_seq,),
        )
        return [ExternalRow(*r) for r in rows]

    def delete_external(self, seqs: list[int]) -> None:
        """Delete handled requests."""
        seqs = list(seqs)
        self._write_wait(
            lambda w: w.conn.executemany(
                "DELETE FROM external WHERE seq = ?", [(s,) for s in seqs]
            )
        )

    def changed(self) -> bool:
        """True if another connection committed since the last call (PRAGMA data_version).

        Commits of this store's own writer count as "another connection" too: the check is for
        cheap polling, and a false positive costs one indexed read.
        """
        self._check_open()
        if self.memory:
            assert self._writer is not None
            with self._dv_lock:
                now = self._writer.commits
                seen, self._dv_last = self._dv_last, now
                return now != seen
        assert self._dv_conn is not None
        with self._dv_lock:
            try:
                version: int = self._dv_conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as exc:
                raise translate_error(exc, self.path) from exc
            seen, self._dv_last = self._dv_last, version
            return version != seen

    # -- reads --------------------------------------------------------------------------------
    def load_workflow(self, workflow_id: str) -> WorkflowRecord | None:
        """Return the workflow's row, or None if there is no such workflow."""
        rows = self._rows(_SQL_WORKFLOW, (workflow_id,))
        return _record(rows[0]) if rows else None

    def load_state(
        self, workflow_id: str
    ) -> tuple[WorkflowRecord | None, list[InboxRow], list[TimerRow], list[ProcedureRow]]:
        """The workflow's row, inbox, timers and procedures, read in one snapshot."""

        def run(c: sqlite3.Connection) -> tuple[Any, ...]:
            c.execute("BEGIN")
            try:
                row = c.execute(_SQL_WORKFLOW, (workflow_id,)).fetchone()
                if row is None:
                    return None, [], [], []
                inbox = c.execute(_SQL_INBOX, (workflow_id,)).fetchall()
                timers = c.execute(_SQL_TIMERS, (workflow_id,)).fetchall()
                procs = c.execute(_SQL_PROCEDURES, (workflow_id,)).fetchall()
            finally:
                c.execute("COMMIT")
            return (
                _record(row),
                [InboxRow(*r) for r in inbox],
                [TimerRow(*r) for r in timers],
                [_procedure(r) for r in procs],
            )

        return self._read(run)

    def inbox(self, workflow_id: str) -> list[InboxRow]:
        """The workflow's buffered messages, in arrival order."""
        return [InboxRow(*r) for r in self._rows(_SQL_INBOX, (workflow_id,))]

    def timers(self, workflow_id: str) -> list[TimerRow]:
        """The workflow's armed timers, soonest first."""
        return [TimerRow(*r) for r in self._rows(_SQL_TIMERS, (workflow_id,))]

    def procedures(self, workflow_id: str) -> list[ProcedureRow]:
        """The workflow's procedure calls (pending or finished, not yet consumed)."""
        return [_procedure(r) for r in self._rows(_SQL_PROCEDURES, (workflow_id,))]

    def subscribers(self, name: str, filter_key: str) -> list[str]:
        """Ids of the workflows subscribed to ``(name, filter_key)``."""
        rows = self._rows(
            "SELECT workflow_id FROM subscriptions WHERE name = ? AND filter_key = ?",
            (name, filter_key),
        )
        return [r[0] for r in rows]

    def timers_due(self, before: float, limit: int) -> list[TimerRow]:
        """Timers due before ``before``, soonest first (by index)."""
        rows = self._rows(
            "SELECT id, workflow_id, name, due_at FROM timers WHERE due_at < ? "
            "ORDER BY due_at, id LIMIT ?",
            (before, limit),
        )
        return [TimerRow(*r) for r in rows]

    def next_timer_due(self) -> float | None:
        """Return the due time of the soonest armed timer, or None (by index)."""
        rows = self._rows("SELECT min(due_at) FROM timers")
        due: float | None = rows[0][0]
        return due

    def procedures_to_run(self) -> Iterator[ProcedureRow]:
        """Every pending (not finished) procedure, soonest attempt first."""
        rows = self._rows(
            f"SELECT {_PROCEDURE_COLUMNS} FROM procedures INDEXED BY procedures_pending "
            f"WHERE status = 'pending' ORDER BY next_attempt_at"
        )
        return iter([_procedure(r) for r in rows])

    def workflows_with_work(self) -> Iterator[str]:
        """Ids of running workflows that have work now (by index, see ``_WITH_WORK``)."""
        return iter([r[0] for r in self._rows(_WITH_WORK)])

    def workflows_cancelling(self) -> set[str]:
        """Ids of the workflows with a cancel waiting in their inbox."""
        return {r[0] for r in self._rows("SELECT DISTINCT workflow_id FROM inbox WHERE kind = ?", (CANCEL,))}

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
                where.append(f"{column} = ?")
                params.append(value)
        sql = f"SELECT {_WORKFLOW_COLUMNS} FROM workflows"
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
        at most ``limit`` long, merged: the id prefix is matched on the index's own id, so no row
        is read that is not shown.
        """
        statuses = browse_check(status, id_prefix, after, limit)
        where = ["status = ?"]
        params: list[Any] = []
        if type is not None:
            where.append("type = ?")
            params.append(type)
        if id_prefix:
            where.append("substr(id, 1, ?) = ?")
            params += [len(id_prefix), id_prefix]
        if after is not None:
            where.append("(created_at, id) < (?, ?)" if newest_first else "(created_at, id) > (?, ?)")
            params += [float(after[0]), after[1]]
        order = "DESC" if newest_first else "ASC"
        sql = (
            f"SELECT {_WORKFLOW_COLUMNS} FROM workflows WHERE {' AND '.join(where)} "
            f"ORDER BY created_at {order}, id {order} LIMIT ?"
        )

        def run(c: sqlite3.Connection) -> list[list[WorkflowRecord]]:
            c.execute("BEGIN")  # one snapshot for every status
            try:
                return [
                    [_record(r) for r in c.execute(sql, (st, *params, limit)).fetchall()]
                    for st in statuses
                ]
            finally:
                c.execute("COMMIT")

        return merge_pages(self._read(run), newest_first, limit)

    def subscriptions(self, workflow_id: str) -> list[tuple[str, str]]:
        """The workflow's subscriptions, ``(name, filter_key)``, by name (by index)."""
        rows = self._rows(
            "SELECT name, filter_key FROM subscriptions WHERE workflow_id = ? "
            "ORDER BY name, filter_key",
            (workflow_id,),
        )
        return [(str(n), str(k)) for n, k in rows]

    def count_workflows(self) -> dict[tuple[str, str], int]:
        """{(type, status): count}."""
        rows = self._rows("SELECT type, status, count(*) FROM workflows GROUP BY type, status")
        return {(t, s): n for t, s, n in rows}

    def history(self, workflow_id: str, limit: int = 100) -> list[HistoryRow]:
        """The workflow's newest ``limit`` history events, oldest first.

        The events of the history table (ends, blocks and resumes, dropped signals) and the
        newest steps its row describes (``seq`` None; what woke each step), in time order; in
        one millisecond, steps come before the table's events (an end is written by its last
        step).
        """
        rows = self._rows(
            "SELECT seq, workflow_id, at, event, detail FROM (SELECT * FROM history "
            "WHERE workflow_id = ? ORDER BY seq DESC LIMIT ?) ORDER BY seq",
            (workflow_id, limit),
        )
        recent = self._rows("SELECT recent_steps FROM workflows WHERE id = ?", (workflow_id,))
        steps = recent_steps(workflow_id, recent[0][0] if recent else None)
        # By millisecond, the precision the steps are kept at.
        events = [(round(h.at * 1000), 0, i, h) for i, h in enumerate(steps)]
        events += [(int(r[2] * 1000), 1, i, HistoryRow(*r)) for i, r in enumerate(rows)]
        events.sort(key=lambda e: e[:3])
        return [e[3] for e in events[-limit:]] if limit > 0 else []

    def read_table(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Run a read-only query (the reader connections refuse writes); rows as dicts."""

        def run(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            cur = conn.execute(sql, params)
            if cur.description is None:
                return []
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur]

        return self._read(run)

    def running_count(self) -> int:
        """Return how many workflows are running (by the partial index)."""
        count: int = self._rows(
            f"SELECT count(*) FROM workflows INDEXED BY workflows_running WHERE status = '{RUNNING}'"
        )[0][0]
        return count


def open_store(
    path: str | os.PathLike[str],
    *,
    durability: str = "normal",
    owner: bool = True,
    inbox_limit: int = 10_000,
) -> Store:
    """Open (creating or migrating if needed) the actorflow database at ``path``.

    Args:
        path: The database file, ``":memory:"`` for a throwaway in-process database, or a
            ``postgresql://`` URL (``?schema=name`` names the PostgreSQL schema actorflow keeps
            its tables in, ``actorflow`` by default; needs ``pip install 'actorflow[postgres]'``).
        durability: ``"normal"`` survives a process crash (SQLite synchronous=NORMAL;
            PostgreSQL synchronous_commit=off, where a crash of the database server can lose the
            last fraction of a second); ``"full"`` survives a power loss too (synchronous=FULL,
            one fsync per group commit; synchronous_commit=on).
        owner: Own the database (one running system per file, or per PostgreSQL schema) and
            write. ``False`` opens it for reading and ``post_external`` only, while an owner may
            be running.
        inbox_limit: The most signals a workflow may hold buffered before appends raise
            ``InboxFull``.

    Raises:
        DatabaseLocked, ForeignDatabase, SchemaTooNew, CorruptDatabase, ReadOnlyDatabase,
        DiskFull, PersistenceError: see each error's message for what to do.
    """
    if isinstance(path, str) and path.startswith(("postgresql://", "postgres://")):
        try:
            from persistence._pg._store import PgStore
        except ImportError as exc:
            raise PersistenceError(
                f"opening a PostgreSQL URL needs psycopg, which is not installed ({exc}); "
                f"install it with pip install 'actorflow[postgres]'.",
                path=None,
            ) from exc
        return PgStore(path, durability=durability, owner=owner, inbox_limit=inbox_limit)
    return SqliteStore(path, durability=durability, owner=owner, inbox_limit=inbox_limit)
