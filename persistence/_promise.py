"""A one-shot result handed from one thread to another, lighter than ``concurrent.futures.Future``.

Every write and every signal waits on one of these, so its cost is on the hot path: a ``Future``
builds a ``Condition`` (an ``RLock`` and a waiter list, all in Python) per instance, while this is
one C lock, held until the result is set. It offers the part of the ``Future`` interface the
runtime uses: ``result``, ``exception``, ``done``, ``cancel``, ``set_result``, ``set_exception``
and ``add_done_callback``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, InvalidStateError
from typing import Any, Generic, TypeVar

from persistence._log import part_log

T = TypeVar("T")

log = part_log("store")

_SET = threading.Lock()  # makes check-and-set atomic; held for a few bytecodes, never contended long

# Per thread that holds its wake-ups (``hold_wakeups``): the gates of the promises it answered,
# whose waiting threads it lets go at its next ``let_go``.
class _Held(threading.local):
    # (a default of the class: a thread that never held its wake-ups reads None without a
    # failed lookup, which costs ten times a found one)
    gates: list[Any] | None = None


_held = _Held()


def hold_wakeups() -> None:
    """From now on, the threads waiting on a promise this thread ``answer``s are let go only at
    its next ``let_go()``: for a thread that answers a caller mid-way through work it holds the
    GIL for, the caller woken at once would only wait for the GIL (a second thread switch for each
    answer). Its outcome is set at once all the same (``done()``, callbacks, ``result()``)."""
    _held.gates = []


def let_go() -> None:
    """Wake the threads waiting on the promises this thread answered since its last call: before
    it blocks (on I/O, on a lock), or once its turn of work is over."""
    gates = _held.gates
    if gates:
        for gate in gates:
            gate.release()
        gates.clear()


def wake(gate: Any) -> None:
    """Release ``gate`` (a lock a thread sleeps on): at once, or at this thread's next
    ``let_go()`` if it holds its wake-ups."""
    gates = _held.gates
    if gates is None:
        gate.release()
    else:
        gates.append(gate)


class handing_off:
    """Around a hand-off to another thread and the wait for its answer, on a thread that does
    not hold its wake-ups (a caller's): the thread it wakes on the way is woken as it blocks in
    the wait (or leaves), not while it still holds the GIL, which that thread would only wait
    for (a thread switch more on each side)."""

    __slots__ = ("_own",)

    def __enter__(self) -> None:
        self._own = _held.gates is None
        if self._own:
            _held.gates = []

    def __exit__(self, *exc: object) -> None:
        if self._own:
            gates, _held.gates = _held.gates, None
            for gate in gates or ():
                gate.release()


class Promise(Generic[T]):
    """A result or an error, set once by one thread and awaited by any number of others."""

    __slots__ = ("_gate", "_done", "_value", "_error", "_callbacks")

    def __init__(self) -> None:
        self._gate = threading.Lock()
        self._gate.acquire()  # released when the outcome is set: waiters block on it until then
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Promise[T]], object]] | None = None

    def done(self) -> bool:
        return self._done

    def _settle(self, value: Any, error: BaseException | None, later: list[Any] | None = None) -> bool:
        with _SET:
            if self._done:
                return False
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks = self._callbacks, None
        if later is None:
            self._gate.release()
        else:
            later.append(self._gate)
        if callbacks:
            for fn in callbacks:
                self._call(fn)
        return True

    def add_done_callback(self, fn: Callable[[Promise[T]], object]) -> None:
        """Call ``fn(self)`` once the outcome is set: at once if it is, else on the setting thread.

        ``fn`` runs on whichever thread sets the outcome (for a write, the writer's), so it must be
        short and must not block; an exception it raises is logged and goes no further.
        """
        with _SET:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        self._call(fn)

    def _call(self, fn: Callable[[Promise[T]], object]) -> None:
        try:
            fn(self)
        except Exception:
            log.exception("promise_callback_failed")

    def set_result(self, value: T) -> None:
        if not self._settle(value, None):
            raise InvalidStateError(f"{self!r} already has an outcome")

    def offer(self, value: T) -> bool:
        """Set the result unless an outcome is set already (by another thread, say); False then."""
        return self._settle(value, None)

    def answer(self, value: T) -> bool:
        """``offer``, but the threads waiting for it are let go at this thread's next ``let_go()``
        if it holds its wake-ups (``hold_wakeups``); at once otherwise."""
        return self._settle(value, None, _held.gates)

    def set_exception(self, error: BaseException) -> None:
        if not self._settle(None, error):
            raise InvalidStateError(f"{self!r} already has an outcome")

    def cancel(self) -> bool:
        """Give up on an outcome not set yet (a queued write is then skipped); False if too late."""
        return self._settle(None, CancelledError())

    def cancelled(self) -> bool:
        return isinstance(self._error, CancelledError)

    def _wait(self, timeout: float | None) -> None:
        if self._done:
            return
        let_go()  # the threads this one woke or answered go on while it waits
        if not self._gate.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            if self._done:
                return  # set as the wait ended, its waiters not let go yet (``answer``)
            raise TimeoutError(f"no outcome within {timeout}s")
        self._gate.release()  # let every other waiter through too

    def outcome(self) -> tuple[Any, BaseException | None]:
        """The value and the error of a promise whose outcome is set (``done()``), without
        waiting: what a callback, or a thread that saw it done, reads."""
        return self._value, self._error

    def result(self, timeout: float | None = None) -> T:
        """The value once set (waiting up to ``timeout`` seconds); raises the error if one was set."""
        self._wait(timeout)
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[no-any-return]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error once set (waiting up to ``timeout`` seconds), or None for a value."""
        self._wait(timeout)
        return self._error

    def __repr__(self) -> str:
        state = "pending" if not self._done else ("failed" if self._error is not None else "done")
        return f"<Promise {state}>"
