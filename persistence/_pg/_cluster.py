"""A cluster of nodes on one PostgreSQL schema: membership, shard leases, fencing, wake-ups.

Every workflow belongs to one of a fixed number of shards (``persistence._shards``), stored in its
row: a root workflow's is the hash of its id, a child's its parent's unless it was spawned with
``placement="spread"``. Nodes lease shards; what each node should hold is decided by rendezvous
hashing over the live nodes.

Tables (``_ddl.cluster_ddl``, part of ``_schema``'s migrations):

- ``af_nodes``: one row per node name: its current incarnation (new at every process start, and
  at every rejoin), the key of the session advisory lock its control connection holds, its
  heartbeat (database clock only), its state (``up``, ``dead``, ``left``).
- ``af_shards``: one row per shard: the incarnation that leases it (NULL: free) and its epoch,
  the fencing token, +1 at every change of owner.
- ``af_wakeups``: "look at your inbox" rows for another shard's owner, written by a trigger in
  the very transaction that adds an inbox row (or a workflow) to a shard the writing session does
  not lease. NOTIFY is only a hint that some are there (sent after the commit, never inside a
  write transaction); the owner also polls every second, so a lost notification costs a second
  and nothing else.

Liveness: a node that dies (SIGKILL, a crash, a session the server terminated) frees its session
advisory lock within milliseconds, and the survivors, probing that lock every round, declare it
dead at once; a node that is frozen or cut off keeps its session (its host still answers TCP
keepalives) and is declared dead when its heartbeat is older than ``ttl``. Node sessions run
with ``idle_in_transaction_session_timeout``, so a frozen node's open transaction (and its lock on
a lease row) cannot hold up a takeover for longer than that.

Fencing: every write transaction of a step calls ``af_fence(shard, epoch, incarnation)`` first,
which share-locks the shard's lease row if, and only if, it is still leased by this incarnation
at this epoch, and otherwise raises SQLSTATE ``AF001`` (``Fenced``): nothing of the transaction
commits. A takeover (``UPDATE ... SET owner = ..., epoch = epoch + 1``) waits for the share lock,
so it can never interleave with a step, and once it committed no later step of the old owner
commits, however long that one was frozen.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import psycopg

from persistence._errors import Fenced, NodeIdInUse, PersistenceError, StorageUnavailable
from persistence._log import Log, part_log
from persistence._pg._errors import Retryable, translate_error
from persistence._pg._schema import connect, quote
from persistence._shards import assignment, shard_of
from persistence._types import Cluster, ClusterEvents, NodeRow, ProcedureRow, RecoveryWork, TimerRow

_NO_SYSTEM = part_log("cluster")  # a node made for no system in particular

# Seconds between heartbeats, and how old a heartbeat may get before its node is declared dead.
HEARTBEAT = 1.0
TTL = 10.0
# A node session's open transaction is ended by the server after this long idle (a frozen node's
# share lock on a lease row goes with it).
IDLE_IN_TRANSACTION = "5s"
# A claim or release waits this long for a lease row's lock, then tries again next round.
LOCK_TIMEOUT = "2s"
STATEMENT_TIMEOUT = "30s"
# A new node waits this long for the lock of a session that is ending (the previous process of the
# same node name, killed a moment ago).
JOIN_GRACE = 2.0
# How long wf nodes and system.nodes() list a node that left or died (seconds since its last
# heartbeat): then a node that joins forgets it.
GONE_NODES_KEPT = 7 * 86400.0
# NOTIFY payloads stay below the server's 8000 bytes.
NOTIFY_BYTES = 7_900

NODE_SETTINGS = {
    "idle_in_transaction_session_timeout": IDLE_IN_TRANSACTION,
    "statement_timeout": STATEMENT_TIMEOUT,
}


def channel(schema: str) -> str:
    """The NOTIFY channel of a schema's wake-ups."""
    return f"af_wake_{schema}"[:63]


@dataclasses.dataclass
class Round:
    """What one membership round changed for this node."""

    gained: dict[int, int] = dataclasses.field(default_factory=dict)  # shard -> epoch
    lost: set[int] = dataclasses.field(default_factory=set)  # leases found gone (fenced)
    release: set[int] = dataclasses.field(default_factory=set)  # leases to hand off
    dead: list[str] = dataclasses.field(default_factory=list)  # nodes declared dead
    rejoined: bool = False  # this node was declared dead or lost its session: new incarnation


class Membership:
    """One node's membership of the cluster on a schema, on a control connection of its own.

    The control connection holds the node's session advisory lock for as long as the node is a
    member; it runs the heartbeats, the probes of other nodes, the claims and the releases. Every
    method is called from one thread (the store's cluster thread) except ``owned``, ``epoch`` and
    ``owns_shard``, which any thread may call.
    """

    def __init__(
        self, conninfo: str, schema: str, path: str, node_id: str, *,
        heartbeat: float = HEARTBEAT, ttl: float = TTL, local_time: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(node_id, str) or not node_id or len(node_id) > 200:
            raise ValueError(f"node_id must be a non-empty string of at most 200 characters, got {node_id!r}")
        if not ttl > 2 * heartbeat > 0:
            raise ValueError(f"the heartbeat ttl ({ttl}s) must be more than twice the heartbeat ({heartbeat}s)")
        self.conninfo = conninfo
        self.schema = schema
        self.path = path
        self.node_id = node_id
        self.heartbeat_every = heartbeat
        self.ttl = ttl
        self._s = quote(schema)
        self.local_time = local_time
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._owned: dict[int, int] = {}
        # Shards handed off here whose lease row could not be given back yet (a lock timeout):
        # not written for, given back by the next round.
        self._releasing: set[int] = set()
        self.incarnation = ""
        self.shards = 0
        self.lock_key = 0
        # Database clock minus this process's (seconds), measured at every heartbeat.
        self.offset = 0.0
        self.last_heartbeat = 0.0  # monotonic time of the last heartbeat that succeeded
        # Other processes running a node at the last probe (the rows they append to inboxes reach
        # this node by wake-ups), and when that probe ran (database clock).
        self.peers = 0
        # Other nodes registered at the last probe, live or not: one declared dead may still
        # append to inboxes until it learns it, and one cut off from the database appends again
        # when it gets back, before it has rejoined. Not those that left, nor those whose process
        # is known to have ended (on this host, by its pid).
        self.others = 0
        self.probed_at: Any = None
        # Probes that found a peer: set after ``peers``, so that one who reads this and then
        # ``peers`` at zero knows no peer was seen since (``ClusterNode.alone_mark``).
        self.crowded = 0

    # -- what any thread may ask ----------------------------------------------------------------
    def owned(self) -> dict[int, int]:
        """The shards leased now, with their epochs."""
        with self._lock:
            return dict(self._owned)

    def epoch(self, shard: int) -> int | None:
        """The epoch of this node's lease of ``shard``, or None if it holds none."""
        with self._lock:
            return self._owned.get(shard)

    def owns_shard(self, shard: int) -> bool:
        with self._lock:
            return shard in self._owned

    def fenced(self, shard: int) -> Fenced:
        """The error of a write for ``shard`` this node holds no lease of (refused before SQL)."""
        return Fenced(
            f"fenced: shard {shard} is not leased by node {self.node_id!r} (incarnation "
            f"{self.incarnation}); nothing was written. The shard's owner goes on with its "
            f"workflows.", path=self.path, shard=shard, epoch=None,
        )

    # -- joining and leaving ------------------------------------------------------------------
    def _sql(self, template: str) -> str:
        return template.replace("{s}", self._s)

    def _exec(self, template: str, params: Any = None) -> list[tuple[Any, ...]]:
        conn = self._conn
        if conn is None or conn.closed:
            raise StorageUnavailable(f"node {self.node_id!r} has no connection to {self.path}", path=self.path)
        try:
            cur = conn.execute(self._sql(template), params)
            return list(cur.fetchall()) if cur.description is not None else []
        except psycopg.Error as exc:
            raise translate_error(exc, self.path, conn) from exc

    def join(self) -> None:
        """Take the node's lock and register a new incarnation (raises ``NodeIdInUse`` if a live
        process runs this node name)."""
        self.close()
        self._conn = connect(self.conninfo, self.path, autocommit=True, lock_timeout=LOCK_TIMEOUT,
                             **NODE_SETTINGS)
        try:
            self.shards = int(self._exec("SELECT value FROM {s}.meta WHERE key = 'shards'")[0][0])
            key = self._exec("SELECT hashtextextended(%s, 0)", (f"actorflow-node:{self.schema}:{self.node_id}",))
            self.lock_key = int(key[0][0])
            deadline = time.monotonic() + JOIN_GRACE
            while not self._exec("SELECT pg_try_advisory_lock(%s)", (self.lock_key,))[0][0]:
                if time.monotonic() >= deadline:
                    raise self._in_use()
                time.sleep(0.05)
            self.incarnation = str(uuid.uuid4())
            self._exec(
                "INSERT INTO {s}.af_nodes (node_id, incarnation, lock_key, state, heartbeat_at, "
                "started_at, pid, host, ttl) VALUES (%s, %s, %s, 'up', now(), now(), %s, %s, %s) "
                "ON CONFLICT (node_id) DO UPDATE SET incarnation = EXCLUDED.incarnation, "
                "lock_key = EXCLUDED.lock_key, state = 'up', heartbeat_at = now(), "
                "started_at = now(), probed_at = NULL, pid = EXCLUDED.pid, host = EXCLUDED.host, "
                "ttl = EXCLUDED.ttl",
                (self.node_id, self.incarnation, self.lock_key, os.getpid(), socket.gethostname(), self.ttl),
            )
            # The nodes gone for good a while ago (left, or declared dead) are forgotten, as a
            # node joins: each process start under a new name (the default, host and pid) adds
            # a row, which wf nodes listed, and each round probed, for ever.
            self._exec(
                "DELETE FROM {s}.af_nodes WHERE state IN ('left', 'dead') AND node_id != %s "
                "AND heartbeat_at < now() - make_interval(secs => %s)",
                (self.node_id, GONE_NODES_KEPT),
            )
            self._measure_offset()
            self.last_heartbeat = time.monotonic()
        except BaseException:
            self.close()
            raise

    def _in_use(self) -> NodeIdInUse:
        rows = self._exec(
            "SELECT pid, host, started_at::text FROM {s}.af_nodes WHERE node_id = %s", (self.node_id,)
        )
        pid, host, since = rows[0] if rows else (None, None, None)
        return NodeIdInUse(self.path, node_id=self.node_id, pid=pid, host=host, since=since)

    def _measure_offset(self) -> None:
        t0 = self.local_time()
        db_now = float(self._exec("SELECT extract(epoch FROM clock_timestamp())")[0][0])
        t1 = self.local_time()
        self.offset = db_now - (t0 + t1) / 2

    def drop_all(self) -> set[int]:
        """Forget every lease locally (self-fencing); return the shards that were held."""
        with self._lock:
            lost = set(self._owned)
            self._owned.clear()
            self._releasing.clear()
        return lost

    def leave(self) -> None:
        """Give every lease back (the others claim them at once) and leave the cluster."""
        held = self.drop_all()
        try:
            if held:
                self._release(held)
            self._exec("UPDATE {s}.af_nodes SET state = 'left' WHERE node_id = %s AND incarnation = %s",
                       (self.node_id, self.incarnation))
            self._exec("SELECT pg_notify(%s, 'rebalance')", (channel(self.schema),))
        finally:
            self.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            try:
                conn.execute("SELECT pg_advisory_unlock_all()")
            except psycopg.Error:
                pass
            conn.close()

    # -- a round ------------------------------------------------------------------------------
    def wait_seen(self) -> None:
        """Wait (a few heartbeats at most) until every other live node has probed the others'
        locks since this one joined: from then on they know they have a peer
        (``ClusterNode.alone``), and take the inbox rows this one appends in their order."""
        deadline = time.monotonic() + 4 * self.heartbeat_every
        while time.monotonic() < deadline:
            if not self._exec(
                "SELECT 1 FROM {s}.af_nodes o, {s}.af_nodes me WHERE me.node_id = %s AND "
                "o.node_id != me.node_id AND o.state = 'up' AND "
                "(o.probed_at IS NULL OR o.probed_at <= me.started_at) "
                "AND o.heartbeat_at >= now() - make_interval(secs => %s) LIMIT 1",
                (self.node_id, self.ttl),
            ):
                return
            time.sleep(self.heartbeat_every / 10)

    def heartbeat(self) -> bool:
        """Renew this node's heartbeat; False if it was declared dead meanwhile."""
        rows = self._exec(
            "UPDATE {s}.af_nodes SET heartbeat_at = now(), probed_at = coalesce(%s, probed_at) "
            "WHERE node_id = %s AND incarnation = %s AND state = 'up' RETURNING 1",
            (self.probed_at, self.node_id, self.incarnation),
        )
        if not rows:
            return False
        self._measure_offset()
        self.last_heartbeat = time.monotonic()
        return True

    def detect_dead(self) -> list[str]:
        """Declare dead every other node whose session is gone (its lock is free) or whose
        heartbeat is older than the ttl; return their names.

        Also counts the peers: the other nodes whose session lock is held, whatever their state
        (one declared dead by its heartbeat may still run, and append to inboxes, until it learns
        it). The probe's time is recorded by the next heartbeat (``probed_at``)."""
        rows = self._exec(
            "SELECT node_id, incarnation::text, lock_key, heartbeat_at < now() - make_interval(secs => %s), "
            "state, host, pid FROM {s}.af_nodes WHERE state != 'left' AND node_id != %s",
            (self.ttl, self.node_id),
        )
        started = self._exec("SELECT now()")[0][0]
        keys = [int(r[2]) for r in rows]
        # A lock is probed by taking it and giving it back in one statement: between two, a
        # process frozen (or stalled) would hold a dead node's lock, and that node's successor
        # could not join under its name until this one woke.
        free = {int(k) for k, got in self._exec(
            "SELECT k, CASE WHEN pg_try_advisory_lock(k) THEN pg_advisory_unlock(k) ELSE false END "
            "FROM unnest(%s::bigint[]) AS k", (keys,)
        ) if got} if keys else set()
        self.peers = sum(1 for r in rows if int(r[2]) not in free)
        self.others = sum(1 for r in rows if int(r[2]) not in free or not _gone(r[5], r[6]))
        if self.peers:
            self.crowded += 1
        self.probed_at = started
        dead = []
        for node_id, inc, key, stale, state, _host, _pid in rows:
            if state == "up" and (int(key) in free or stale):
                if self._exec(
                    "UPDATE {s}.af_nodes SET state = 'dead' WHERE node_id = %s AND incarnation = %s "
                    "AND state = 'up' RETURNING 1", (node_id, inc),
                ):
                    dead.append(node_id)
        return dead

    def live_nodes(self) -> list[str]:
        return [r[0] for r in self._exec(
            "SELECT node_id FROM {s}.af_nodes WHERE state = 'up' AND heartbeat_at >= now() - "
            "make_interval(secs => %s)", (self.ttl,),
        )]

    def rebalance(self) -> Round:
        """Claim the shards this node should hold that no live node leases; say which of those
        it holds it should hand off, and which leases it found gone."""
        result = Round()
        if self._releasing:
            self._release(set(self._releasing))
        live = self.live_nodes()
        if self.node_id not in live:
            live.append(self.node_id)
        want = sorted(assignment(self.shards, live)[self.node_id])
        if want:
            try:
                self._exec(
                    "UPDATE {s}.af_shards AS s SET owner = %s, epoch = s.epoch + 1, since = now() "
                    "WHERE s.shard IN (SELECT shard FROM {s}.af_shards WHERE shard = ANY(%s) "
                    "AND (owner IS NULL OR owner NOT IN (SELECT incarnation FROM {s}.af_nodes "
                    "WHERE state = 'up')) ORDER BY shard FOR UPDATE SKIP LOCKED) "
                    "AND (s.owner IS NULL OR s.owner NOT IN (SELECT incarnation FROM {s}.af_nodes "
                    "WHERE state = 'up'))",
                    (self.incarnation, want),
                )
            except PersistenceError as exc:
                if isinstance(exc, StorageUnavailable) and not isinstance(exc, Retryable):
                    raise
                # A fault the next round recovers from: it tries again.
        # The claim waits for no lock: a lease row locked now (a frozen owner's open transaction,
        # until the server ends it; a write share-locking the leases it routes to) is skipped and
        # claimed at a later round, so it neither holds up the other shards nor deadlocks.
        held = {int(s): int(e) for s, e in self._exec(
            "SELECT shard, epoch FROM {s}.af_shards WHERE owner = %s", (self.incarnation,)
        ) if int(s) not in self._releasing}
        with self._lock:
            for shard, epoch in held.items():
                if self._owned.get(shard) != epoch:
                    result.gained[shard] = epoch
            result.lost = {s for s in self._owned if held.get(s) != self._owned[s]}
            for s in result.lost:
                del self._owned[s]
            self._owned.update(result.gained)
            result.release = set(self._owned) - set(want)
        return result

    def stop_using(self, shards: Iterable[int]) -> None:
        """Take ``shards`` out of the leases this node writes for (the first half of a handoff:
        a write for them is refused from now on)."""
        with self._lock:
            for s in shards:
                self._owned.pop(s, None)

    def release(self, shards: Iterable[int]) -> None:
        """Hand ``shards`` off: they are no longer written for here (``stop_using``), and their
        leases go back, epoch + 1, for their new owner to claim. Waits for a step of this node
        still committing for one of them."""
        shards = set(shards)
        self.stop_using(shards)
        self._release(shards)

    def _release(self, shards: set[int]) -> None:
        with self._lock:
            self._releasing |= shards
        try:
            self._exec(
                "UPDATE {s}.af_shards SET owner = NULL, epoch = epoch + 1, since = now() "
                "WHERE shard = ANY(%s) AND owner = %s",
                (sorted(shards), self.incarnation),
            )
        except PersistenceError as exc:
            if isinstance(exc, StorageUnavailable) and not isinstance(exc, Retryable):
                raise
            return  # a lock timeout (a step still committing), a deadlock: the next round gives them back
        with self._lock:
            self._releasing -= shards
        self._exec("SELECT pg_notify(%s, 'rebalance')", (channel(self.schema),))

    # -- wake-ups -----------------------------------------------------------------------------
    def take_wakeups(self) -> list[str]:
        """Delete the wake-up rows of the shards leased here; return their workflow ids."""
        owned = sorted(self.owned())
        if not owned:
            return []
        rows = self._exec(
            "DELETE FROM {s}.af_wakeups WHERE shard = ANY(%s) RETURNING workflow_id", (owned,)
        )
        return list(dict.fromkeys(r[0] for r in rows))

    def notify(self, shards: Iterable[int]) -> None:
        """Tell the owners of ``shards`` that wake-ups are waiting (after the commit that wrote
        them; never inside a write transaction)."""
        payloads: list[str] = []
        text = ""
        for s in sorted(set(shards)):
            part = str(s)
            if text and len(text) + len(part) + 1 > NOTIFY_BYTES:
                payloads.append(text)
                text = ""
            text = f"{text},{part}" if text else part
        if text:
            payloads.append(text)
        if payloads:
            self._exec("SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p",
                       (channel(self.schema), payloads))

    # -- reads --------------------------------------------------------------------------------
    def nodes(self) -> list[NodeRow]:
        conn = self._conn
        if conn is None or conn.closed:
            raise StorageUnavailable(f"node {self.node_id!r} has no connection to {self.path}", path=self.path)
        try:
            return read_nodes(conn, self.schema)
        except psycopg.Error as exc:
            raise translate_error(exc, self.path, conn) from exc


def read_nodes(conn: psycopg.Connection[Any], schema: str) -> list[NodeRow]:
    """The nodes of ``schema`` on any connection (``wf nodes``, ``system.nodes()``)."""
    s = quote(schema)
    # A node still ``up`` whose heartbeat is older than its ttl shows as ``stale``: it may be
    # frozen, or killed with no other node left to declare it dead.
    rows = conn.execute(
        f"SELECT n.node_id, n.incarnation::text, CASE WHEN n.state = 'up' AND "
        f"n.heartbeat_at < now() - make_interval(secs => coalesce(n.ttl, {TTL})) "
        f"THEN 'stale' ELSE n.state END, "
        f"extract(epoch FROM now() - n.heartbeat_at), extract(epoch FROM n.started_at), n.pid, "
        f"n.host, (SELECT count(*) FROM {s}.af_shards s WHERE s.owner = n.incarnation) "
        f"FROM {s}.af_nodes n ORDER BY n.node_id"
    ).fetchall()
    return [NodeRow(r[0], r[1], r[2], float(r[3]), float(r[4]), r[5], r[6], int(r[7])) for r in rows]


# -- the node: its membership's thread, wake-ups, and what the store and the runtime ask ---------

# Running workflows of some shards with something to do now (``_store._WITH_WORK``, by shard).
_WITH_WORK = """
SELECT id FROM {s}.workflows WHERE status = 'running' AND fresh AND shard = ANY(%(shards)s)
UNION
SELECT i.workflow_id FROM {s}.inbox AS i JOIN {s}.workflows AS w ON w.id = i.workflow_id
  WHERE i.kind != 'signal' AND w.status = 'running' AND w.shard = ANY(%(shards)s)
UNION
SELECT i.workflow_id FROM {s}.inbox AS i
  JOIN {s}.waits AS a ON a.workflow_id = i.workflow_id AND a.name = i.name
  JOIN {s}.workflows AS w ON w.id = i.workflow_id
  WHERE i.kind = 'signal' AND w.status = 'running' AND w.shard = ANY(%(shards)s)
UNION
SELECT p.workflow_id FROM {s}.procedures AS p JOIN {s}.workflows AS w ON w.id = p.workflow_id
  WHERE p.status != 'pending' AND w.status = 'running' AND w.shard = ANY(%(shards)s)
"""
_PENDING = """
SELECT p.key, p.workflow_id, p.function, p.args, p.status, p.attempts, p.result, p.error,
  p.next_attempt_at FROM {s}.procedures AS p JOIN {s}.workflows AS w ON w.id = p.workflow_id
  WHERE p.status = 'pending' AND w.shard = ANY(%(shards)s) ORDER BY p.next_attempt_at
"""
_CANCELLING = """
SELECT DISTINCT i.workflow_id FROM {s}.inbox AS i JOIN {s}.workflows AS w ON w.id = i.workflow_id
  WHERE i.kind = 'cancel' AND w.shard = ANY(%(shards)s)
"""
_TIMERS_DUE = """
SELECT t.id, t.workflow_id, t.name, t.due_at FROM {s}.timers AS t
  JOIN {s}.workflows AS w ON w.id = t.workflow_id
  WHERE t.due_at < %s AND w.shard = ANY(%s) ORDER BY t.due_at, t.id LIMIT %s
"""
SHARD_CACHE = 100_000
# The wake-up poll, for a notification that was lost (the owner also polls at every round).
POLL = 1.0
# Notifications are coalesced for this long before they are sent (seconds).
COALESCE = 0.001
# A node waiting on another node's workflow (``result()``) says so ("wait:" notices, to every
# node); the node that finishes it then sends its end ("done:"), and no node sends the end of a
# workflow nobody elsewhere waits on. An interest is kept this long (seconds), and a waiter that
# still waits says it again after half of it. A node remembers what it finished this long, so
# that an interest that comes in just after the end is answered at once.
INTEREST_TTL = 60.0
RECENT_DONE = 5.0
# Bounds of those memories (entries; the oldest go first).
INTERESTS_MAX = 100_000

Reader = Callable[[Callable[[psycopg.Connection[Any]], Any]], Any]


class ClusterNode(Cluster):
    """A ``PgStore``'s node of a cluster: its membership, run by a thread of its own (a round
    every ``heartbeat`` seconds, and at once when another node joins or leaves), the wake-ups it
    takes for its shards (on a notification, or at every round), and the notifications it sends
    after commits (on a connection and thread of their own, coalesced, never inside a write).

    ``read`` runs a function on one of the store's reader connections.
    """

    def __init__(
        self, conninfo: str, schema: str, path: str, node_id: str, *, read: Reader,
        ttl: float = TTL, local_time: Callable[[], float] = time.time, log: Log | None = None,
    ) -> None:
        self.log = log if log is not None else _NO_SYSTEM  # its system's ``cluster`` logger
        self.membership = Membership(conninfo, schema, path, node_id, heartbeat=min(HEARTBEAT, ttl / 4),
                                     ttl=ttl, local_time=local_time)
        self.node_id = node_id
        self.shard_count = 0
        self.conninfo = conninfo
        self.schema = schema
        self.path = path
        self._s = quote(schema)
        self._read = read
        self._shards: dict[str, int] = {}
        self._shards_lock = threading.Lock()
        self._events: ClusterEvents | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listener: psycopg.Connection[Any] | None = None
        self._notifier: psycopg.Connection[Any] | None = None
        self._notify_cond = threading.Condition()
        self._want_wake = False
        self._want_done: list[str] = []
        self._want_interest: list[str] = []
        # Workflows another node waits on (id -> until when, monotonic), the ones this node said
        # it waits on (id -> when it said so), and the ones it finished lately (id -> when).
        self._interest: dict[str, float] = {}
        self._announced: dict[str, float] = {}
        self._recent_done: dict[str, float] = {}
        self._recent_news: dict[str, float] = {}
        self._interest_lock = threading.Lock()
        self._notify_thread: threading.Thread | None = None
        self._rejoin = False
        self.rounds = 0
        self.takeovers = 0  # nodes this one declared dead

    # -- lifecycle ----------------------------------------------------------------------------
    def open(self) -> None:
        """Join the cluster and claim this node's share of what is free (the recovery of the
        system that opens the store covers those); raises ``NodeIdInUse``."""
        self.membership.join()
        self.shard_count = self.membership.shards
        try:
            self._listen()
            self.membership.detect_dead()
            self.membership.heartbeat()
            self.membership.rebalance()
            self.membership.wait_seen()
        except BaseException:
            self.membership.close()
            raise

    def _listen(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(Exception):
                self._listener.close()
        self._listener = None
        conn = connect(self.conninfo, self.path, autocommit=True)
        try:
            conn.execute(f"LISTEN {quote(channel(self.schema))}")
        except psycopg.Error as exc:
            conn.close()
            raise translate_error(exc, self.path, conn) from exc
        self._listener = conn

    def start(self, events: ClusterEvents) -> None:
        self._events = events
        self._thread = threading.Thread(target=self._run, name=f"actorflow-node-{self.node_id}", daemon=True)
        self._notify_thread = threading.Thread(target=self._notify_loop, name="actorflow-notify", daemon=True)
        self._thread.start()
        self._notify_thread.start()

    def halt(self) -> None:
        """Stop the membership's thread (and the notifier's); the leases stay as they are."""
        self._stop.set()
        with self._notify_cond:
            self._notify_cond.notify_all()
        for t in (self._thread, self._notify_thread):
            if t is not None and t is not threading.current_thread():
                t.join(10)

    def leave(self) -> None:
        self.halt()
        try:
            self.membership.leave()
        except PersistenceError as exc:
            self.log.warning("cluster_handoff_failed", node_id=self.node_id, error=str(exc),
                        then="the others take its shards over once its session is gone")
        finally:
            self.close()

    def close(self) -> None:
        """Stop without handing off (a crash, as far as the others can tell, found at once by
        the session lock)."""
        self.halt()
        self.membership.close()
        for conn in (self._listener, self._notifier):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    # -- what the store and the runtime ask ---------------------------------------------------
    def owned_shards(self) -> set[int]:
        return set(self.membership.owned())

    def clock_offset(self) -> float:
        return self.membership.offset

    def nodes(self) -> list[NodeRow]:
        rows: list[NodeRow] = self._read(lambda conn: read_nodes(conn, self.schema))
        return rows

    def shard_for(self, workflow_id: str) -> int:
        """The shard of ``workflow_id``: from its row (cached), else its own id's."""
        with self._shards_lock:
            shard = self._shards.get(workflow_id)
        if shard is not None:
            return shard
        rows = self._read(lambda conn: conn.execute(
            f"SELECT shard FROM {self._s}.workflows WHERE id = %s", (workflow_id,)).fetchall())
        if not rows:
            return shard_of(workflow_id, self.shard_count)  # not cached: it may yet be a child
        shard = int(rows[0][0])
        self.note_shard(workflow_id, shard)
        return shard

    def note_shard(self, workflow_id: str, shard: int) -> None:
        with self._shards_lock:
            if len(self._shards) >= SHARD_CACHE:
                self._shards.clear()
            self._shards[workflow_id] = shard

    def owns(self, workflow_id: str) -> bool:
        return self.membership.owns_shard(self.shard_for(workflow_id))

    def owns_cached(self, workflow_id: str) -> bool | None:
        with self._shards_lock:
            shard = self._shards.get(workflow_id)
        return None if shard is None else self.membership.owns_shard(shard)

    def note_child(self, child_id: str, parent_id: str) -> None:
        with self._shards_lock:
            shard = self._shards.get(parent_id)
        if shard is not None:
            self.note_shard(child_id, shard)

    def alone(self) -> bool:
        # Not while another node is registered at all: its session's lock free says that it
        # cannot commit on that session, not that the process will not append on another one.
        m = self.membership
        return m.peers == 0 and m.others == 0

    def alone_mark(self) -> int | None:
        m = self.membership
        mark = m.crowded  # read before peers: see Membership.crowded
        if m.peers or time.monotonic() - m.last_heartbeat > 2 * m.heartbeat_every:
            return None  # another node is live, or this one has not looked lately
        return mark

    def owns_new(self, workflow_id: str) -> bool:
        return self.membership.owns_shard(self.own_shard(workflow_id))

    def settled(self) -> bool:
        def run(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute(self.membership._sql(
                "SELECT NOT EXISTS (SELECT 1 FROM {s}.af_wakeups) AND NOT EXISTS (SELECT 1 FROM "
                "{s}.af_shards s WHERE s.owner IS NULL OR s.owner NOT IN (SELECT incarnation FROM "
                "{s}.af_nodes WHERE state = 'up'))"
            )).fetchone()
            return bool(row and row[0])

        settled: bool = self._read(run)
        return settled

    def own_shard(self, workflow_id: str) -> int:
        """The shard of a root workflow of this id: its own id's (``af_place``)."""
        return shard_of(workflow_id, self.shard_count)

    def fence(self, workflow_id: str, shard: int | None = None) -> tuple[int, int, str]:
        """(shard, epoch, incarnation) for the fence of a write of ``workflow_id`` (in ``shard``
        if the caller knows it, else ``shard_for``'s); ``Fenced`` if this node holds no lease of
        that shard."""
        if shard is None:
            shard = self.shard_for(workflow_id)
        epoch = self.membership.epoch(shard)
        if epoch is None:
            raise self.membership.fenced(shard)
        return shard, epoch, self.membership.incarnation

    def timers_due(self, before: float, limit: int) -> list[TimerRow]:
        shards = sorted(self.owned_shards())
        if not shards:
            return []
        sql = _TIMERS_DUE.replace("{s}", self._s)
        rows = self._read(lambda conn: conn.execute(sql, (before, shards, limit)).fetchall())
        return [TimerRow(int(r[0]), r[1], r[2], float(r[3])) for r in rows]

    def recovery_work(self, shards: set[int]) -> RecoveryWork:
        params = {"shards": sorted(shards)}

        def run(conn: psycopg.Connection[Any]) -> RecoveryWork:
            def q(sql: str) -> list[tuple[Any, ...]]:
                return list(conn.execute(sql.replace("{s}", self._s), params).fetchall())

            return RecoveryWork(
                with_work=[r[0] for r in q(_WITH_WORK)],
                procedures=[ProcedureRow(r[0], r[1], r[2], r[3], r[4], int(r[5]), r[6], r[7], r[8])
                            for r in q(_PENDING)],
                cancelling={r[0] for r in q(_CANCELLING)},
            )

        work: RecoveryWork = self._read(run)
        return work

    # -- notifications (after commits, never inside one) --------------------------------------
    def publish_wake(self) -> None:
        with self._notify_cond:
            self._want_wake = True
            self._notify_cond.notify()

    def publish_done(self, workflow_ids: list[str]) -> None:
        """Tell the nodes that wait on these workflows that they finished (the others are told
        nothing: a node's ``result()`` said it waits, see ``publish_interest``)."""
        if self.alone():
            # No other node to tell (one that joins is seen before it has opened: ``wait_seen``).
            return
        now = time.monotonic()
        with self._interest_lock:
            wanted = [wid for wid in workflow_ids if self._interest.pop(wid, 0.0) > now]
            _bounded_put(self._recent_done, workflow_ids, now, now - RECENT_DONE)
        if wanted:
            with self._notify_cond:
                self._want_done.extend(wanted)
                self._notify_cond.notify()

    def publish_news(self, workflow_ids: list[str]) -> None:
        """Tell the nodes that wait on these workflows (``ref.published``, ``ref.ask``) that a
        step published or replied: a "done:" notice, as for an end, but the interest stays (more
        news may come), and the news is remembered a moment for an interest that comes late."""
        if self.alone():
            return
        now = time.monotonic()
        with self._interest_lock:
            wanted = [wid for wid in workflow_ids if self._interest.get(wid, 0.0) > now]
            _bounded_put(self._recent_news, workflow_ids, now, now - RECENT_DONE)
        if wanted:
            with self._notify_cond:
                self._want_done.extend(wanted)
                self._notify_cond.notify()

    def publish_interest(self, workflow_id: str) -> None:
        """Say that ``result()`` here waits on ``workflow_id``, which another node runs."""
        if self.alone():
            return
        now = time.monotonic()
        with self._interest_lock:
            if self._announced.get(workflow_id, -INTEREST_TTL) > now - INTEREST_TTL / 2:
                return  # said lately, and still kept by the others
            _bounded_put(self._announced, [workflow_id], now, now - INTEREST_TTL / 2)
        with self._notify_cond:
            self._want_interest.append(workflow_id)
            self._notify_cond.notify()

    def _interested(self, workflow_ids: list[str]) -> list[str]:
        """Record another node's interest in these workflows; those finished here lately are
        returned (their end is told at once)."""
        now = time.monotonic()
        with self._interest_lock:
            ended = [wid for wid in workflow_ids if self._recent_done.get(wid, -RECENT_DONE) > now - RECENT_DONE]
            _bounded_put(self._interest, [w for w in workflow_ids if w not in ended], now + INTEREST_TTL, now)
            news = [w for w in workflow_ids
                    if w not in ended and self._recent_news.get(w, -RECENT_DONE) > now - RECENT_DONE]
        return ended + news

    def _notify_loop(self) -> None:
        while not self._stop.is_set():
            with self._notify_cond:
                while not (self._want_wake or self._want_done or self._want_interest
                           or self._stop.is_set()):
                    self._notify_cond.wait()
            time.sleep(COALESCE)  # what the next commits bring goes in the same notification
            with self._notify_cond:
                wake, self._want_wake = self._want_wake, False
                done, self._want_done = self._want_done, []
                interest, self._want_interest = self._want_interest, []
            payloads = ["wake"] if wake else []
            for kind, ids in (("done", done), ("wait", interest)):
                text = ""
                for wid in dict.fromkeys(ids):
                    if text and len(text) + len(wid) + 1 > NOTIFY_BYTES:
                        payloads.append(text)
                        text = ""
                    text = f"{text}\n{wid}" if text else f"{kind}:{wid}"
                if text:
                    payloads.append(text)
            try:
                if self._notifier is None or self._notifier.closed:
                    # A notification is a hint (the owners poll, result() rereads): its
                    # transaction need not wait for the server's disk.
                    self._notifier = connect(self.conninfo, self.path, autocommit=True,
                                             synchronous_commit="off")
                self._notifier.execute("SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p",
                                       (channel(self.schema), payloads))
            except (psycopg.Error, PersistenceError):
                # A hint only: the owners poll their wake-ups, result() rereads the row.
                if self._notifier is not None:
                    with contextlib.suppress(Exception):
                        self._notifier.close()
                self._notifier = None

    # -- the membership's thread --------------------------------------------------------------
    def _run(self) -> None:
        next_round = 0.0
        next_poll = 0.0
        # An episode of failing rounds (the server away for minutes fails two rounds a second):
        # said at WARNING when it begins (and once for each other kind of error it meets), each
        # further failure at DEBUG, and its end once at INFO with how many rounds failed.
        failing_since: float | None = None
        failed_rounds = 0
        failing_kinds: set[str] = set()
        while not self._stop.is_set():
            rebalance, wake, done, waited = False, False, [], []
            try:
                timeout = max(0.0, min(next_round, next_poll) - time.monotonic())
                for payload in self._notifications(timeout):
                    if payload == "rebalance":
                        rebalance = True
                    elif payload.startswith("done:"):
                        done.extend(payload[5:].split("\n"))
                    elif payload.startswith("wait:"):
                        waited.extend(payload[5:].split("\n"))
                    else:
                        wake = True
                if waited:
                    ended = self._interested(waited)
                    if ended:
                        with self._notify_cond:
                            self._want_done.extend(ended)
                            self._notify_cond.notify()
                if self._stop.is_set():
                    return
                now = time.monotonic()
                if rebalance or now >= next_round:
                    self._round()
                    next_round = time.monotonic() + self.membership.heartbeat_every
                if wake or now >= next_poll:
                    ids = self.membership.take_wakeups() if not self._rejoin else []
                    next_poll = time.monotonic() + POLL
                    if ids and self._events is not None:
                        self._events.woken(ids)
                if done and self._events is not None:
                    self._events.finished_elsewhere(done)
                if failing_since is not None:  # this round passed (a failed one runs the next at once)
                    self.log.info("cluster_round_recovered", node_id=self.node_id,
                                  failed_rounds=failed_rounds,
                                  seconds=round(time.monotonic() - failing_since, 3))
                    failing_since, failed_rounds = None, 0
                    failing_kinds.clear()
            except Exception as exc:  # the thread outlives any round (a server that is away)
                if self._stop.is_set():
                    return  # the store is closing under this round
                failed_rounds += 1
                if failing_since is None:
                    failing_since = time.monotonic()
                if type(exc).__name__ not in failing_kinds:
                    failing_kinds.add(type(exc).__name__)
                    self.log.warning("cluster_round_failed", node_id=self.node_id, error=str(exc),
                                     retrying="every round, until one passes")
                else:
                    self.log.debug("cluster_round_failed", node_id=self.node_id, error=str(exc),
                                   failed_rounds=failed_rounds)
                if isinstance(exc, StorageUnavailable) and not self._rejoin:
                    self._self_fence("its control connection to the database was lost")
                self._stop.wait(min(self.membership.heartbeat_every, 0.5))
                next_round = 0.0

    def _notifications(self, timeout: float) -> list[str]:
        listener = self._listener
        if listener is None or listener.closed:
            try:
                self._listen()
            except PersistenceError:
                self._stop.wait(timeout)
                return []
            return ["wake", "rebalance"]  # what was sent while it was away is lost: look now
        try:
            got = [n.payload for n in listener.notifies(timeout=timeout, stop_after=1)]
            if got:
                got += [n.payload for n in listener.notifies(timeout=0.0)]
            return got
        except psycopg.Error:
            with contextlib.suppress(Exception):
                listener.close()
            self._listener = None
            return []

    def _round(self) -> None:
        m = self.membership
        events = self._events
        if self._rejoin:
            m.join()  # a new incarnation; raises while the server is away (the next round retries)
            self._rejoin = False
            self.log.warning("cluster_rejoined", node_id=self.node_id, incarnation=m.incarnation)
        # A lost control session (a lost connection, the server away or terminating it) raises
        # StorageUnavailable: its lock may be free and the others may take every shard, so the
        # node writes nothing more (``_run`` self-fences) and rejoins.
        # The probe first: the heartbeat then says when this node last looked (``wait_seen``).
        self.takeovers += len(m.detect_dead())
        alive = m.heartbeat()
        if not alive:
            self._self_fence("it was declared dead by another node (no heartbeat within the ttl)")
            return
        r = m.rebalance()
        self.rounds += 1
        if events is None:
            return
        if r.lost:
            events.shards_lost(r.lost)
        if r.release:
            m.stop_using(r.release)
            events.shards_lost(r.release)
            m.release(r.release)
        if r.gained:
            events.shards_gained(set(r.gained))

    def _self_fence(self, why: str) -> None:
        lost = self.membership.drop_all()
        self._rejoin = True
        self.log.warning("cluster_shards_given_up", node_id=self.node_id, given_up=len(lost), reason=why,
                    then="it rejoins as a new incarnation")
        if lost and self._events is not None:
            self._events.shards_lost(lost)


def _gone(host: str | None, pid: int | None) -> bool:
    """True if the node's process is known to have ended: it ran on this host, and no process
    has its pid now (a pid taken again since says nothing: the node counts as there)."""
    if host != socket.gethostname() or not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _bounded_put(memory: dict[str, float], keys: Iterable[str], value: float, stale: float) -> None:
    """Put ``keys`` in ``memory`` with ``value``; past ``INTERESTS_MAX`` entries, drop those whose
    value is below ``stale`` (all of them if that frees nothing)."""
    for key in keys:
        memory.pop(key, None)  # to the end: the dict stays in the order of the values put
        memory[key] = value
    if len(memory) > INTERESTS_MAX:
        for key in [k for k, v in memory.items() if v < stale]:
            del memory[key]
        if len(memory) > INTERESTS_MAX:
            memory.clear()
