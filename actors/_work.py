"""Outstanding-work accounting behind ``system.idle()``."""

from __future__ import annotations

import threading


class WorkCounter:
    """Counts work that is queued or running (messages, procedures, restarts)."""

    def __init__(self) -> None:
        # A plain lock: nothing takes it twice, and an RLock costs more on every message. Counting
        # takes it directly (a C context manager); only ``wait`` goes through the condition.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self.count = 0
        self._waiters = 0  # threads in ``wait``: a count reaching zero wakes them, if any

    def inc(self, n: int = 1) -> None:
        with self._lock:
            self.count += n

    def dec(self, n: int = 1) -> None:
        with self._lock:
            self.count -= n
            if self.count <= 0:
                self.count = max(self.count, 0)
                if self._waiters:
                    self._cond.notify_all()

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the count to reach zero (returns at once if it is)."""
        with self._lock:
            if not self.count:
                return
            self._waiters += 1
            try:
                self._cond.wait(timeout)
            finally:
                self._waiters -= 1
