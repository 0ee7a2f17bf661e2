"""The timer service: the runtime's one scheduler thread. It fires every workflow timer, runs
callbacks at a time of the workflow clock (procedure retries), and runs callbacks after a delay of
real time (restarts after a fault, writes tried again after a storage fault).

It keeps a heap of the timers due within a horizon, loaded from the store by index, and fires each
one by telling its workflow's actor. The actor consumes the timer row in the step it causes, so a
timer fires exactly once even if the process dies in between (it is loaded again at recovery).

Backoffs are real time, not the workflow clock: a restart after a fault, or a write tried again
after a full disk, must happen even while a test's virtual clock stands still. Each pending one
counts as work, so ``system.idle()`` waits for it.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from actors._log import Log
from persistence import StorageUnavailable, TimerRow

from ._clock import Clock
from ._work import WorkCounter

_NO_SYSTEM = Log("timers")  # a service made for no system in particular


class TimerService:
    """Fires due timers (workflow clock) and scheduled callbacks (procedure retries)."""

    def __init__(
        self,
        clock: Clock,
        load_due: Callable[[float, int], list[TimerRow]],
        fire: Callable[[TimerRow], None],
        work: WorkCounter,
        horizon: float = 300.0,
        log: Log | None = None,
    ) -> None:
        self._log = log if log is not None else _NO_SYSTEM  # its system's ``timers`` logger
        self._clock = clock
        self._load_due = load_due
        self._fire = fire
        self._work = work
        self._horizon = horizon
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, str, Any]] = []
        # Callbacks due at a time of the monotonic clock (``call_later``), each counted as work.
        self._later: list[tuple[float, int, Callable[[], object]]] = []
        self._seq = itertools.count()
        self._known: set[int] = set()
        # Timers fired and not yet consumed (id: workflow id): a refill skips them while their
        # step is on its way, and keeps them while the store does.
        self._fired: dict[int, str] = {}
        self._cancelled: set[int] = set()
        self._loaded_until = float("-inf")
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="actorflow-timers", daemon=True)
        clock.on_change(self._wake)

    def threads(self) -> list[threading.Thread]:
        return [self._thread]

    def start(self) -> None:
        self._refill()
        self._thread.start()

    def stop(self) -> None:
        """Drop what is pending and end the thread."""
        with self._cond:
            self._stopping = True
            dropped, self._later = len(self._later), []
            self._cond.notify_all()
        if dropped:
            self._work.dec(dropped)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def arm(self, rows: list[TimerRow]) -> None:
        """Committed timers; those due within the loaded horizon join the heap (once: one known
        already, or fired and not yet consumed, is skipped)."""
        with self._cond:
            head = self._heap[0][0] if self._heap else float("inf")
            for r in rows:
                if r.due_at <= self._loaded_until and r.id not in self._known and r.id not in self._fired:
                    self._push_timer(r)
            self._notify_if_sooner(head)

    def cancel(self, ids: list[int]) -> None:
        """Timers deleted by a step (select losers); skipped when they come up."""
        with self._cond:
            for i in ids:
                if i in self._known:
                    self._cancelled.add(i)

    def call_at(self, due: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the timer thread once the workflow clock reaches ``due``."""
        with self._cond:
            head = self._heap[0][0] if self._heap else float("inf")
            heapq.heappush(self._heap, (due, next(self._seq), "call", callback))
            self._notify_if_sooner(head)

    def call_later(self, delay: float, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the timer thread once ``delay`` seconds of real time have passed."""
        with self._cond:
            if self._stopping:
                return
            self._work.inc()
            due = time.monotonic() + max(delay, 0.0)
            sooner = not self._later or due < self._later[0][0]
            heapq.heappush(self._later, (due, next(self._seq), callback))
            if sooner:
                self._cond.notify_all()

    def _notify_if_sooner(self, head: float) -> None:
        # The thread sleeps until the heap's earliest entry (``head`` before this push) at the
        # latest: only an entry due sooner needs to wake it. Under load most timers are armed
        # behind others (a thousand sleeps of 0.1 s started one after another), and waking the
        # thread for each would cost a thread switch per timer for nothing.
        if self._heap and self._heap[0][0] < head:
            self._cond.notify_all()

    def has_due(self) -> bool:
        """True if something is due now and not yet fired (``idle()`` is false then)."""
        now = self._clock.now()
        with self._cond:
            if now >= self._loaded_until - self._horizon / 2:
                # Timers beyond the loaded horizon may be due: the thread is about to load them.
                self._cond.notify_all()
                return True
            self._drop_cancelled_top()
            return bool(self._heap) and self._heap[0][0] <= now

    def _push_timer(self, r: TimerRow) -> None:
        self._known.add(r.id)
        heapq.heappush(self._heap, (r.due_at, next(self._seq), "timer", r))

    def _drop_cancelled_top(self) -> None:
        while self._heap and self._heap[0][2] == "timer" and self._heap[0][3].id in self._cancelled:
            _, _, _, r = heapq.heappop(self._heap)
            self._cancelled.discard(r.id)
            self._known.discard(r.id)

    def refill(self, again: Callable[[str], bool] | None = None) -> None:
        """Load again the timers due within the horizon (a cluster's node took shards over: theirs
        join the heap, the ones already known are skipped).

        ``again(workflow_id)`` selects the workflows whose fired timers fire again if the store
        still holds them: their firing went nowhere (a node fires the timers of the shards it
        held when they fell due; one it no longer ran, or whose step the fence refused, is back
        in the store when the node takes the shard over again). A timer fired twice is harmless:
        the workflow's actor takes the one its wait awaits, by id, once."""
        if again is not None:
            with self._cond:
                fired = list(self._fired.items())
            again_ids = [t for t, wid in fired if again(wid)]  # (a store read, not under the lock)
            with self._cond:
                for t in again_ids:
                    self._fired.pop(t, None)
        self._refill()
        self._wake()

    def _refill(self) -> None:
        now = self._clock.now()
        until = now + self._horizon
        rows = self._load_due(until, 1_000_000)
        with self._cond:
            in_db = {r.id for r in rows}
            self._fired = {t: wid for t, wid in self._fired.items() if t in in_db}
            for r in rows:
                if r.id not in self._known and r.id not in self._fired:
                    self._push_timer(r)
            self._loaded_until = until

    def _run(self) -> None:
        while True:
            due_items: list[tuple[str, Any]] = []
            with self._cond:
                if self._stopping:
                    return
                self._drop_cancelled_top()
                now = self._clock.now()
                while self._heap and self._heap[0][0] <= now:
                    _, _, kind, item = heapq.heappop(self._heap)
                    if kind == "timer":
                        self._known.discard(item.id)
                        if item.id in self._cancelled:
                            self._cancelled.discard(item.id)
                            continue
                        self._fired[item.id] = item.workflow_id
                    # Count the work before it leaves the heap, so idle() never sees a gap.
                    self._work.inc()
                    due_items.append((kind, item))
                later = self._later
                real = time.monotonic()
                while later and later[0][0] <= real:
                    due_items.append(("call", heapq.heappop(later)[2]))  # counted when pushed
                if not due_items:
                    refill_at = self._loaded_until - self._horizon / 2
                    next_due = self._heap[0][0] if self._heap else float("inf")
                    wake_at = min(next_due, refill_at)
                    if wake_at <= now:
                        pass
                    else:
                        timeout = self._clock.wait_timeout(wake_at)
                        if timeout is not None:
                            timeout = min(timeout, 1.0)
                        if later:
                            backoff = max(later[0][0] - real, 0.0)
                            timeout = backoff if timeout is None else min(timeout, backoff)
                        self._cond.wait(timeout)
                        if self._clock.now() < refill_at:
                            continue
            if not due_items:
                try:
                    self._refill()
                except StorageUnavailable as e:  # an outage that may pass: tried again
                    self._log.warning("timer_refill_failed", error=str(e), retrying="within a second")
                    with self._cond:
                        self._cond.wait(1.0)
                except Exception as e:  # a store hiccup must not kill the timer thread
                    self._log.error("timer_refill_failed", error=repr(e))
                continue
            for kind, item in due_items:
                try:
                    if kind == "timer":
                        self._fire(item)
                    else:
                        item()
                except Exception as e:
                    self._log.error("timer_callback_failed", error=repr(e))
                finally:
                    self._work.dec()
