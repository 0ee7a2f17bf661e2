"""Outstanding-work accounting behind ``system.idle()``."""

from __future__ import annotations

import threading


class WorkCounter:
    """Counts work that is queued or running (messages, procedures, restarts)."""

    def __init__(self) -> None:
        # A plain lock: nothing takes it twice, and an RLock costs more on every message.
        self.cond = threading.Condition(threading.Lock())
        self.count = 0

    def inc(self, n: int = 1) -> None:
        with self.cond:
            self.count += n

    def dec(self, n: int = 1) -> None:
        with self.cond:
            self.count -= n
            if self.count <= 0:
                self.count = max(self.count, 0)
                self.cond.notify_all()

    def poke(self) -> None:
        with self.cond:
            self.cond.notify_all()
