"""The procedure executor: one bounded pool runs every workflow's procedure calls.

A call is at least once: its row stays pending until its outcome is recorded, and a crash before
that runs it again at recovery with the same idempotency key. Each attempt has a timeout (real
time) and failed attempts are retried with exponential backoff on the workflow clock, up to the
retry policy's bounded number of attempts.
"""

from __future__ import annotations

import collections
import inspect
import json
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors._log import Log
from persistence import ProcedureRow, StorageUnavailable, Store, dumps, loads
from persistence._types import StepStore
from workflows import RetryPolicy
from workflows._errors import ChildFailed, ProcedureFailed, UnknownWorkflowType
from workflows._procedure_context import procedure_running
from workflows._registry import lookup_options, resolve

from ._clock import Clock
from ._limits import Limits
from ._work import WorkCounter

_NO_SYSTEM = Log("procedures")  # an executor made for no system in particular

# Real-time backoff of a write the executor waits out a storage fault for (first, bound).
_STORAGE_BACKOFF = (0.01, 1.0)

DEFAULT_RETRY = RetryPolicy()
# Seconds a clean shutdown waits for the procedure attempts running at that moment to finish.
SHUTDOWN_GRACE = 30.0


def _options(function: str) -> dict[str, Any]:
    """The ``@procedure(...)`` options of ``function`` (none if this process lacks its code: its
    attempt then says so)."""
    try:
        return lookup_options(resolve("procedure", function))
    except UnknownWorkflowType:
        return {}


@dataclass(frozen=True)
class ProcedureDone:
    """Message to a workflow actor: a procedure call has its final outcome.

    ``durable`` is False for an outcome handed straight to the actor: it becomes durable in the
    step that consumes it (which deletes the call's row), so a call costs one commit, not two. If
    the actor cannot take it, it records the outcome with ``record_outcome`` instead; a crash before
    either leaves the row pending, and the call runs again at recovery (at least once).
    """

    key: str
    ok: bool
    value: Any = None
    error: dict[str, Any] | None = None
    attempts: int = 1
    durable: bool = True
    result: bytes | None = None  # the pickled value, for record_outcome


def record_outcome(store: StepStore, done: ProcedureDone) -> None:
    """Make an outcome the actor did not consume durable (nothing if the call's row is gone)."""
    if done.durable:
        return
    if done.ok:
        store.procedure_finished(done.key, result=done.result, error=None, attempts=done.attempts)
    else:
        store.procedure_finished(done.key, result=None, error=json.dumps(done.error), attempts=done.attempts)


def type_name(t: type) -> str:
    """The name users know a type by: builtins bare, package exports by their public path."""
    if t.__module__ == "builtins":
        return t.__name__
    top = t.__module__.partition(".")[0]
    mod = sys.modules.get(top)
    if "._" in t.__module__ and mod is not None and getattr(mod, t.__qualname__, None) is t:
        return f"{top}.{t.__qualname__}"
    return f"{t.__module__}.{t.__qualname__}"


def error_info(e: BaseException) -> dict[str, Any]:
    """The durable description of an error: type, message and traceback text."""
    try:
        message = str(e)
    except Exception:  # an exception whose __str__ raises: described as traceback does
        message = f"<exception str() failed: {type(e).__name__}>"
    return {"type": type_name(type(e)), "message": message, "traceback": traceback_text(e)}


# Python's words between a cause's traceback and the one of the error raised from it.
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"


def traceback_text(e: BaseException) -> str:
    """``e``'s traceback as Python prints it, with the traceback of each procedure or child
    whose failure is in its chain (a ``ProcedureFailed`` or ``ChildFailed``, raised at an await
    from a failure elsewhere, holds that text) put before it, as a cause's is: a workflow that
    fails on a procedure's error says where the procedure failed, not only where it awaited."""
    text = "".join(traceback.format_exception(e))
    remote: list[str] = []
    seen: set[int] = set()
    link: BaseException | None = e
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        held = getattr(link, "traceback", None) if isinstance(link, ProcedureFailed | ChildFailed) else None
        if isinstance(held, str) and held:
            remote.append(held)
        link = link.__cause__ if link.__cause__ is not None else (
            None if link.__suppress_context__ else link.__context__)
    # The chain runs from ``e`` to its deepest cause, which Python prints first.
    return "".join((tb if tb.endswith("\n") else tb + "\n") + _CAUSE for tb in reversed(remote)) + text


def _from_the_procedure(e: BaseException) -> None:
    """Drop the frames of this module (the attempt, the call, the thread of a call with a
    timeout) from the front of the traceback of an error a procedure raised, so that its
    traceback starts at the procedure's own lines, as a workflow's starts at the workflow's. An
    error this module raised itself (a timeout, a result that cannot be stored) keeps its own."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_globals.get("__name__") == __name__:
        tb = tb.tb_next
    if tb is not None:
        e.__traceback__ = tb


def _misfit(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``fn``'s signature refuses these arguments (read once a call raised TypeError)."""
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return True
    except ValueError:  # a builtin without a signature: its TypeError is taken as any other
        return False
    return False


def pack_call(args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None, retry: RetryPolicy | None) -> bytes:
    return dumps({"args": args, "kwargs": kwargs, "timeout": timeout, "retry": retry})


class ProcedureTimeout(TimeoutError):
    """One attempt of a procedure took longer than its timeout (``ProcedureFailed.error_type``
    ``"actors.ProcedureTimeout"`` once every attempt did; ``"ProcedureTimeout"`` in a
    ``RetryPolicy``'s ``non_retryable`` retries none that overran)."""


ProcedureTimeout.__module__ = "actors"  # its public name, in error_type and in pickles


class AttemptsDied(Exception):
    """A procedure's attempts ended with the process running them, up to its allowed attempts.

    An attempt that kills its process (``os._exit``, a crash in native code, the OOM killer)
    records nothing; only the count of attempts made after a restart, written before each runs,
    shows it. Without that count the call ran again at every start, forever. The workflow's
    ``ProcedureFailed.error_type`` is then ``"actors.AttemptsDied"``.
    """


AttemptsDied.__module__ = "actors"  # its public name, in error_type and in pickles


class _Idle:
    """A worker thread with no call to run: asleep on a lock of its own until it is given one
    (or told to end, with none)."""

    __slots__ = ("gate", "item")

    def __init__(self) -> None:
        self.gate = threading.Lock()
        self.gate.acquire()  # held while the thread sleeps; released by whoever gives it a call
        self.item: tuple[Callable[..., None], tuple[Any, ...]] | None = None


class _Workers:
    """A bounded set of threads running calls in the order they come.

    What the runtime needs of ``concurrent.futures.ThreadPoolExecutor`` and no more: a call is a
    queue entry, not a ``Future`` with a ``Condition`` (an ``RLock`` and a waiter list, in Python) that
    nobody reads. A call is handed to the thread that went idle last and wakes only that one; while
    every thread is busy it waits in the queue, and the first thread to finish takes it with no
    wake-up (several idle threads waiting on one ``queue.SimpleQueue`` wake two per call). One
    woken thread at a time: calls that come before it starts wait in the queue, and it wakes the
    next as it starts. A thread starts when a call comes and none is idle, while fewer than
    ``size`` run.
    """

    def __init__(self, size: int, name: str, log: Log = _NO_SYSTEM) -> None:
        self._log = log
        if size < 1:
            raise ValueError(f"procedure_workers must be at least 1, got {size}")
        self._size = size
        self._name = name
        self._calls: collections.deque[tuple[Callable[..., None], tuple[Any, ...]]] = collections.deque()
        self._idle: list[_Idle] = []
        self._waking = False  # a thread was handed a call and woken, and has not started yet
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def threads(self) -> list[threading.Thread]:
        return list(self._threads)

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Queue ``fn(*args)``; RuntimeError once shut down."""
        start = woken = None
        with self._lock:
            if self._closed:
                raise RuntimeError("the procedure pool is shut down")
            if self._idle and not self._waking:
                woken = self._idle.pop()
                woken.item = (fn, args)
                self._waking = True
            else:
                self._calls.append((fn, args))
                if not self._idle and len(self._threads) < self._size:
                    start = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
                    self._threads.append(start)
        if woken is not None:
            woken.gate.release()
        elif start is not None:
            start.start()

    def _next_locked(self) -> _Idle | None:
        """With calls queued, an idle thread to wake for the oldest (None if none)."""
        if self._calls and self._idle and not self._waking and not self._closed:
            sleeper = self._idle.pop()
            sleeper.item = self._calls.popleft()
            self._waking = True
            return sleeper
        return None

    def shutdown(self) -> list[tuple[Callable[..., None], tuple[Any, ...]]]:
        """Take no more calls; each thread ends after the call it runs. Returns the calls queued.

        The threads are daemons: a call still running when the process exits is cut off, and runs
        again at the next start, as after a crash.
        """
        with self._lock:
            self._closed = True
            dropped = list(self._calls)
            self._calls.clear()
            idle = list(self._idle)
            self._idle.clear()
        for sleeper in idle:
            sleeper.gate.release()  # with no call: the thread ends
        return dropped

    def _work(self) -> None:
        me = _Idle()
        item: tuple[Callable[..., None], tuple[Any, ...]] | None = None
        while True:
            with self._lock:
                if self._closed:
                    return
                if self._calls:
                    item = self._calls.popleft()
                    woken = self._next_locked()  # more queued than this thread takes: help
                else:
                    woken = None
                    self._idle.append(me)
            if item is None:
                me.gate.acquire()
                with self._lock:
                    self._waking = False
                    item, me.item = me.item, None
                    woken = self._next_locked()  # the rest of a burst: the next thread gets going
            if woken is not None:
                woken.gate.release()
            if item is None:
                return  # woken by shutdown
            fn, args = item
            try:
                fn(*args)
            except BaseException:  # a worker thread must survive any call
                self._log.exception("actorflow: procedure call failed in its worker")
            item = fn = args = None  # type: ignore[assignment]  # an idle thread keeps no call's values alive


class _Slot:
    """The place an attempt holds in its procedure's ``concurrency`` limit: given back once the
    attempt's code has returned. An attempt abandoned at its timeout still runs on its thread,
    so that thread gives the place back when it ends, not the executor when it gives up on it:
    the limit bounds the attempts running at once, abandoned ones included."""

    __slots__ = ("_done", "_lock", "_state")

    def __init__(self, done: Callable[[], None]) -> None:
        self._done: Callable[[], None] | None = done
        self._lock = threading.Lock()
        self._state = "held"  # "kept" by an abandoned attempt's thread, or its thread "ended"

    def abandoned(self) -> None:
        """The attempt timed out, its thread still running: that thread gives the place back."""
        with self._lock:
            if self._state == "held":
                self._state = "kept"

    def thread_ended(self) -> None:
        with self._lock:
            kept, self._state = self._state == "kept", "ended"
        if kept:
            self._give_back()

    def attempt_over(self) -> None:
        """The executor is done with the attempt: the place goes back, unless its thread keeps it."""
        with self._lock:
            if self._state == "kept":
                return
        self._give_back()

    def _give_back(self) -> None:
        done, self._done = self._done, None
        if done is not None:  # (once)
            done()


class ProcedureExecutor:
    """Runs procedure calls on a bounded thread pool, with timeouts and retries."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        workers: int,
        deliver: Callable[[str, ProcedureDone], None],
        call_at: Callable[[float, Callable[[], None]], None],
        work: WorkCounter,
        log: Log | None = None,
    ) -> None:
        self._log = log if log is not None else _NO_SYSTEM  # its system's ``procedures`` logger
        self._store = store
        self._clock = clock
        self._deliver = deliver
        self._call_at = call_at
        self._work = work
        self._pool = _Workers(workers, "actorflow-proc", self._log)
        self._closed = False
        self._storage_down = False  # a write of the executor is waiting for storage to recover
        self._storage_lock = threading.Lock()
        # Attempts counted in their rows that have not started (queued, or waiting for their
        # backoff): key -> (attempt, next attempt time). A shutdown gives their counts back.
        self._counted: dict[str, tuple[int, float]] = {}
        # Calls submitted whose attempt has not started (in a limit's line, or queued for a
        # worker), and those of them a committed step took back: they do not start.
        self._waiting: set[str] = set()
        self._taken_back: set[str] = set()
        self._lock = threading.Lock()
        # The attempts on a worker now: key -> (function, workflow id, started, monotonic), for
        # ``system.idle()`` to name what it waits for when it times out.
        self._busy: dict[str, tuple[str, str, float]] = {}
        # The type of the workflow of each call not yet settled, for the events of its attempts
        # (given at dispatch; a call found pending at recovery has its workflow read once).
        self._types: dict[str, str | None] = {}
        self.metrics: Any = None  # an ``actors._metrics.Metrics``, when the system counts
        self.limits = Limits(store, clock, call_at, self._log)  # ``@procedure(concurrency=, rate=)``

    def threads(self) -> list[threading.Thread]:
        return self._pool.threads()

    def busy(self) -> list[tuple[str, str, str, float]]:
        """The attempts on a worker now, longest running first: (function, workflow id, key,
        seconds running)."""
        now = time.monotonic()
        rows = [(fn, wid, key, now - t) for key, (fn, wid, t) in list(self._busy.items())]
        return sorted(rows, key=lambda r: -r[3])

    def shutdown(self, *, give_back: bool = True) -> None:
        """Start no more attempts. Calls queued or waiting for their backoff are dropped (their
        rows stay pending: they run at the next start); with ``give_back`` (a shutdown, not a
        crash) the attempts counted for them and not started are uncounted in their rows, so the
        next start runs them as the attempts they are instead of counting them used, and the
        attempts running are waited for (``SHUTDOWN_GRACE``): their outcomes are recorded, and
        none runs again."""
        with self._lock:
            self._closed = True
            unstarted, self._counted = self._counted, {}
        self.limits.close()
        for _ in self._pool.shutdown():
            self._work.dec()
        if not give_back:
            return  # a crash leaves the attempts running as they are
        self._wait_for_running()
        for key, (attempt, next_at) in unstarted.items():
            try:
                self._store.procedure_retry(key, attempts=attempt - 1, next_attempt_at=next_at)
            except Exception as e:  # the attempt stays counted: the call has one fewer left
                self._log.warning("procedure_attempt_not_given_back", key=key, attempt=attempt, error=repr(e))

    def _wait_for_running(self) -> None:
        """A clean shutdown lets the attempts running now finish (up to ``SHUTDOWN_GRACE``
        seconds), their outcomes recorded while the store is open: none runs again at the next
        start. One still running after that is cut off with the process and runs again then."""
        running = [t for t in self._pool.threads() if t.is_alive()]
        if not running:
            return
        # (The idle workers are alive too, on their way out: only attempts are said.)
        attempts = len(self.busy())
        if attempts:
            self._log.info("procedure_attempts_finishing", running=attempts, grace=SHUTDOWN_GRACE)
        deadline = time.monotonic() + SHUTDOWN_GRACE
        for t in running:
            t.join(max(0.0, deadline - time.monotonic()))
        left = len(self.busy())
        if left:
            self._log.warning("procedure_attempts_cut_off", running=left, grace=SHUTDOWN_GRACE,
                              then="they run again at the next start")

    def dispatch(self, row: ProcedureRow, *, recovered: bool = False, workflow_type: str | None = None) -> None:
        """Run ``row``'s next attempt now, or at its next attempt time if that is later.

        A row counts the attempts started on it (``row.attempts``), each before it runs: the step
        that creates the row counts attempt 1 (a write made anyway), and each later attempt is
        counted by a write of its own as it starts, not when it is scheduled (a crash during a
        retry's backoff has not used the next attempt up). An attempt that takes the process down
        (``os._exit``, a crash in native code, the OOM killer) has thus used up one of the retry
        policy's attempts like one that raises, and the call runs ``maximum_attempts`` times in
        all.

        ``recovered``: the row was found pending when the file was opened, so the attempt it
        counts may have ended with the process that ran it. The next attempt is counted in the row
        before it runs (one durable write, at recovery only); if none is left the call fails
        without running again.
        """
        if self._closed:
            return
        attempt = row.attempts + 1 if recovered else max(row.attempts, 1)
        with self._lock:
            if workflow_type is not None:
                self._types[row.key] = workflow_type
            if not recovered:
                self._counted[row.key] = (attempt, row.next_attempt_at)
        if row.next_attempt_at > self._clock.now():
            self._call_at(row.next_attempt_at, lambda: self._submit(row.key, row.workflow_id, row.function, row.args, attempt, recovered))
        else:
            self._submit(row.key, row.workflow_id, row.function, row.args, attempt, recovered)

    def cancel(self, keys: list[str]) -> None:
        """Calls a committed step took back (a select arm that lost, a cancelled workflow's): an
        attempt of theirs that has not started (waiting for its limit, or for a worker) does not
        start. (Their rows are gone with the step; one in its retry backoff finds that.)"""
        with self._lock:
            for key in keys:
                if key in self._waiting:
                    self._taken_back.add(key)
                self._counted.pop(key, None)
                self._types.pop(key, None)

    def _submit(self, key: str, workflow_id: str, function: str, args: bytes, attempt: int, recovered: bool = False,
                count: bool = False) -> None:
        if self._closed:
            return
        with self._lock:
            self._waiting.add(key)
        gate = self.limits.gate(function, lambda: _options(function))
        if gate is not None:  # a limited procedure: the attempt starts when its turn comes
            gate.submit(key, workflow_id,
                        lambda done: self._start(key, workflow_id, function, args, attempt, recovered, count, done),
                        recovered)
            return
        self._start(key, workflow_id, function, args, attempt, recovered, count, None)

    def _start(self, key: str, workflow_id: str, function: str, args: bytes, attempt: int, recovered: bool,
               count: bool, done: Callable[[], None] | None) -> None:
        if self._closed:
            return
        self._work.inc()
        try:
            self._pool.submit(self._run, key, workflow_id, function, args, attempt, recovered, count, done)
        except RuntimeError:  # pool shut down while the system closes
            self._work.dec()

    def _starts(self, key: str) -> bool:
        """An attempt of ``key`` is about to run (or be counted, if recovered): it is no longer
        one to give back at shutdown. False once the executor is shut down (the attempt does not
        start; its count, if it has one, was given back) or if a step took the call back."""
        with self._lock:
            self._waiting.discard(key)
            if self._closed:
                return False
            self._counted.pop(key, None)
            if key in self._taken_back:
                self._taken_back.discard(key)
                return False
            return True

    def _run(self, key: str, workflow_id: str, function: str, args_blob: bytes, attempt: int, recovered: bool,
             count: bool = False, done: Callable[[], None] | None = None) -> None:
        slot = _Slot(done) if done is not None else None  # (a limited procedure's)
        self._busy[key] = (function, workflow_id, time.monotonic())
        try:
            self._attempt(key, workflow_id, function, args_blob, attempt, recovered, count, slot)
        except Exception as e:  # the store failed: the row stays pending and runs at recovery
            self._log.error("procedure_bookkeeping_failed", key=key, workflow_id=workflow_id,
                            workflow_type=self._type_of(key, workflow_id), error=repr(e))
        finally:
            self._busy.pop(key, None)
            if slot is not None:
                slot.attempt_over()  # its limit's next in line starts (counted as work before this is uncounted)
            self._work.dec()

    def _attempt(self, key: str, workflow_id: str, function: str, args_blob: bytes, attempt: int, recovered: bool = False,
                 count: bool = False, slot: _Slot | None = None) -> None:
        retry = DEFAULT_RETRY
        try:
            fn = resolve("procedure", function)
        except UnknownWorkflowType as e:
            # This process lacks the code (not the call's fault): no attempt is spent and no
            # failure recorded. The call stays pending in the file, and runs with the same key
            # when a process that has the code opens it.
            self._log.error("procedure_code_missing", key=key, workflow_id=workflow_id,
                            workflow_type=self._type_of(key, workflow_id), function=function, error=str(e))
            return
        if not self._starts(key):
            return
        if recovered and not self._count_recovered(key, workflow_id, function, args_blob, attempt):
            return
        if count and not self._count_start(key, workflow_id, attempt):
            return
        started = time.perf_counter()
        call: dict[str, Any] | None = None
        unpicklable = False
        try:
            call = loads(args_blob)
            retry = call.get("retry") or DEFAULT_RETRY
            value = self._call(key, fn, call["args"], call["kwargs"], call.get("timeout"), slot)
            try:
                result = dumps(value)
            except Exception as e:
                unpicklable = True  # another attempt would run its side effects again for nothing
                raise TypeError(
                    f"procedure {function} returned a {type(value).__name__} that cannot be pickled "
                    f"({e}): its result is stored durably, so return plain picklable data (not "
                    f"retried)"
                ) from e
            try:
                # The workflow takes the value as stored, as it would after a restart: a copy,
                # not the procedure's own object (a cache it goes on changing, one the workflow
                # would change in it), and one whose restore fails fails here, not at recovery.
                value = loads(result)
            except Exception as e:
                unpicklable = True
                raise TypeError(
                    f"procedure {function} returned a {type(value).__name__} that cannot be loaded "
                    f"back from its stored form ({e}): its result is stored durably, so return "
                    f"plain picklable data (not retried)"
                ) from e
        except BaseException as e:
            # (SystemExit and KeyboardInterrupt too: in a worker thread they end only the attempt,
            # as library code calling sys.exit() would; the process goes on, and so does the call)
            _from_the_procedure(e)
            info = error_info(e)
            misfit = isinstance(e, TypeError) and call is not None and _misfit(fn, call["args"], call["kwargs"])
            if misfit:  # no attempt would take them: failed at once, not retried
                info["message"] += " (the call's arguments do not fit the procedure's signature: not retried)"
            again = (not misfit and not unpicklable and retry.retries(e) and info["type"] not in retry.non_retryable
                     and attempt < retry.maximum_attempts and not self._closed)
            if self.metrics is not None:
                self.metrics.attempt(function, time.perf_counter() - started, "retry" if again else "failed")
            if again:
                delay = retry.delay(attempt)
                next_at = self._clock.now() + delay
                self._log.warning(
                    "procedure_attempt_failed", key=key, workflow_id=workflow_id,
                    workflow_type=self._type_of(key, workflow_id), function=function,
                    attempt=attempt, retry_in=delay, error=info["message"], error_type=info["type"],
                )
                # This attempt's failure and when the next may start. The next attempt is counted
                # when it starts (``_count_start``), not now: a crash during the backoff has not
                # used it up, and the next start runs it as the attempt it is.
                done = self._write("retry", key, lambda: self._store.procedure_retry(key, attempts=attempt, next_attempt_at=next_at))
                if done and not self._closed:
                    self._call_at(next_at, lambda: self._submit(key, workflow_id, function, args_blob, attempt + 1,
                                                                count=True))
                return
            self._log.error(
                "procedure_failed", key=key, workflow_id=workflow_id,
                workflow_type=self._type_of(key, workflow_id), function=function,
                attempts=attempt, error=info["message"], error_type=info["type"],
            )
            self._hand_over(workflow_id, ProcedureDone(key, False, None, info, attempt, durable=False))
            return
        if self.metrics is not None:
            self.metrics.attempt(function, time.perf_counter() - started, "ok")
        self._hand_over(workflow_id, ProcedureDone(key, True, value, None, attempt, durable=False, result=result))

    def _count_start(self, key: str, workflow_id: str, attempt: int) -> bool:
        """Before retry attempt ``attempt`` runs: count it in the row, durably (if it takes the
        process down, the next start sees it used). False if the row is gone or no longer
        pending: it does not run (see ``_settled_elsewhere``)."""
        now = self._clock.now()
        counted = self._write("attempt count", key, lambda: self._store.procedure_retry(key, attempts=attempt, next_attempt_at=now))
        if not counted:
            self._settled_elsewhere(key, workflow_id)
        return counted

    def _settled_elsewhere(self, key: str, workflow_id: str) -> None:
        """An attempt about to start found its call's row no longer pending. Gone: a step took
        the call back (a cancel, a select arm that lost), nothing to do. Done or failed: another
        attempt recorded the outcome, such as the one a cluster's node had running when this
        node took the workflow over (that node's step was refused by the fence, so it could only
        record it in the row). Nothing else would hand that outcome to the workflow, which would
        wait on the call for good: it is handed over here, as the row says."""
        try:
            row = next((p for p in self._store.procedures(workflow_id) if p.key == key), None)
        except Exception as e:  # the workflow takes the row at its next load
            self._log.warning("procedure_outcome_not_read", key=key, workflow_id=workflow_id,
                              workflow_type=self._type_of(key, workflow_id), error=repr(e))
            return
        if row is None or row.status != "pending":
            with self._lock:
                self._types.pop(key, None)  # settled: no attempt of it logs again
        if row is None or row.status == "pending" or self._closed:
            return
        if row.status == "done":
            assert row.result is not None
            done = ProcedureDone(key, True, loads(row.result), None, row.attempts)
        else:
            done = ProcedureDone(key, False, None, json.loads(row.error or "{}"), row.attempts)
        self._deliver(workflow_id, done)

    def _count_recovered(self, key: str, workflow_id: str, function: str, args_blob: bytes, attempt: int) -> bool:
        """Before a recovered call's attempt ``attempt``: count it in the row, durably; or, if
        the attempts counted so far (those that raised, and those that ended with their process)
        use up its retry policy, fail the call without running it. True: run the attempt."""
        try:
            retry = loads(args_blob).get("retry") or DEFAULT_RETRY
        except Exception:
            return True  # the attempt reports what is wrong with its arguments
        if attempt > retry.maximum_attempts:
            counted = attempt - 1
            error = AttemptsDied(
                f"procedure {function} (key {key}) was not run again: {counted} of its "
                f"{retry.maximum_attempts} allowed attempts are used up, the last of them "
                f"ended with the process running it (os._exit, a crash in native code, the OOM "
                f"killer, a kill) before it returned or raised; a call that takes its process "
                f"down would otherwise run again at every start"
            )
            self._log.error("procedure_failed", key=key, workflow_id=workflow_id,
                            workflow_type=self._type_of(key, workflow_id), function=function,
                            attempts=counted, error=str(error), error_type=type_name(AttemptsDied))
            self._hand_over(workflow_id, ProcedureDone(key, False, None, error_info(error), counted, durable=False))
            return False
        # Counted before it runs: if it takes the process down, the next start sees it.
        return self._count_start(key, workflow_id, attempt)

    def _write(self, what: str, key: str, write: Callable[[], bool]) -> bool:
        """Carry out one of the executor's writes, waiting out a storage fault (a full disk, an
        I/O error, a lost connection) with backoff: the attempt's bookkeeping is not dropped
        with the fault, and goes on by itself once storage recovers, with no restart. Logged once
        per episode. Gives up (raising) only when the system closes: the row then stays pending
        and the call runs at the next start."""
        delay = _STORAGE_BACKOFF[0]
        while True:
            try:
                done = write()
            except StorageUnavailable as e:
                if self._closed:
                    raise
                with self._storage_lock:
                    first, self._storage_down = not self._storage_down, True
                if first:
                    self._log.warning("procedure_storage_unavailable", key=key, write=what, error=str(e),
                                retrying="with backoff, until a write commits")
                time.sleep(delay)
                delay = min(delay * 2, _STORAGE_BACKOFF[1])
                continue
            with self._storage_lock:
                recovered, self._storage_down = self._storage_down, False
            if recovered:
                self._log.info("procedure_storage_recovered", key=key, write=what)
            return done

    def _type_of(self, key: str, workflow_id: str) -> str | None:
        """The type of the workflow of call ``key``, for its events (SPEC §5: bound to the
        workflow's id and type): as dispatched, else read once (a call recovered from the file)."""
        with self._lock:
            if key in self._types:
                return self._types[key]
        try:
            rec = self._store.load_workflow(workflow_id)
        except Exception:  # the storage is away: the event names the id only
            return None
        found = rec.type if rec is not None else None
        with self._lock:
            self._types[key] = found
        return found

    def _hand_over(self, workflow_id: str, done: ProcedureDone) -> None:
        with self._lock:
            self._types.pop(done.key, None)  # settled: no attempt of it logs again
        if self._closed:
            # The system is closing and its actors take no more messages: record the outcome so
            # that the next start does not run the call again.
            record_outcome(self._store, done)
        else:
            self._deliver(workflow_id, done)

    def _call(self, key: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None,
              slot: _Slot | None = None) -> Any:
        if timeout is None:
            with procedure_running(key):
                return fn(*args, **kwargs)
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                with procedure_running(key):
                    box["value"] = fn(*args, **kwargs)
            except BaseException as e:
                box["error"] = e
            finally:
                if slot is not None:
                    slot.thread_ended()

        t = threading.Thread(target=target, name=f"actorflow-proc-{key}", daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            if slot is not None:
                slot.abandoned()  # its place in the limit goes back when the thread ends
            raise ProcedureTimeout(
                f"procedure {getattr(fn, '__qualname__', fn)} (key {key}) did not return within "
                f"{timeout}s; the attempt is abandoned (its late result is discarded)"
            )
        if "error" in box:
            raise box["error"]
        return box["value"]
