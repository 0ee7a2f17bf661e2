"""The writer: group commit of queued writes, one batch at a time.

Every write of an owning store (steps and single writes alike) is a function of the writer's
connection, queued here. A batch takes what is queued, opens one ``BEGIN IMMEDIATE`` transaction
for all of it, runs the writes (if one raises, the transaction is rolled back and the batch runs
again with each write in its own savepoint, so that one fails alone), takes in once more what was
queued meanwhile, commits once, and only then resolves the futures. One fsync (with durability
"full") thus covers every caller waiting at that moment.

One batch runs at a time, in queue order, on the writer's own thread: no caller's thread ever runs
a transaction, so an interruption of a caller (Ctrl-C) interrupts only its wait.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import sqlite_utils

from persistence._errors import PersistenceError, StoreClosed
from persistence._promise import Promise
from persistence._schema import translate_error

log = logging.getLogger("actorflow.store")

# Upper bound on writes per transaction, so one commit's latency stays bounded under load.
MAX_BATCH = 512
# Workflows whose wait set the writer remembers (dropped wholesale past this size).
WAITS_CACHE = 100_000


class _Op:
    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[Writer], Any], future: Promise[Any]) -> None:
        self.fn = fn
        self.future = future


class Writer:
    """Own the write connection and serialize every write, batch by batch.

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
        # The queue of writes, taken batch by batch by the writer's thread.
        self._lock = threading.Lock()  # taken directly (a C context manager) where none waits
        self._cond = threading.Condition(self._lock)
        self._ops: collections.deque[_Op] = collections.deque()
        self._closed = False  # no new writes; the thread ends once the queue is empty
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

    # -- the thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not (self._ops or self._closed):
                        self._cond.wait()
                    if not self._ops:
                        break  # closed, and everything queued before is committed
                    batch = self._take(MAX_BATCH)
                self._run_batch(batch)
        finally:
            self._shutdown()

    def _take(self, room: int) -> list[_Op]:
        """Up to ``room`` queued writes, oldest first (called holding the lock)."""
        ops = self._ops
        if len(ops) <= room:
            taken = list(ops)
            ops.clear()
            return taken
        return [ops.popleft() for _ in range(room)]

    def _run_batch(self, batch: list[_Op]) -> None:
        """Commit ``batch``; a failure of the batch as a whole fails each write not settled."""
        try:
            self._commit_batch(batch)
        except BaseException as exc:  # the writer's thread outlives any batch
            log.exception("actorflow writer: batch failed unexpectedly")
            err = translate_error(exc, self.path)
            for op in batch:
                if not op.future.done():
                    op.future.set_exception(err)

    def _take_more(self, batch: list[_Op]) -> list[_Op]:
        """Move what is queued now into ``batch`` (up to ``MAX_BATCH``); return what was taken."""
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
                        except BaseException as exc:  # a reducer may raise anything
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
            self._settle(done, failed, batch_waits)
            if early is None:
                return
            pending = pending[early + 1 :]

    def _settle(
        self,
        done: list[tuple[_Op, Any]],
        failed: list[tuple[_Op, BaseException]],
        batch_waits: dict[str, tuple[str, ...]],
    ) -> None:
        """After a COMMIT: count it, remember the wait sets, resolve the futures."""
        self.commits += 1
        self._remember_waits(batch_waits)
        for op, value in done:
            op.future.set_result(value)
        for op, exc in failed:
            op.future.set_exception(self._error(exc))

    def _error(self, exc: BaseException) -> BaseException:
        return exc if isinstance(exc, PersistenceError) else translate_error(exc, self.path)

    def _remember_waits(self, committed: dict[str, tuple[str, ...]]) -> None:
        if len(self.waits) + len(committed) > WAITS_CACHE:
            self.waits.clear()
        self.waits.update(committed)
