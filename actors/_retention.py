"""Retention: finished workflows are deleted once they are older than the system's retention.

A finished workflow keeps its record (result or error, history) for ``retention`` seconds of the
system's clock after the step that ended it; then it and every row it left are deleted by the
running system, a short batch at a time, each batch one write among the steps of the running
workflows (so none of them waits long). ``prune`` and the ``wf prune`` requests use the same
batches.

Answered asks: the row of an ask, with its reply, is what answers the same ``ask_id`` asked
again (a caller that crashed and retries) without asking twice. It is kept ``id_retention``
seconds after the reply (at least an hour, ``REPLY_MIN_KEEP``; None: for good), then deleted by
the sweep in batches as finished workflows are, while its workflow runs on: a workflow answering
asks forever keeps the replies of that window, not all it ever gave. An ask not answered yet is
never deleted (but with its workflow); one asked again after its row went is a new ask.

Children: a finished child is deleted by the same rule whether or not its parent still runs. Its
outcome was written into its parent's inbox by the step that ended it, a row of the parent's that
stays until the parent consumes it; nothing else of a running parent refers to a child's row. Once
it is gone, its id is free: a later ``spawn(..., id=...)`` or ``start(..., id=...)`` of that id
starts a new workflow instead of finding the old one. A finished parent is deleted whether or not
its children still run (detached, or cleaning up after a cancel): they are unlinked from it (their
``parent_id`` cleared), so a new workflow under its id (``reuse_id``) neither lists them nor takes
their outcomes, which are dropped as outcomes for a pruned parent.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from actors._log import Log
from persistence import StorageUnavailable, Store

from ._clock import Clock

_NO_SYSTEM = Log("system")  # retention is part of the system's housekeeping

# One batch aims at this long a write (what a step queued behind it may wait), and is sized to it.
TARGET_BATCH_SECONDS = 0.01
MIN_BATCH, MAX_BATCH, FIRST_BATCH = 20, 2_000, 200
# Between two batches the writer is left to the running workflows for as long as the last batch
# took (at most PACE_MAX): a sweep or prune takes at most about half of the writer's time.
PACE_MAX = 0.05
# Tombstones past the id retention are deleted at most this often (seconds).
EXPIRE_EVERY = 60.0
# An answered ask's reply is kept at least this long (seconds), however short the id retention:
# an asker waiting for it, or ``wf ask`` reading it back, finds it.
REPLY_MIN_KEEP = 3600.0
# After a failed batch (a storage fault), the next try waits this long (doubling up to the max).
RETRY_FIRST, RETRY_MAX = 0.5, 30.0


def check_seconds(value: Any, what: str, *, allow_none: bool, positive: bool = False) -> float | None:
    """``value`` as seconds (a finite number >= 0, or > 0 if ``positive``; a ``timedelta`` as
    its seconds, as ``timer(after=...)`` takes one), or a TypeError/ValueError saying what is
    wrong."""
    if value is None and allow_none:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        extra = " or None (keep every finished workflow)" if allow_none else ""
        raise TypeError(f"{what} must be a number of seconds{extra}, got {value!r} (a timedelta is taken too)")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{what} must be a finite number of seconds {'>' if positive else '>='} 0, got {value!r}")
    return float(value)


class Retention:
    """Deletes finished workflows past the retention; carries out ``prune`` and ``wf prune``.

    Args:
        store: The system's store.
        clock: The system's clock: a workflow's age is measured on it, as its end was.
        retention: Seconds a finished workflow is kept; None keeps every one.
        on_pruned: Called with the ids of each batch deleted (the runtime forgets them).
        pruning: A context held around each batch, from before its transaction until
            ``on_pruned`` returned (the runtime answers no ``result()`` from memory meanwhile).
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        retention: float | None,
        on_pruned: Callable[[list[str]], None],
        log: Log | None = None,
        *,
        pruning: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
        id_retention: float | None = None,
    ) -> None:
        self._log = log if log is not None else _NO_SYSTEM  # its system's ``system`` logger
        self.store = store
        # Seconds the tombstone of a pruned workflow keeps its id taken (None: for good); the
        # sweep deletes older ones, at most once a minute.
        self.id_retention = id_retention
        self._next_expiry = 0.0
        # Seconds an answered ask's reply is kept (None: for good), and when (on the clock) the
        # index of answered asks is read again while none is due.
        self.reply_retention = None if id_retention is None else max(id_retention, REPLY_MIN_KEEP)
        self._next_replies = 0.0
        self.reply_batch = FIRST_BATCH
        self.expired_replies = 0  # by this system, since it started
        self.clock = clock
        self.retention = retention
        self._on_pruned = on_pruned
        self._pruning = pruning
        self.batch = FIRST_BATCH
        self._lock = threading.Lock()  # one batch at a time (its size adapts to the last one)
        # Requests of `wf prune` being carried out: seq -> [cutoff, pruned so far].
        self._requests: dict[int, list[float]] = {}
        self._retry_at = 0.0
        self._retry_delay = RETRY_FIRST
        self._failures = 0  # in a row: an outage of the storage is said once, not at each try
        self.pruned = 0  # by this system, since it started
        self.last_took = 0.0  # seconds the last batch's write took

    # -- the sweep ----------------------------------------------------------------------------
    def due(self) -> bool:
        """True if a finished workflow is past the retention, an answered ask past its window,
        or a `wf prune` request is open."""
        return bool(self._requests) or self._sweep_due() or self._replies_due()

    def _replies_due(self) -> bool:
        """Whether an answered ask is past its window: a read of the index's first entry, made
        again no sooner than a minute later (or than the oldest comes due) while none is."""
        if self.reply_retention is None:
            return False
        now = self.clock.now()
        if now < self._next_replies:
            return False
        oldest = self.store.oldest_reply()
        if oldest is not None and oldest <= now - self.reply_retention:
            return True
        later = now + EXPIRE_EVERY
        self._next_replies = later if oldest is None else min(later, oldest + self.reply_retention)
        return False

    def _sweep_due(self) -> bool:
        # A read of the index's first entry: no write transaction while nothing is due.
        if self.retention is None:
            return False
        oldest = self.store.oldest_finished()
        return oldest is not None and oldest <= self.clock.now() - self.retention

    def pace(self) -> float:
        """Seconds to leave the writer to the running workflows before the next batch."""
        return min(self.last_took, PACE_MAX)

    def tick(self) -> bool:
        """Run one batch of what is due (requests first); True if more is due (after ``pace()``).

        Called by the system's housekeeping loop; a failure is logged and retried later (with
        backoff), never raised.
        """
        now = time.monotonic()
        if now < self._retry_at:
            return False
        try:
            if self._requests:
                seq, (cutoff, _so_far) = next(iter(self._requests.items()))
                n, full = self._batch(cutoff)
                self._requests[seq][1] += n
                if not full:
                    total = int(self._requests[seq][1])
                    self.store.external_done(seq, json.dumps({"pruned": total}))
                    del self._requests[seq]  # after its answer is written: a fault retries it
                    self._log.info("prune_request_done", request=seq, pruned=total)
                more = bool(self._requests)
            elif self._sweep_due():
                assert self.retention is not None
                n, more = self._batch(self.clock.now() - self.retention)
            elif self._replies_due():
                more = self._expire_replies()
            else:
                self._expire_tombstones()
                return False
            if self._failures:
                self._log.info("retention_resumed", failures=self._failures)
            self._retry_delay = RETRY_FIRST
            self._failures = 0
            return more
        except Exception as e:
            self._failures += 1
            # A storage that is away (a full disk, a server gone) is said when it begins; the
            # tries that fail during the outage go to DEBUG, and retention_resumed ends it.
            said = isinstance(e, StorageUnavailable) and self._failures > 1
            level = self._log.debug if said else self._log.warning
            level("retention_failed", error=repr(e), retry_in=self._retry_delay, failures=self._failures)
            self._retry_at = now + self._retry_delay
            self._retry_delay = min(self._retry_delay * 2, RETRY_MAX)
            return False

    def _expire_tombstones(self) -> None:
        """Free the ids of workflows pruned longer than ``id_retention`` ago (one short write,
        at most once a minute of the system's clock)."""
        now = self.clock.now()
        if self.id_retention is None or now < self._next_expiry:
            return
        self._next_expiry = now + EXPIRE_EVERY
        n = self.store.expire_tombstones(now - self.id_retention)
        if n:
            self._log.info("tombstones_expired", count=n, id_retention=self.id_retention)

    def _expire_replies(self) -> bool:
        """One transaction deleting answered asks past their window, oldest first (sized as the
        prune's batches, on its own); True if it was full, so more may be due."""
        assert self.reply_retention is not None
        with self._lock:
            size = self.reply_batch
            t0 = time.perf_counter()
            n = self.store.expire_replies(self.clock.now() - self.reply_retention, size)
            took = self.last_took = time.perf_counter() - t0
            if n == size:
                if took < TARGET_BATCH_SECONDS / 2:
                    self.reply_batch = min(MAX_BATCH, size * 2)
                elif took > TARGET_BATCH_SECONDS * 2:
                    self.reply_batch = max(MIN_BATCH, size // 2)
            self.expired_replies += n
        return n == size

    def request(self, seq: int, payload: str | None) -> None:
        """Take on the `wf prune` request ``seq`` (payload ``{"older_than": seconds}``), once.

        A payload that is not one is answered at once with an error, not carried out.
        """
        if seq in self._requests:
            return
        try:
            older_than = check_seconds(
                json.loads(payload or "{}").get("older_than"), "older_than", allow_none=False
            )
        except (ValueError, TypeError, AttributeError) as e:
            self.store.external_done(seq, json.dumps({"error": f"bad prune request: {e}"}))
            return
        assert older_than is not None
        self._requests[seq] = [self.clock.now() - older_than, 0]

    def prune(self, older_than: float) -> int:
        """Delete every workflow that finished more than ``older_than`` seconds ago; how many."""
        cutoff = self.clock.now() - older_than
        total = 0
        while True:
            n, full = self._batch(cutoff)
            total += n
            if not full:
                return total
            time.sleep(self.pace())

    def _batch(self, cutoff: float) -> tuple[int, bool]:
        """One transaction of deletes; (how many, whether the batch was full so more may be due)."""
        with self._lock, self._pruning():
            size = self.batch
            t0 = time.perf_counter()
            ids = self.store.prune_finished(cutoff, size, at=self.clock.now())
            took = self.last_took = time.perf_counter() - t0
            if len(ids) == size:  # only a full batch says how long a full one takes
                if took < TARGET_BATCH_SECONDS / 2:
                    self.batch = min(MAX_BATCH, size * 2)
                elif took > TARGET_BATCH_SECONDS * 2:
                    self.batch = max(MIN_BATCH, size // 2)
            if ids:
                self.pruned += len(ids)
                self._on_pruned(ids)
        return len(ids), len(ids) == size
