"""The one writing thread: group commit of queued writes, each in its own SAVEPOINT.

Every write of an owning store (steps and single writes alike) is a function of the writer's
connection, queued here. The thread drains the queue, opens one ``BEGIN IMMEDIATE`` transaction
for the whole batch, runs each write inside its own savepoint (a write that raises is rolled back
to its savepoint alone, and its future gets the error), takes in once more what was queued
meanwhile, commits once, and only then resolves the futures. One fsync (with durability "full")
thus covers every caller waiting at that moment.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import sqlite_utils

from persistence._errors import PersistenceError, StoreClosed
from persistence._promise import Promise
from persistence._schema import translate_error

log = logging.getLogger(__name__)

# Upper bound on writes per transaction, so one commit's latency stays bounded under load.
MAX_BATCH = 512
# Workflows whose wait set the writer remembers (dropped wholesale past this size).
WAITS_CACHE = 100_000


class _Stop:
    pass


_STOP = _Stop()


class _Op:
    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[Writer], Any], future: Promise[Any]) -> None:
        self.fn = fn
        self.future = future


class Writer:
    """Own the write connection and serialize every write through one thread.

    Args:
        conn: The write connection (``isolation_level=None``); the writer closes it.
        path: The database path, for error messages.
        gate: A lock held across each transaction, when readers must not overlap writes (the
            shared-cache in-memory database has table locks, not WAL snapshots).
    """

    def __init__(
        self, conn: sqlite3.Connection, path: str, gate: threading.RLock | None = None
    ) -> None:
        self.conn = conn
        self.path = path
        # What reducers receive: sqlite-utils on this very connection, inside the transaction.
        self.db = sqlite_utils.Database(conn, execute_plugins=False)
        self.commits = 0
        # The committed wait set of recently stepped workflows (this thread is the only writer,
        # so it is exact): a step awaiting the same signals as before skips rewriting them.
        self.waits: dict[str, tuple[str, ...]] = {}
        self.staged_waits: dict[str, tuple[str, ...]] = {}
        self._gate = gate if gate is not None else contextlib.nullcontext()
        self._queue: queue.SimpleQueue[_Op | _Stop] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._stopping = False  # the stop was taken off the queue: end after the current batch
        self._thread = threading.Thread(target=self._run, name="actorflow-writer", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[Writer], Any]) -> Promise[Any]:
        """Queue ``fn(writer)`` to run in the next group transaction; return its future."""
        future: Promise[Any] = Promise()
        with self._lock:
            if self._closed:
                raise StoreClosed(
                    f"the store on {self.path} is closed; open it again to write.", path=self.path
                )
            self._queue.put(_Op(fn, future))
        return future

    def close(self, timeout: float | None = 30.0) -> None:
        """Finish every queued write, stop the thread and close the connection (idempotent)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(_STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    # -- the thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stopping:
                first = self._queue.get()
                if isinstance(first, _Stop):
                    break
                batch = [first]
                self._take_more(batch)
                try:
                    self._commit_batch(batch)
                except BaseException as exc:  # the thread must outlive any one batch
                    log.exception("actorflow writer: batch failed unexpectedly")
                    err = translate_error(exc, self.path)
                    for op in batch:
                        if not op.future.done():
                            op.future.set_exception(err)
        finally:
            self._shutdown()

    def _take_more(self, batch: list[_Op]) -> list[_Op]:
        """Move what is queued now into ``batch`` (up to ``MAX_BATCH``); return what was taken."""
        taken: list[_Op] = []
        while not self._stopping and len(batch) < MAX_BATCH:
            try:
                op = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(op, _Stop):
                self._stopping = True  # this batch is the last; close() queued nothing after it
                break
            batch.append(op)
            taken.append(op)
        return taken

    def _shutdown(self) -> None:
        closed = StoreClosed(
            f"the store on {self.path} was closed before this write ran; nothing of it was "
            f"written. Open the store again and retry.",
            path=self.path,
        )
        while True:
            try:
                op = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(op, _Op) and not op.future.done():
                op.future.set_exception(closed)
        try:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        self.conn.close()

    def _commit_batch(self, batch: list[_Op]) -> None:
        pending = [op for op in batch if not op.future.done()]
        conn = self.conn
        # Optimistic first: no savepoints (two statements per write saved). If a write fails, the
        # whole transaction is rolled back and the others run again, each in its own savepoint.
        careful = False
        # Writes queued while the batch's statements run join it before its COMMIT, once: a
        # write that arrives then (a start behind a batch of steps, say) is durable with that
        # fsync instead of waiting for the whole next batch. Not in the careful pass: what it
        # runs again is only what was there.
        joined = False
        while pending:
            done: list[tuple[_Op, Any]] = []
            failed: list[tuple[_Op, BaseException]] = []
            redo: int | None = None
            early: int | None = None
            batch_waits: dict[str, tuple[str, ...]] = {}
            try:
                with self._gate:
                    conn.execute("BEGIN IMMEDIATE")
                    i = 0
                    while True:
                        if i == len(pending):
                            if careful or joined:
                                break
                            joined = True
                            late = self._take_more(batch)
                            if not late:
                                break
                            pending.extend(late)
                        here, op = i, pending[i]
                        i += 1
                        self.staged_waits = {}
                        if careful:
                            conn.execute("SAVEPOINT op")
                        try:
                            value = op.fn(self)
                        except BaseException as exc:
                            if careful and conn.in_transaction:
                                conn.execute("ROLLBACK TO op")
                                conn.execute("RELEASE op")
                                failed.append((op, exc))
                                continue
                            # Optimistic pass, or an error (disk full, I/O) that ended the
                            # transaction: undo everything and run the others again.
                            if conn.in_transaction:
                                conn.execute("ROLLBACK")
                            op.future.set_exception(self._error(exc))
                            redo = here
                            break
                        done.append((op, value))
                        batch_waits.update(self.staged_waits)
                        if not conn.in_transaction:
                            # The write committed the transaction itself (a reducer called
                            # commit() or sqlite3's executescript()): what ran so far is
                            # durable; the rest of the batch goes in a new transaction.
                            log.warning("actorflow writer: a write ended the transaction")
                            early = here
                            break
                        if careful:
                            conn.execute("RELEASE op")
                    if redo is None and early is None:
                        conn.execute("COMMIT")
            except BaseException as exc:
                # BEGIN, a savepoint statement or COMMIT failed: nothing of the batch is durable.
                with contextlib.suppress(sqlite3.Error):
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                err = translate_error(exc, self.path)
                for op in pending:
                    if not op.future.done():
                        op.future.set_exception(err)
                return
            if redo is not None:
                pending = pending[:redo] + pending[redo + 1 :]
                careful = True
                continue
            self.commits += 1
            self._remember_waits(batch_waits)
            for op, value in done:
                op.future.set_result(value)
            for op, exc in failed:
                op.future.set_exception(self._error(exc))
            if early is None:
                return
            pending = pending[early + 1 :]

    def _error(self, exc: BaseException) -> BaseException:
        return exc if isinstance(exc, PersistenceError) else translate_error(exc, self.path)

    def _remember_waits(self, committed: dict[str, tuple[str, ...]]) -> None:
        if len(self.waits) + len(committed) > WAITS_CACHE:
            self.waits.clear()
        self.waits.update(committed)
