"""The writer: group commit of queued writes, one batch at a time, for both backends.

Every write of an owning store (steps and single writes alike) is a function of the writer,
queued here. A batch takes what is queued, opens one transaction for all of it, runs the writes
(if one raises, the transaction is rolled back and the batch runs again with each write in its
own savepoint, so that one fails alone), takes in once more what was queued meanwhile, commits
once, and only then resolves the futures. One fsync (with durability "full") thus covers every
caller waiting at that moment.

One batch runs at a time, in queue order. It runs on the writer's own thread, or on an engine
thread (``actors._pool.Dispatcher``): a step an engine thread submits ``here`` is staged, the
writer's thread not woken for it, and that thread commits everything staged at the end of its
drain (``flush``), then goes on with the actors the commit resumed. A step, its commit and the
rest of its message thus run on one thread, with no hand-off to the writer's thread and back. No
caller's thread ever runs a transaction, so an interruption of a caller (Ctrl-C) interrupts only
its wait.

The loop is written once here; each backend implements the small transaction protocol it runs
on (``SqliteWriter`` below, ``persistence._pg._writer.PgWriter``): how a statement is sent
(``execute``: at once, or pipelined until ``sync``), BEGIN / COMMIT / savepoints, how an error is
told (its own error classes), which errors are worth running the batch again for (PostgreSQL's
deadlocks and serialization failures, a connection lost before COMMIT) and how to reconnect.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from persistence._errors import StoreClosed
from persistence._log import Log, part_log
from persistence._promise import Promise, let_go
from persistence._sql import Dialect

_NO_SYSTEM = part_log("store")  # a writer made for no system in particular

T = TypeVar("T")

# Upper bound on writes per transaction, so one commit's latency stays bounded under load.
MAX_BATCH = 512
# Workflows whose wait set the writer remembers (dropped wholesale past this size).
WAITS_CACHE = 100_000
# Errors worth running a batch again for (deadlocks, serialization failures): runs of a batch
# before it goes write by write, and of a write in a savepoint before it fails.
RETRIES = 3
# Runs of a batch again after a lost connection (each after a reconnect).
RECONNECT_RUNS = 6


# Set on the threads that commit what they write themselves, at the end of their drain (the
# engine's: ``actors._pool.Dispatcher``); a write they submit ``here`` is staged for that.
class _Stager(threading.local):
    # (a default of the class: a thread that never set it reads it without a failed lookup,
    # which costs ten times a found one, on every signal a caller sends)
    on = False


_stager = _Stager()


def stage_on_this_thread() -> None:
    """From now on, writes this thread submits ``here`` are staged: it calls ``flush()``."""
    _stager.on = True


def on_engine_thread() -> bool:
    """True on a thread that stages what it writes (``stage_on_this_thread``)."""
    return _stager.on


class Deferred(Generic[T]):
    """A write whose statements are sent; ``finish()`` reads their results (and may raise).

    ``sealed``: ``finish()`` needs none of the answers, sends nothing and raises nothing (the
    server enforces the write's checks, ``server_checks``): its value is known before the
    statements are answered, and stays known if the answer to COMMIT is lost. A pipelined batch
    of sealed writes is committed by the sync that sends its statements: one round trip.
    """

    __slots__ = ("finish", "sealed")

    def __init__(self, finish: Callable[[], T], *, sealed: bool = False) -> None:
        self.finish = finish
        self.sealed = sealed


class _Op:
    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[Any], Any], future: Promise[Any]) -> None:
        self.fn = fn
        self.future = future


class _Redo(Exception):
    """A pass of the batch failed: at write ``index``, or (None) outside any write or at a write
    it cannot name (``unattributed``: a pipelined error, that only the careful pass can place)."""

    def __init__(self, index: int | None, error: BaseException, unattributed: bool) -> None:
        super().__init__(repr(error))
        self.index = index
        self.error = error
        self.unattributed = unattributed


class _CommitUnknown(Exception):
    """The connection was lost once COMMIT was sent: the batch may or may not be written.

    ``settled`` is what the pass would have settled had the COMMIT's answer come back.
    """

    def __init__(self, error: BaseException, settled: tuple[Any, Any, Any]) -> None:
        super().__init__(repr(error))
        self.error = error
        self.settled = settled


class Writer:
    """Own the write connection and serialize every write, batch by batch.

    A backend subclasses it: it sets ``conn`` and ``db`` (what reducers receive, on the
    transaction), then calls this ``__init__``, which starts the thread.
    """

    # The backend sends statements without waiting for their answers (until ``sync``).
    pipelined = False
    # Set while a pass runs whose writes have the server enforce their checks (``expect``): a
    # failed check then fails the whole pass, and the careful pass, which checks on the client,
    # tells whose write it was and why.
    server_checks = False
    # A cluster's fence (shard, epoch, incarnation) for the next ``expect`` to send with its
    # statement (under ``server_checks`` only), instead of a statement of its own.
    fence_next: tuple[Any, ...] | None = None
    conn: Any
    db: Any

    def __init__(self, path: str, dialect: Dialect, *, name: str, log: Log | None = None) -> None:
        self.path = path
        self.log = log if log is not None else _NO_SYSTEM  # its system's ``store`` logger
        self.dialect = dialect
        self.commits = 0
        # Batches run, the writes in them and their seconds, for the runtime's metrics (added
        # to by the one thread that holds the batch lock: no other lock needed).
        self.batches = 0
        self.batched_writes = 0
        self.batch_seconds = 0.0
        # The committed wait set of recently stepped workflows (one batch runs at a time, so it
        # is exact): a step awaiting the same signals as before skips rewriting them.
        self.waits: dict[str, tuple[str, ...]] = {}
        self.staged_waits: dict[str, tuple[str, ...]] = {}
        # The queue of writes, taken batch by batch by the writer's thread.
        self._lock = threading.Lock()  # taken directly (a C context manager) where none waits
        self._cond = threading.Condition(self._lock)
        self._ops: collections.deque[_Op] = collections.deque()
        self._staged = 0  # of them, staged by engine threads (committed at their drain's end)
        # Held by whoever runs a batch: the writer's thread, or a thread that submitted here.
        self._batch = threading.Lock()
        self._closed = False  # no new writes; the thread ends once the queue is empty
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- the transaction protocol: what writes call, and what the loop runs on ---------------------
    def execute(self, template: str, params: Any = (), *, wait: bool = False) -> Any:
        """Send one statement (a ``persistence._sql`` template); return its cursor, whose results
        (row count included) are there at once, after a ``sync``, or (``wait``) on return."""
        raise NotImplementedError

    def insert_id(self, template: str, column: str, params: Any, *, wait: bool = False) -> Any:
        """Send an INSERT; its cursor's ``fetchone()`` is ``(key,)``, the integer key ``column``
        of the row it inserted, or None if it inserted none (when its answers are there)."""
        raise NotImplementedError

    def executemany(self, template: str, rows: list[tuple[Any, ...]]) -> None:
        """Send one statement for each of ``rows``; nothing to read back."""
        raise NotImplementedError

    def add_rows(self, template: str, rows: list[tuple[Any, ...]]) -> None:
        """Insert ``rows`` (``template`` an ``INSERT ... VALUES (?, ...)``): new rows that no
        other write of the transaction touches, nothing read back. Where the backend can, they are
        held for the statement of the checked writes ``expect`` holds, or of the next writes held
        (at the latest, the commit token's)."""
        self.executemany(template, rows)

    def write_after(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Send ``statements`` (templates and their parameters: writes that return nothing, touch
        rows none of the others touches, and must see what was written before them) as few
        statements as the dialect allows (``Dialect.together``)."""
        for template, params in self.dialect.together(statements):
            self.execute(template, params)

    def write_with(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        """As ``write_after``, except that the statements may also go in the statement of the
        checked writes ``expect`` holds (only under ``server_checks``), seeing the rows as they
        were before it: they touch no row those writes touch nor any they insert."""
        self.write_after(statements)

    def reducer_returned(self) -> None:
        """After a reducer returned: raise if it left the transaction unable to commit (on
        PostgreSQL, a statement's error that the reducer caught aborts the transaction)."""

    def expect(self, template: str, params: Any, rows: int) -> None:
        """Send a statement (an INSERT, UPDATE or DELETE) that the server fails, failing the
        transaction, unless it touched exactly ``rows`` rows (only under ``server_checks``)."""
        raise NotImplementedError

    def timer_ids(self, n: int) -> list[int]:
        """``n`` new ids for timers, unique for good, drawn without waiting for the server (but
        now and then, to draw more ahead): only under ``server_checks``."""
        raise NotImplementedError

    def query_one(self, template: str, params: Any = ()) -> tuple[Any, ...] | None:
        """Run a statement and wait for its first row."""
        raise NotImplementedError

    def query_all(self, template: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Run a statement and wait for its rows."""
        raise NotImplementedError

    def sync(self) -> None:
        """Wait for the answers of every statement sent so far (raising the first error)."""

    def transient(self, exc: BaseException) -> bool:
        """True if ``exc`` (raised in a write) is not the write's fault, and the batch runs again."""
        return False

    def _transaction(self) -> contextlib.AbstractContextManager[Any]:
        """Held across each transaction."""
        return contextlib.nullcontext()

    def _begin(self) -> None:
        raise NotImplementedError

    def _commit(self) -> None:
        raise NotImplementedError

    def _commit_sealed(self) -> None:
        """Pipelined: send COMMIT after the statements of a batch of sealed writes, unanswered:
        the end of ``_transaction`` waits for every answer at once (its one round trip)."""
        raise NotImplementedError

    def _rollback(self) -> None:
        """Roll the open transaction back, if any (never raises)."""
        raise NotImplementedError

    def _savepoint(self) -> None:
        raise NotImplementedError

    def _release_savepoint(self) -> None:
        raise NotImplementedError

    def _undo_savepoint(self) -> bool:
        """Roll back to the savepoint of the write that failed; False if the transaction is gone."""
        raise NotImplementedError

    def _ended(self) -> bool:
        """True if the last write ended the transaction itself (committed it)."""
        return False

    def _error(self, exc: BaseException, committing: bool = False) -> BaseException:
        """The store's error for ``exc`` (``committing``: raised by COMMIT)."""
        raise NotImplementedError

    def _unattributed(self, exc: BaseException) -> bool:
        """True if ``exc`` may belong to a write sent earlier than the one running."""
        return False

    def _retryable(self, err: BaseException) -> bool:
        """True if the transaction was rolled back by a conflict that running again resolves."""
        return False

    def _lost(self, err: BaseException) -> bool:
        """True if ``err`` means the connection was lost."""
        return False

    def _reconnect(self, cause: BaseException) -> None:
        """Replace a lost connection; raise (the store's error) if it cannot."""
        raise cause

    def _commit_outcome(self, cause: BaseException) -> bool | None:
        """After the connection was lost during COMMIT: connect again and find out whether that
        transaction committed (True), did not (False), or cannot be told (None)."""
        with contextlib.suppress(BaseException):
            self._reconnect(cause)
        return None

    def _close_connection(self) -> None:
        raise NotImplementedError

    # -- the queue ----------------------------------------------------------------------------
    def submit(self, fn: Callable[[Any], Any], *, here: bool = False) -> Promise[Any]:
        """Queue ``fn(writer)`` to run in the next group transaction; return its future.

        ``here``: from an engine thread (``actors._pool``), which commits what it staged at the
        end of its drain (``flush``): the write is staged, and the writer's thread is not woken
        for it. From any other thread the write is queued for the writer's thread.
        """
        future: Promise[Any] = Promise()
        with self._lock:
            if self._closed:
                raise StoreClosed(
                    f"the store on {self.path} is closed; open it again to write.", path=self.path
                )
            self._ops.append(_Op(fn, future))
            if here and on_engine_thread():
                self._staged += 1
            else:
                self._cond.notify()
        return future

    def staged(self) -> int:
        """Writes staged by engine threads and not yet taken into a batch."""
        return self._staged

    def flush(self) -> None:
        """Commit what is queued (up to ``MAX_BATCH`` writes), on this thread (an engine thread,
        at the end of its drain), after the batch under way if there is one. What is left is the
        engine's next flush (staged writes) or the writer thread's (the others woke it)."""
        with self._batch:
            with self._lock:
                batch = self._take(MAX_BATCH)
            if batch:
                self._run_batch(batch)

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
                        break  # closed, and everything queued before is committed
                with self._batch:
                    with self._lock:
                        batch = self._take(MAX_BATCH)  # none left if a submitter ran them
                    if batch:
                        self._run_batch(batch)
        finally:
            self._shutdown()

    def _run_batch(self, batch: list[_Op]) -> None:
        let_go()  # callers this thread answered go on while the batch waits for the disk
        started = time.perf_counter()
        try:
            self._commit_batch(batch)
        except BaseException as exc:  # the writer outlives any batch
            self.log.exception("store_batch_failed")
            self._fail(batch, exc)
        self.batches += 1
        self.batched_writes += len(batch)
        self.batch_seconds += time.perf_counter() - started

    def _take(self, room: int) -> list[_Op]:
        """Up to ``room`` queued writes, oldest first (called holding the lock)."""
        ops = self._ops
        if len(ops) <= room:
            taken = list(ops)
            ops.clear()
            self._staged = 0
            return taken
        taken = [ops.popleft() for _ in range(room)]
        self._staged = min(self._staged, len(ops))
        return taken

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
        with self._batch:  # a batch a submitter runs ends first
            with self._cond:
                self._closed = True
                left = self._take(len(self._ops))
            for op in left:
                if not op.future.done():
                    op.future.set_exception(closed)
            self._close_connection()

    def _fail(self, ops: list[_Op], exc: BaseException) -> None:
        err = self._error(exc)
        for op in ops:
            if not op.future.done():
                op.future.set_exception(err)

    # -- a batch ------------------------------------------------------------------------------
    def _commit_batch(self, batch: list[_Op]) -> None:
        pending = [op for op in batch if not op.future.done()]
        # Optimistic first: no savepoints (two statements per write saved). If a write fails, the
        # whole transaction is rolled back and the others run again, each in its own savepoint.
        careful = False
        # Writes queued while the batch's statements run join it before its COMMIT, once: a
        # write that arrives then (a start behind a batch of steps, say) is durable with that
        # commit instead of waiting for the whole next batch. Not in the careful pass: what it
        # runs again is only what was there.
        joined = False
        conflicts = reconnects = 0
        while pending:
            try:
                if careful:
                    pending = self._careful(pending)
                else:
                    pending, joined = self._optimistic(pending, batch, joined)
            except _Redo as redo:
                err = redo.error
                if self._retryable(err) and conflicts < RETRIES:
                    conflicts += 1
                    time.sleep(0.005 * 4**conflicts)
                    continue
                if self._lost(err) and reconnects < RECONNECT_RUNS:
                    # Before COMMIT: nothing of the batch was written; run it again.
                    reconnects += 1
                    try:
                        self._reconnect(err)
                    except BaseException as exc:
                        self._fail(pending, exc)
                        return
                    continue
                if redo.index is not None:
                    # The write that raised fails alone; the others run again, each in its own
                    # savepoint.
                    pending[redo.index].future.set_exception(err)
                    del pending[redo.index]
                    careful = True
                elif redo.unattributed and not careful:
                    careful = True  # only the careful pass can tell whose error it is
                else:
                    self._fail(pending, err)  # BEGIN or COMMIT failed: nothing is written
                    return
            except _CommitUnknown as unknown:
                # Whether the COMMIT happened is the server's to say: a write that did commit must
                # not run again (a signal appended twice), and one that did not must not be
                # reported as failed when running it again is safe.
                committed = self._commit_outcome(unknown.error)
                if committed:
                    self._settle(*unknown.settled)
                    return
                if committed is False and reconnects < RECONNECT_RUNS:
                    reconnects += 1
                    continue
                self._fail(pending, unknown.error)  # the server cannot tell: outcome unknown
                return

    def _failed_pass(
        self, exc: BaseException, committing: bool, index: int | None, settled: tuple[Any, Any, Any]
    ) -> BaseException:
        """What a pass raises when ``exc`` ended it (the transaction is rolled back)."""
        err = self._error(exc, committing)
        self._rollback()
        if committing and self._lost(err):
            return _CommitUnknown(err, settled)
        if not isinstance(exc, Exception):
            return exc  # KeyboardInterrupt, SystemExit: not the batch's
        unattributed = self._unattributed(exc)
        return _Redo(None if unattributed else index, err, unattributed)

    def _optimistic(
        self, pending: list[_Op], batch: list[_Op], joined: bool
    ) -> tuple[list[_Op], bool]:
        """Run ``pending`` in one transaction, no savepoints; raise ``_Redo`` on a failure.

        Returns what is left to run (the writes after one that ended the transaction itself)
        and whether the late writes were taken in.
        """
        done: list[tuple[_Op, Any]] = []
        waits: dict[str, tuple[str, ...]] = {}
        index: int | None = None
        committing = False
        early: int | None = None
        self.server_checks = self.pipelined
        try:
            with self._transaction():
                self._begin()
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
                    value = op.fn(self)
                    if not self.pipelined and isinstance(value, Deferred):
                        value = value.finish()
                    done.append((op, value))
                    waits.update(self.staged_waits)
                    if self._ended():
                        early = i
                        break
                index = None
                sealed = False
                if self.pipelined:
                    if early is None and all(
                        not isinstance(v, Deferred) or v.sealed for _, v in done
                    ):
                        done = [
                            (op, v.finish() if isinstance(v, Deferred) else v) for op, v in done
                        ]
                        committing = True
                        self._commit_sealed()
                        sealed = True
                    else:
                        self.sync()
                        for k, (op, value) in enumerate(done):
                            if isinstance(value, Deferred):
                                index = k
                                done[k] = (op, value.finish())
                        index = None
                if early is None and not sealed:
                    # Pipelined, COMMIT goes with what the writes' finish sent: one round trip,
                    # at the end of the transaction block, which raises if any of it failed.
                    committing = True
                    self._commit()
        except BaseException as exc:
            raise self._failed_pass(exc, committing, index, (done, [], waits)) from exc
        if early is not None:
            # The write committed the transaction itself (a reducer called commit(), or
            # sqlite3's executescript()): what ran so far is durable; the rest of the batch goes
            # in a new transaction.
            self.log.warning("store_transaction_ended_by_a_write")
        self._settle(done, [], waits)
        return pending[early:] if early is not None else [], joined

    def _careful(self, pending: list[_Op]) -> list[_Op]:
        """Run ``pending`` in one transaction, each write in a savepoint of its own; return what
        is left to run (after a write that ended the transaction itself)."""
        done: list[tuple[_Op, Any]] = []
        failed: list[tuple[_Op, BaseException]] = []
        waits: dict[str, tuple[str, ...]] = {}
        index: int | None = None
        committing = False
        early: int | None = None
        self.server_checks = False  # each write checks its own answers: its error is its own
        try:
            with self._transaction():
                self._begin()
                for k, op in enumerate(pending):
                    for attempt in range(RETRIES + 1):
                        self.staged_waits = {}
                        self._savepoint()
                        try:
                            value = op.fn(self)
                            self.sync()
                            if isinstance(value, Deferred):
                                value = value.finish()
                                self.sync()
                        except Exception as exc:
                            err = self._error(exc)
                            if self._lost(err):
                                raise  # the batch runs again on a new connection
                            if not self._undo_savepoint():
                                index = k  # an error that ended the transaction: it fails alone
                                raise
                            if self._retryable(err) and attempt < RETRIES:
                                time.sleep(0.005 * 4 ** (attempt + 1))
                                continue
                            failed.append((op, err))
                            break
                        done.append((op, value))
                        waits.update(self.staged_waits)
                        if self._ended():
                            early = k + 1
                        else:
                            self._release_savepoint()
                        break
                    if early is not None:
                        break
                if early is None:
                    committing = True
                    self._commit()
        except BaseException as exc:
            failure = self._failed_pass(exc, committing, index, (done, failed, waits))
            if isinstance(failure, _Redo):
                failure.unattributed = False
            raise failure from exc
        if early is not None:
            self.log.warning("store_transaction_ended_by_a_write")
        self._settle(done, failed, waits)
        return pending[early:] if early is not None else []

    def _settle(
        self,
        done: list[tuple[_Op, Any]],
        failed: list[tuple[_Op, BaseException]],
        waits: dict[str, tuple[str, ...]],
    ) -> None:
        """After a COMMIT: count it, remember the wait sets, resolve the futures."""
        self.commits += 1
        if len(self.waits) + len(waits) > WAITS_CACHE:
            self.waits.clear()
        self.waits.update(waits)
        for op, value in done:
            op.future.set_result(value)
        for op, exc in failed:
            op.future.set_exception(exc)
