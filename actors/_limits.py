"""Procedure limits (SPEC §13): ``@procedure(concurrency=N, rate=R)`` bounds, in one system, the
attempts of that procedure running at once and started per second.

Every attempt of a limited procedure (a first one, a retry, one recovered at a start) goes
through its ``Gate``: it starts at once if there is room, else it waits in line, first come first
served. Waiting costs no thread and holds nothing that a crash could lose: the call is its
pending row in the store, which the next start dispatches again (in the store's order) through
the gate. ``rate`` spaces the starts ``1/R`` seconds apart on the system's clock (at most R in any
second, no burst); ``concurrency`` counts the attempts running. A call that has to wait is noted
in the store (``persistence._limits``) until its attempt starts, so that `wf show` and the web
view say it is waiting for its limit.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from actors._log import Log
from persistence import _limits as stored

# What an attempt that got its turn is given: run it, and call ``done`` once it has ended.
Start = Callable[[Callable[[], None]], None]


class Gate:
    """The line of one limited procedure."""

    def __init__(
        self, limits: Limits, function: str, concurrency: int | None, rate: float | None
    ) -> None:
        self.limits = limits
        self.function = function
        self.concurrency = concurrency if concurrency is not None else math.inf
        self.spacing = 1.0 / rate if rate else 0.0
        self.running = 0
        self.most = 0  # the most attempts that ran at once (for the tests and the figures)
        self.next_start = -math.inf  # system clock
        self.line: deque[tuple[str, str, Start]] = deque()
        self.waited: set[str] = set()  # keys noted in the store as waiting
        self.timer_armed = False
        self._lock = threading.Lock()

    def submit(self, key: str, workflow_id: str, start: Start, recovered: bool = False) -> None:
        with self._lock:
            self.line.append((key, workflow_id, start))
            if recovered:
                # It may have been noted waiting by the process that ran before: its note goes
                # when it starts.
                self.waited.add(key)
        self.pump()

    def pump(self) -> None:
        """Start every attempt that has room now; note the others as waiting."""
        clock = self.limits.clock
        go: list[tuple[str, Start]] = []
        wait: list[tuple[str, str, str]] = []
        with self._lock:
            now = clock.now()
            while self.line:
                key, wid, start = self.line[0]
                if self.running >= self.concurrency:
                    why = "concurrency"
                elif self.spacing and now < self.next_start:
                    why = "rate"
                    if not self.timer_armed:
                        self.timer_armed = True
                        self.limits.call_at(self.next_start, self._timer)
                else:
                    self.line.popleft()
                    self.running += 1
                    self.most = max(self.most, self.running)
                    if self.spacing:
                        self.next_start = max(now, self.next_start) + self.spacing
                    go.append((key, start))
                    continue
                for k, w, _ in self.line:
                    if k not in self.waited:
                        self.waited.add(k)
                        wait.append((k, w, why))
                break
            for k, _ in go:
                was_waiting = k in self.waited
                self.waited.discard(k)
                if was_waiting:
                    wait.append((k, "", ""))  # its row goes: it starts
        for k, w, why in wait:
            self.limits.noted(self.function, k, w, why)
        for _, start in go:
            start(self._done)

    def _timer(self) -> None:
        with self._lock:
            self.timer_armed = False
        self.pump()

    def _done(self) -> None:
        with self._lock:
            self.running -= 1
        self.pump()

    def close(self) -> None:
        with self._lock:
            self.line.clear()


class Limits:
    """The gates of a system's limited procedures, made as their first call comes."""

    def __init__(
        self, store: Any, clock: Any, call_at: Callable[[float, Callable[[], None]], None], log: Log
    ) -> None:
        self.store, self.clock, self.call_at = store, clock, call_at
        self.log = log  # its system's ``procedures`` logger
        self.gates: dict[str, Gate | None] = {}
        self.metrics: Any = None
        self._lock = threading.Lock()
        self._closed = False

    def gate(self, function: str, options: Callable[[], dict[str, Any]]) -> Gate | None:
        """The gate of ``function`` (None: it has no limit); ``options`` gives its options."""
        g = self.gates.get(function, False)
        if g is not False:
            return g  # type: ignore[return-value]
        opts = options()
        made = (
            Gate(self, function, opts.get("concurrency"), opts.get("rate"))
            if (opts.get("concurrency") or opts.get("rate"))
            else None
        )
        with self._lock:
            return self.gates.setdefault(function, made)

    def noted(self, function: str, key: str, workflow_id: str, why: str) -> None:
        """A call began to wait for its limit (``why``), or (``why`` empty) stopped waiting."""
        try:
            if why:
                if self.metrics is not None:
                    self.metrics.count("limited", function, why)
                self.log.debug(
                    "procedure_waiting_for_limit",
                    key=key,
                    workflow_id=workflow_id,
                    function=function,
                    limit=why,
                )
                stored.waiting(self.store, key, workflow_id, why, self.clock.now())
            else:
                stored.started(self.store, key)
        except Exception as e:  # only what `wf show` says is lost: the call itself is its row
            self.log.warning("procedure_limit_note_failed", key=key, function=function, error=repr(e))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            gates = [g for g in self.gates.values() if g is not None]
        for g in gates:
            g.close()
