"""How workflows that finished in this process ended, kept so that ``result()`` needs no read.

The finishing step's commit holds the outcome; the runtime keeps the newest few (small ones only)
for as long as nothing can have changed them behind its back. A finished workflow changes only
by being pruned (and then, its id freed, perhaps started again): a prune by this process forgets
the ids it deleted (``forget``); on a SQLite file, no other process prunes while this one owns
it (``wf prune`` asks the owner). On a cluster another node may prune, so an outcome is kept
only while this node is alone, and all are dropped once another node has been seen live
(``Cluster.alone_mark``): a node that joins is seen before it has opened.

A workflow a start of this process created is kept as running until its end is remembered:
``result()`` then waits for that end without reading first (and reads after its usual bound,
for an end this process did not see).
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from typing import NamedTuple

from persistence._types import Cluster

KEPT = 4096  # outcomes kept, newest first
LARGEST = 16 * 1024  # bytes: an outcome with a larger result or error is read from the store


class Outcome(NamedTuple):
    """What a finished workflow's row says of its end (as ``WorkflowRecord`` names it)."""

    status: str
    result: bytes | None  # the pickled value of a completed workflow
    error: str | None  # the JSON error of a failed or cancelled one


class Outcomes:
    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        # workflow id -> (its outcome, or None while it runs, started here; the mark it was kept under)
        self._kept: collections.OrderedDict[str, tuple[Outcome | None, int]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._pruning = 0  # prunes of this process between their start and forgetting what they deleted

    def _mark(self) -> int | None:
        return self._cluster.alone_mark()

    def remember(self, workflow_id: str, outcome: Outcome) -> None:
        """A step of this process committed the end of ``workflow_id``."""
        if len(outcome.result or b"") + len(outcome.error or "") > LARGEST:
            return
        mark = self._mark()
        if mark is None:
            return
        with self._lock:
            self._kept[workflow_id] = (outcome, mark)
            self._kept.move_to_end(workflow_id)
            if len(self._kept) > KEPT:
                self._kept.popitem(last=False)

    def started(self, workflow_id: str) -> None:
        """A start of this process created ``workflow_id`` (its first step committed): it runs
        until its end is remembered (which it may already be)."""
        mark = self._mark()
        if mark is None:
            return
        with self._lock:
            if workflow_id not in self._kept:
                self._kept[workflow_id] = (None, mark)
                if len(self._kept) > KEPT:
                    self._kept.popitem(last=False)

    def _entry(self, workflow_id: str) -> tuple[Outcome | None, int] | None:
        with self._lock:
            if self._pruning:  # a prune may have committed and not yet said what it deleted
                return None
            entry = self._kept.get(workflow_id)
        if entry is None:
            return None
        if entry[1] != self._mark():  # another node has been live since: it may have pruned
            with self._lock:
                self._kept.clear()
            return None
        return entry

    def get(self, workflow_id: str) -> Outcome | None:
        """The outcome of ``workflow_id`` if it finished here and is known unchanged since."""
        entry = self._entry(workflow_id)
        return None if entry is None else entry[0]

    def running(self, workflow_id: str) -> bool:
        """True if ``workflow_id`` was started here and no end of it was seen here since (it
        runs, unless it ended in a way this process missed: a reader of it reads again soon)."""
        entry = self._entry(workflow_id)
        return entry is not None and entry[0] is None

    @contextlib.contextmanager
    def pruning(self) -> Iterator[None]:
        """Around a prune of this process, from before its transaction until it has forgotten
        what it deleted: meanwhile every reader reads the store (an outcome the prune deleted
        is never answered from memory once its commit can be seen)."""
        with self._lock:
            self._pruning += 1
        try:
            yield
        finally:
            with self._lock:
                self._pruning -= 1

    def forget(self, workflow_ids: list[str]) -> None:
        """These workflows were pruned."""
        with self._lock:
            for wid in workflow_ids:
                self._kept.pop(wid, None)
