"""The PostgreSQL writer: group commit of queued writes, pipelined, at READ COMMITTED.

The algorithm is SQLite's (``persistence/_writer.py``): a batch takes what is queued, runs every
write in one transaction, takes in once what was queued meanwhile, commits once, and only then
resolves the futures; if a write fails, the transaction is rolled back and the batch runs again
with each write in its own savepoint, so that one fails alone.

What a server changes:

- The connection runs in pipeline mode: a batch's statements are sent without waiting for each
  answer (writes return a ``Deferred`` that reads its results after the batch's sync), so a batch
  costs a few round trips, not one per statement. A write that needs an answer at once (a
  reducer's read) syncs there.
- Deadlocks and serialization failures (40P01, 40001) roll the batch back and run it again,
  after a short pause, a few times before running it write by write.
- A lost connection before COMMIT loses nothing: the writer connects again (taking the owner's
  lock again) and runs the batch again. One lost during COMMIT leaves its outcome unknown: its
  writes fail with ``ConnectionLost`` (``maybe_committed``), and the next batch reconnects.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import psycopg.pq

from persistence._errors import PersistenceError, StorageUnavailable, StoreClosed
from persistence._pg._errors import ConnectionLost, Retryable, translate_error
from persistence._pg._reducer_db import PgDatabase
from persistence._pg._writes import Deferred, sql_for
from persistence._promise import Promise

log = logging.getLogger(__name__)

MAX_BATCH = 512
WAITS_CACHE = 100_000
# Deadlocks and serialization failures: runs of a batch before it goes write by write.
RETRIES = 3
# Reconnecting after a lost connection: attempts, and the pause before each (seconds).
RECONNECTS = (0.0, 0.1, 0.5, 1.0, 2.0, 5.0)


class _Op:
    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[PgWriter], Any], future: Promise[Any]) -> None:
        self.fn = fn
        self.future = future


class _Redo(Exception):
    """The optimistic pass failed at write ``index`` (or, with None, as a whole)."""

    def __init__(self, index: int | None, error: BaseException) -> None:
        super().__init__(repr(error))
        self.index = index
        self.error = error


class PgWriter:
    """Own the write connection and serialize every write, batch by batch.

    Args:
        connect: Opens (and sets up: durability, owner lock) a new write connection; called at
            start and after a connection is lost.
        schema: The schema of the store's tables.
        path: The URL (no password), for messages.
    """

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], schema: str, path: str) -> None:
        self._connect = connect
        self.schema = schema
        self.path = path
        self.conn = connect()
        self.db = PgDatabase(self.conn, self.sync)
        self.commits = 0
        self.waits: dict[str, tuple[str, ...]] = {}
        self.staged_waits: dict[str, tuple[str, ...]] = {}
        self._pipeline: Any = None
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._ops: collections.deque[_Op] = collections.deque()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="actorflow-pg-writer", daemon=True)
        self._thread.start()

    # -- what writes call ---------------------------------------------------------------------
    def execute(self, template: str, params: Any = None, *, wait: bool = False) -> psycopg.Cursor[Any]:
        """Send one statement (``{s}`` is the schema); its results (row count included) are
        there after a sync, or at once with ``wait``."""
        cur = self.conn.cursor()
        cur.execute(sql_for(template, self.schema), params)
        if wait:
            self.sync()
        return cur

    def query_one(self, template: str, params: Any = None) -> tuple[Any, ...] | None:
        """Run a statement and wait for its first row."""
        row: tuple[Any, ...] | None = self.execute(template, params).fetchone()
        return row

    def query_all(self, template: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run a statement and wait for its rows."""
        return list(self.execute(template, params).fetchall())

    def sync(self) -> None:
        """Wait for the answers of every statement sent so far (raising the first error)."""
        if self._pipeline is not None:
            self._pipeline.sync()

    # -- the queue ----------------------------------------------------------------------------
    def submit(self, fn: Callable[[PgWriter], Any]) -> Promise[Any]:
        """Queue ``fn(writer)`` to run in the next group transaction; return its future."""
        future: Promise[Any] = Promise()
        with self._lock:
            if self._closed:
                raise StoreClosed(
                    f"the store on {self.path} is closed; open it again to write.", path=self.path
                )
            self._ops.append(_Op(fn, future))
            self._cond.notify()
        return future

    def close(self, timeout: float | None = 30.0) -> None:
        """Finish every queued write, stop the thread and close the connection (idempotent)."""
        with self._cond:
            if not self._closed:
                self._closed = True
                self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not (self._ops or self._closed):
                        self._cond.wait()
                    if not self._ops:
                        break
                    batch = self._take(MAX_BATCH)
                try:
                    self._commit_batch(batch)
                except BaseException as exc:  # the writer's thread outlives any batch
                    log.exception("actorflow writer: batch failed unexpectedly")
                    err = translate_error(exc, self.path, self.conn)
                    for op in batch:
                        if not op.future.done():
                            op.future.set_exception(err)
        finally:
            self._shutdown()

    def _take(self, room: int) -> list[_Op]:
        ops = self._ops
        if len(ops) <= room:
            taken = list(ops)
            ops.clear()
            return taken
        return [ops.popleft() for _ in range(room)]

    def _take_more(self, batch: list[_Op]) -> list[_Op]:
        if not self._ops:
            return []
        with self._lock:
            taken = self._take(MAX_BATCH - len(batch))
        batch.extend(taken)
        return taken

    def _shutdown(self) -> None:
        closed = StoreClosed(
            f"the store on {self.path} was closed before this write ran; nothing of it was "
            f"written. Open the store again and retry.",
            path=self.path,
        )
        with self._cond:
            self._closed = True
            left = self._take(len(self._ops))
        for op in left:
            if not op.future.done():
                op.future.set_exception(closed)
        with contextlib.suppress(Exception):
            if self._in_transaction():
                self.conn.rollback()
            # The server frees a closed session's locks when its backend exits, a moment after
            # close() returns: an owner opened next in this process could still find the
            # schema locked. Giving the owner lock up first makes close() the end of ownership.
            self.conn.execute("SELECT pg_advisory_unlock_all()")
        with contextlib.suppress(Exception):
            self.conn.close()

    # -- a batch ------------------------------------------------------------------------------
    def _in_transaction(self) -> bool:
        return self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def _rollback(self) -> None:
        self.db.forget()
        if self.conn.closed:
            return
        with contextlib.suppress(psycopg.Error):
            if self._pipeline is not None:
                with contextlib.suppress(psycopg.Error):
                    self._pipeline.sync()
            if self._in_transaction():
                self.conn.execute("ROLLBACK")

    def _reconnect(self, cause: BaseException) -> None:
        """Replace a lost connection; raise (the store's error) if the server stays away."""
        with contextlib.suppress(Exception):
            self.conn.close()
        last: BaseException = cause
        for pause in RECONNECTS:
            time.sleep(pause)
            try:
                self.conn = self._connect()
            except PersistenceError as exc:
                last = exc
                if not isinstance(exc, StorageUnavailable):
                    raise  # refused for good (owner lock taken, authentication): say so
                continue
            self.db = PgDatabase(self.conn, self.sync)
            log.warning("actorflow writer: reconnected to %s after %s", self.path, cause)
            return
        raise last

    def _commit_batch(self, batch: list[_Op]) -> None:
        pending = [op for op in batch if not op.future.done()]
        careful = False
        joined = False
        conflicts = 0
        reconnects = 0
        while pending:
            try:
                if careful:
                    self._careful(pending)
                else:
                    joined = self._optimistic(pending, batch, joined)
                return
            except _Redo as redo:
                err = redo.error
                if isinstance(err, Retryable) and conflicts < RETRIES:
                    conflicts += 1
                    time.sleep(0.005 * 4**conflicts)
                    continue
                if isinstance(err, ConnectionLost) and reconnects < len(RECONNECTS):
                    # Before COMMIT: nothing of the batch was written; run it again.
                    reconnects += 1
                    try:
                        self._reconnect(err)
                    except BaseException as exc:
                        self._fail(pending, exc)
                        return
                    continue
                if careful:
                    self._fail(pending, err)
                    return
                if redo.index is not None:
                    # The optimistic pass names the write that raised: it fails alone, as on
                    # SQLite, and the others run again, each in its own savepoint.
                    pending[redo.index].future.set_exception(err)
                    del pending[redo.index]
                careful = True
            except ConnectionLost as lost:
                # During COMMIT: its outcome is unknown, so nothing is run again; the next
                # batch starts on a new connection.
                self._fail(pending, lost)
                with contextlib.suppress(BaseException):
                    self._reconnect(lost)
                return

    def _fail(self, ops: list[_Op], exc: BaseException) -> None:
        err = translate_error(exc, self.path, self.conn)
        for op in ops:
            if not op.future.done():
                op.future.set_exception(err)

    def _error(self, exc: BaseException) -> BaseException:
        return translate_error(exc, self.path, self.conn)

    def _optimistic(self, pending: list[_Op], batch: list[_Op], joined: bool) -> bool:
        """Run ``pending`` in one transaction, no savepoints; raise ``_Redo`` on a failure."""
        done: list[tuple[_Op, Any]] = []
        waits: dict[str, tuple[str, ...]] = {}
        index: int | None = None
        committing = False
        try:
            with self.conn.pipeline() as pipeline:
                self._pipeline = pipeline
                self.conn.execute("BEGIN")
                i = 0
                while True:
                    if i == len(pending):
                        if joined:
                            break
                        joined = True
                        late = self._take_more(batch)
                        if not late:
                            break
                        pending.extend(late)
                    index, op = i, pending[i]
                    i += 1
                    self.staged_waits = {}
                    done.append((op, op.fn(self)))
                    waits.update(self.staged_waits)
                index = None
                pipeline.sync()
                for k, (op, value) in enumerate(done):
                    if isinstance(value, Deferred):
                        index = k
                        done[k] = (op, value.finish())
                index = None
                # COMMIT goes with what the writes' finish sent: one round trip, at the exit of
                # the pipeline, which raises if any of it failed (the COMMIT then rolled back).
                committing = True
                self.conn.execute("COMMIT")
        except BaseException as exc:
            self._pipeline = None
            self._commit_failed(exc, committing)
            err = self._error(exc)
            self._rollback()
            if not isinstance(exc, Exception):
                raise
            # A server error shows at a sync, whichever write's statement caused it: only the
            # careful pass (a sync per write) can tell whose it is.
            raise _Redo(None if isinstance(exc, psycopg.Error) else index, err) from exc
        self._pipeline = None
        self._settle(done, [], waits)
        return joined

    def _careful(self, pending: list[_Op]) -> None:
        """Run ``pending`` in one transaction, each write in a savepoint of its own."""
        done: list[tuple[_Op, Any]] = []
        failed: list[tuple[_Op, BaseException]] = []
        waits: dict[str, tuple[str, ...]] = {}
        committing = False
        try:
            with self.conn.pipeline() as pipeline:
                self._pipeline = pipeline
                self.conn.execute("BEGIN")
                for op in pending:
                    for attempt in range(RETRIES + 1):
                        self.staged_waits = {}
                        self.conn.execute("SAVEPOINT op")
                        try:
                            value = op.fn(self)
                            pipeline.sync()
                            if isinstance(value, Deferred):
                                value = value.finish()
                                pipeline.sync()
                        except Exception as exc:
                            err = self._error(exc)
                            if isinstance(err, ConnectionLost):
                                raise
                            with contextlib.suppress(psycopg.Error):
                                pipeline.sync()
                            self.conn.execute("ROLLBACK TO SAVEPOINT op")
                            self.conn.execute("RELEASE SAVEPOINT op")
                            pipeline.sync()
                            self.db.forget()
                            if isinstance(err, Retryable) and attempt < RETRIES:
                                time.sleep(0.005 * 4 ** (attempt + 1))
                                continue
                            failed.append((op, err))
                            break
                        self.conn.execute("RELEASE SAVEPOINT op")
                        done.append((op, value))
                        waits.update(self.staged_waits)
                        break
                committing = True
                self.conn.execute("COMMIT")
        except BaseException as exc:
            self._pipeline = None
            self._commit_failed(exc, committing)
            err = self._error(exc)
            self._rollback()
            if not isinstance(exc, Exception):
                raise
            raise _Redo(None, err) from exc
        self._pipeline = None
        self._settle(done, failed, waits)

    def _commit_failed(self, exc: BaseException, committing: bool) -> None:
        """A connection lost once COMMIT was sent: its outcome is unknown, nothing may run again
        (raised to ``_commit_batch``, which fails the batch as of unknown outcome)."""
        if committing and isinstance(exc, psycopg.Error):
            err = translate_error(exc, self.path, self.conn, committing=True)
            if isinstance(err, ConnectionLost):
                self.db.forget()
                raise err from exc

    def _settle(
        self,
        done: list[tuple[_Op, Any]],
        failed: list[tuple[_Op, BaseException]],
        waits: dict[str, tuple[str, ...]],
    ) -> None:
        """After COMMIT: count it, remember the wait sets, resolve the futures."""
        self.commits += 1
        if len(self.waits) + len(waits) > WAITS_CACHE:
            self.waits.clear()
        self.waits.update(waits)
        for op, value in done:
            op.future.set_result(value)
        for op, e in failed:
            op.future.set_exception(e)
