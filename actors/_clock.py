"""Clocks: the wall clock, and the virtual clock tests drive by hand."""

from __future__ import annotations

import datetime
import math
import threading
import time
from collections.abc import Callable


class Clock:
    """Epoch-seconds time source for workflow timers, ``now()`` and procedure retry backoff."""

    virtual = False

    def __init__(self) -> None:
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        """The current time, epoch seconds."""
        return time.time()

    def wait_timeout(self, due: float) -> float | None:
        """How long (real seconds) a thread should sleep for ``due`` to come; None: until woken."""
        return max(0.0, due - self.now())

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever the time jumps (virtual clocks only)."""
        with self._lock:
            self._listeners.append(callback)

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for cb in listeners:
            cb()


class SystemClock(Clock):
    """Real time."""


class AnchoredClock(Clock):
    """Real time by a database server's clock: this process's time plus ``offset()``, the
    server's clock minus this process's as a cluster's node last measured it. A node whose own
    clock is off thus arms and fires timers by the same clock as every other node. Never goes
    back (a new measurement a little lower than the last is absorbed)."""

    def __init__(self, offset: Callable[[], float], local: Callable[[], float] | None = None) -> None:
        super().__init__()
        self._offset = offset
        self._local = local or time.time
        self._last = float("-inf")

    def now(self) -> float:
        t = self._local() + self._offset()
        if t < self._last:
            return self._last
        self._last = t
        return t


def _finite(value: float, what: str) -> float:
    """``value`` as a float, or a clear error for what no clock can read (nan, inf, not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} takes a number of seconds, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{what} takes a finite number of seconds, got {value!r}: the clock would read it for good")
    return float(value)


class VirtualClock(Clock):
    """A clock that only moves when told to, so hour-long workflows are tested in milliseconds.

    ``advance(seconds)`` moves time forward and wakes the timer service; timers that fall due fire,
    and ``system.idle()`` then waits for the steps they cause.
    """

    virtual = True

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        super().__init__()
        self._now = _finite(start, "VirtualClock(start=...)")
        self._time_lock = threading.Lock()

    def now(self) -> float:
        with self._time_lock:
            return self._now

    def wait_timeout(self, due: float) -> float | None:
        return 0.0 if due <= self.now() else None

    def advance(self, seconds: float | datetime.timedelta) -> float:
        """Move time forward by ``seconds`` (>= 0, or a ``timedelta``, as ``timer(after=...)``
        takes); returns the new time."""
        if isinstance(seconds, datetime.timedelta):
            seconds = seconds.total_seconds()
        seconds = _finite(seconds, "VirtualClock.advance()")
        if seconds < 0:
            raise ValueError(f"VirtualClock.advance() takes seconds >= 0, got {seconds}")
        with self._time_lock:
            self._now += seconds
            t = self._now
        self._notify()
        return t

    def set(self, t: float) -> None:
        """Jump to epoch time ``t`` (not backwards)."""
        t = _finite(t, "VirtualClock.set()")
        with self._time_lock:
            if t < self._now:
                raise ValueError(f"VirtualClock cannot go back from {self._now} to {t}")
            self._now = float(t)
        self._notify()
