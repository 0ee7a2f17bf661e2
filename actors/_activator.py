"""The activator: owns the id-to-actor map, starts actors on demand and passivates idle ones.

The number of live actors (and so of actor threads) never exceeds ``max_live``. A message for a
workflow that is not live starts its actor, first passivating the least recently used idle actor if
the cap is reached; if every live actor is busy, the message waits in order until one frees up.
Passivation loses nothing: a workflow's state is already in SQLite.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pykka

from ._work import WorkCounter


@dataclass
class _Slot:
    ref: pykka.ActorRef[Any]
    busy: int = 0
    last_used: float = field(default_factory=time.monotonic)


class Activator:
    """Delivers messages to workflow actors, keeping at most ``max_live`` of them alive."""

    def __init__(self, make_actor: Callable[[str], pykka.ActorRef[Any]], max_live: int, work: WorkCounter) -> None:
        if max_live < 1:
            raise ValueError(f"max_live must be >= 1, got {max_live}")
        self._make = make_actor
        self.max_live = max_live
        self._work = work
        self._lock = threading.Lock()
        self._live: OrderedDict[str, _Slot] = OrderedDict()
        # Live actors with nothing to do, least recently used first: eviction takes the first.
        self._idle: OrderedDict[str, None] = OrderedDict()
        self._waiting: OrderedDict[str, list[Any]] = OrderedDict()
        self.passivated = 0  # actors stopped so far (metrics)
        # Busy actors to stop once they are idle (their workflow's shard moved to another node).
        self._stop_when_idle: set[str] = set()
        self._closed = False

    def live_count(self) -> int:
        with self._lock:
            return len(self._live)

    def queued(self) -> int:
        """Messages delivered and not handled yet (in the actors' mailboxes, or waiting for a
        slot)."""
        with self._lock:
            return sum(s.busy for s in self._live.values()) + sum(len(m) for m in self._waiting.values())

    def has_waiting(self) -> bool:
        with self._lock:
            return bool(self._waiting)

    def deliver(self, workflow_id: str, message: Any) -> None:
        """Send ``message`` to the workflow's actor, activating it if needed."""
        with self._lock:
            if self._closed:
                return
            self._work.inc()
            if workflow_id in self._waiting:
                self._waiting[workflow_id].append(message)
                return
            slot = self._live.get(workflow_id)
            if slot is None:
                if len(self._live) >= self.max_live and not self._evict_idle_locked():
                    self._waiting[workflow_id] = [message]
                    return
                slot = self._activate_locked(workflow_id)
            slot.busy += 1
            self._idle.pop(workflow_id, None)
            slot.ref.tell(message)

    def done(self, workflow_id: str, ended: Any = None) -> None:
        """Called by an actor after each message it processed. ``ended``: the actor, on its own
        thread, whose workflow has ended; with no message left for it, it stops now."""
        with self._lock:
            slot = self._live.get(workflow_id)
            if slot is not None:
                slot.busy -= 1
                slot.last_used = time.monotonic()
                if slot.busy == 0 and ended is not None and slot.ref is ended.actor_ref:
                    # Its mailbox is empty and, under this lock, stays so: the next message for
                    # the id starts a new actor. Stopped in place, as its own last act.
                    self._stop_when_idle.discard(workflow_id)
                    self._stop_locked(workflow_id, slot, ended.retire)
                elif slot.busy == 0:
                    self._idle[workflow_id] = None
                    if workflow_id in self._stop_when_idle:
                        self._stop_when_idle.discard(workflow_id)
                        # Not from its own thread (it would wait for itself): not awaited.
                        self._stop_locked(workflow_id, slot)
            # A message waiting for a slot takes the least recently used idle actor's, this one's
            # too: stopped by a stop message, which it takes once this message is over (it is
            # not waited for). Sparing it left a waiting message stuck while it was the only
            # idle actor (max_live=1: an ask to another workflow never answered).
            if self._waiting:
                self._drain_waiting_locked()
        self._work.dec()

    def passivate_idle(self, older_than: float) -> int:
        """Stop live actors idle for more than ``older_than`` seconds; returns how many."""
        cutoff = time.monotonic() - older_than
        n = 0
        with self._lock:
            for wid in list(self._idle):
                slot = self._live[wid]
                if slot.last_used > cutoff:
                    break  # the rest were used more recently
                self._stop_locked(wid, slot)
                n += 1
            if n and self._waiting:
                self._drain_waiting_locked()
        return n

    def passivate_where(self, stop: Callable[[str], bool]) -> int:
        """Stop the live actors whose workflow ``stop`` names (a busy one once it is idle);
        returns how many were live. The next message for one of them starts a new actor, which
        reads the store."""
        with self._lock:
            live = list(self._live)
        ids = [wid for wid in live if stop(wid)]  # (it may read the store: not under the lock)
        with self._lock:
            for wid in ids:
                slot = self._live.get(wid)
                if slot is None:
                    continue
                if slot.busy == 0:
                    self._stop_locked(wid, slot)
                else:
                    self._stop_when_idle.add(wid)
            if self._waiting:
                self._drain_waiting_locked()
        return len(ids)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            slots = list(self._live.values())
            self._live.clear()
            self._idle.clear()
            dropped = sum(len(m) for m in self._waiting.values())
            self._waiting.clear()
        for _ in range(dropped):
            self._work.dec()
        for slot in slots:
            _stop_ref(slot.ref)

    # -- internals (lock held) ----------------------------------------------------------------
    def _activate_locked(self, workflow_id: str) -> _Slot:
        # A new slot is busy as soon as the caller tells it its first message.
        slot = _Slot(self._make(workflow_id))
        self._live[workflow_id] = slot
        return slot

    def _stop_locked(
        self, workflow_id: str, slot: _Slot, stop: Callable[[], None] | None = None
    ) -> None:
        """Stop the idle actor of ``workflow_id``: by a stop message, or by ``stop`` (its own
        ``retire``, called on its thread)."""
        self.passivated += 1
        del self._live[workflow_id]
        self._idle.pop(workflow_id, None)
        # The actor is idle (busy == 0), so its mailbox is empty: stopping it loses nothing. The
        # stop is not awaited: a new actor for the same id may start at once, the old one only
        # has its stop message left to handle.
        if stop is not None:
            stop()
        else:
            _stop_ref(slot.ref)

    def _evict_idle_locked(self) -> bool:
        for wid in self._idle:  # least recently used first
            self._stop_locked(wid, self._live[wid])
            return True
        return False

    def _drain_waiting_locked(self) -> None:
        while self._waiting:
            if len(self._live) >= self.max_live and not self._evict_idle_locked():
                return
            wid, messages = self._waiting.popitem(last=False)
            slot = self._live.get(wid) or self._activate_locked(wid)
            self._idle.pop(wid, None)
            for m in messages:
                slot.busy += 1
                slot.ref.tell(m)


def _stop_ref(ref: pykka.ActorRef[Any]) -> None:
    # Not awaited: the actor has only its stop message left to handle.
    ref.stop(block=False)
