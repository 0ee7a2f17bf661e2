"""``Cluster``: several nodes of one cluster in one process, for tests (Orleans' ``TestCluster``).

Each node is a full ``ActorSystem`` on the same PostgreSQL URL with its own ``node_id`` and its
own connections; they share one clock (a ``VirtualClock`` unless told otherwise), so timers are
tested in milliseconds across nodes, and ``idle()`` waits for the whole cluster: every node idle,
no wake-up waiting between nodes, every shard leased by the live node that should hold it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from persistence._shards import assignment

from ._clock import Clock, VirtualClock
from ._system import ActorSystem


class Cluster:
    """``n`` nodes (``node-1`` .. ``node-n``) on ``url``; a context manager.

    ``options`` go to every ``ActorSystem`` (``procedure_workers``, ``retention``, ...).
    """

    def __init__(self, url: str, n: int = 3, *, clock: Clock | None = None, node_ttl: float = 10.0,
                 **options: Any) -> None:
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"Cluster needs at least one node, got n={n!r}")
        self.url = url
        self.clock = clock if clock is not None else VirtualClock()
        self.node_ttl = node_ttl
        self.options = options
        self.nodes: dict[str, ActorSystem] = {}
        self._next = 1
        try:
            for _ in range(n):
                self.add()
            self.settle()
        except BaseException:
            self.shutdown()
            raise

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __getitem__(self, node_id: str) -> ActorSystem:
        return self.nodes[node_id]

    def __iter__(self) -> Iterator[ActorSystem]:
        return iter(list(self.nodes.values()))

    # -- membership ---------------------------------------------------------------------------
    def add(self, node_id: str | None = None, *, local_time: Callable[[], float] | None = None,
            clock: Clock | None = None) -> ActorSystem:
        """Start a node (it joins and takes its share at its next rounds; ``settle()`` waits).
        ``local_time``: the node's own clock, to give it a skew (with ``clock=None``, a real clock
        anchored to the database's)."""
        if node_id is None:
            while f"node-{self._next}" in self.nodes:
                self._next += 1
            node_id = f"node-{self._next}"
        if node_id in self.nodes:
            raise ValueError(f"node {node_id!r} already runs in this cluster")
        system = ActorSystem(self.url, clock=clock if clock is not None or local_time else self.clock,
                             node_id=node_id, node_ttl=self.node_ttl, _local_time=local_time,
                             **self.options)
        self.nodes[node_id] = system
        return system

    def remove(self, node_id: str) -> None:
        """Shut a node down: it hands its shards off to the others first."""
        self.nodes.pop(node_id).shutdown()

    def crash(self, node_id: str) -> None:
        """Stop a node as a crash would: no handoff; its session ends, so the others find it
        dead at their next round and take its shards over."""
        self.nodes.pop(node_id)._crash()

    def owner(self, workflow_id: str) -> str | None:
        """The node that runs ``workflow_id`` now."""
        return next((n for n, s in self.nodes.items() if s._rt.owns(workflow_id)), None)

    # -- waiting ------------------------------------------------------------------------------
    def balanced(self) -> bool:
        """Every live node holds exactly its rendezvous share of the shards."""
        live = list(self.nodes)
        if not live:
            return True
        any_node = next(iter(self.nodes.values()))._rt.cluster
        assert any_node is not None
        share = assignment(any_node.shard_count, live)
        for node_id, system in self.nodes.items():
            cluster = system._rt.cluster
            if cluster.owned_shards() != share[node_id]:
                return False
        return any_node.settled()

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until the shards are where the live nodes say they belong."""
        deadline = time.monotonic() + timeout
        while not self.balanced():
            if time.monotonic() >= deadline:
                held = {n: len(s._rt.cluster.owned_shards()) for n, s in self.nodes.items()}
                raise TimeoutError(f"the cluster's shards did not settle within {timeout}s (held: {held})")
            time.sleep(0.01)

    def idle(self, timeout: float = 30.0) -> None:
        """Wait until nothing is left to do anywhere in the cluster now: the shards settled,
        every node idle, no wake-up waiting for a node (twice in a row, so that work handed
        from one node to another between two checks is seen)."""
        deadline = time.monotonic() + timeout
        quiet = 0
        while quiet < 2:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the cluster did not become idle within {timeout}s")
            self.settle(remaining)
            for system in self:
                system.idle(timeout=max(0.01, deadline - time.monotonic()))
            quiet = quiet + 1 if self.balanced() and all(s._idle_now() for s in self) else 0
            if quiet < 2:
                time.sleep(0.005)

    def shutdown(self) -> None:
        for node_id in list(self.nodes):
            self.remove(node_id)
