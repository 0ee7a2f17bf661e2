"""The cluster of one: what a store that owns everything it opened (a SQLite file) is to the
runtime, so that one node and many take the same path.

It has one shard, always leased by its one node; no other node exists to tell of wake-ups, ends or
interest, so those are no-ops, and its clock is the database's (the same machine).
"""

from __future__ import annotations

import os
import socket
import time
from typing import TYPE_CHECKING

from persistence._types import Cluster, ClusterEvents, NodeRow, RecoveryWork

if TYPE_CHECKING:
    from persistence._types import Store


class SoloCluster(Cluster):
    """One node holding the one shard of a database no other process writes to."""

    shard_count = 1

    def __init__(self, store: Store, node_id: str | None = None) -> None:
        self._store = store
        self.node_id = node_id if node_id is not None else f"{socket.gethostname()}-{os.getpid()}"
        self.started_at = time.time()

    def start(self, events: ClusterEvents) -> None:
        """Nothing to start: no heartbeats, no takeovers, no other node's wake-ups."""

    def owned_shards(self) -> set[int]:
        return {0}

    def owns(self, workflow_id: str) -> bool:
        return True

    def shard_for(self, workflow_id: str) -> int:
        return 0

    def owns_cached(self, workflow_id: str) -> bool | None:
        return True

    def owns_new(self, workflow_id: str) -> bool:
        return True

    def note_child(self, child_id: str, parent_id: str) -> None:
        """Every workflow is in the one shard."""

    def alone(self) -> bool:
        return True

    def alone_mark(self) -> int | None:
        return 0  # alone for good: no other node is ever seen

    def settled(self) -> bool:
        return True

    def nodes(self) -> list[NodeRow]:
        return [NodeRow(self.node_id, "", "up", 0.0, self.started_at, os.getpid(), socket.gethostname(), 1)]

    def clock_offset(self) -> float:
        return 0.0

    def publish_wake(self) -> None:
        """No other node to wake."""

    def publish_done(self, workflow_ids: list[str]) -> None:
        """No other node waits."""

    def publish_news(self, workflow_ids: list[str]) -> None:
        """No other node waits."""

    def publish_interest(self, workflow_id: str) -> None:
        """Every workflow runs here."""

    def recovery_work(self, shards: set[int]) -> RecoveryWork:
        store = self._store
        return RecoveryWork(
            with_work=list(store.workflows_with_work()),
            procedures=list(store.procedures_to_run()),
            cancelling=store.workflows_cancelling(),
        )

    def leave(self) -> None:
        """No lease to hand off."""
