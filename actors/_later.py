"""One thread that runs callbacks after a delay of real time: restarts and storage retries.

Backoffs are real time, not the workflow clock: a restart after a fault, or a write tried again
after a full disk, must happen even while a test's virtual clock stands still. Each pending call
counts as work, so ``system.idle()`` waits for it.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

from persistence._log import Log

from ._work import WorkCounter

_NO_SYSTEM = Log("system")  # a service made for no system in particular


class Later:
    """Run ``fn()`` on this object's thread once ``delay`` seconds of real time have passed."""

    def __init__(self, work: WorkCounter, name: str = "actorflow-later", log: Log | None = None) -> None:
        self._log = log if log is not None else _NO_SYSTEM  # its system's ``system`` logger
        self._work = work
        self._heap: list[tuple[float, int, Callable[[], object]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def threads(self) -> list[threading.Thread]:
        return [self._thread]

    def call_later(self, delay: float, fn: Callable[[], object]) -> None:
        with self._cond:
            if self._stopped:
                return
            self._work.inc()
            heapq.heappush(self._heap, (time.monotonic() + max(delay, 0.0), next(self._seq), fn))
            self._cond.notify()

    def stop(self) -> None:
        """Drop what is pending and end the thread."""
        with self._cond:
            self._stopped = True
            dropped, self._heap = len(self._heap), []
            self._cond.notify()
        if dropped:
            self._work.dec(dropped)
        if threading.current_thread() is not self._thread:
            self._thread.join(5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cond.wait(None if not self._heap else self._heap[0][0] - time.monotonic())
                if self._stopped:
                    return
                _due, _n, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception as e:  # the thread must outlive any callback
                self._log.error("delayed_call_failed", error=repr(e))
            finally:
                self._work.dec()
