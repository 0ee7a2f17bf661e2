"""A cluster's membership on PostgreSQL, against the real server: shards by a stable hash stored
in the row, leases by rendezvous hashing (a join or a leave moves only a fair share), dead nodes
found by their free session lock or their old heartbeat, and the fence: a write for a shard whose
lease moved commits nothing, even from a node frozen in the middle of its transaction."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from persistence import Fenced, NodeIdInUse
from persistence._pg import _schema
from persistence._pg._cluster import Membership, channel
from persistence._pg._errors import translate_error
from persistence._shards import DEFAULT_SHARDS, assignment, owner_of, shard_of
from tests.conftest import schema_of


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    s = schema_of(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        _schema.migrate(conn, s, "here")
    yield s


def member(pg_url: str, schema: str, node_id: str, **kw: Any) -> Membership:
    m = Membership(pg_url, schema, "here", node_id, heartbeat=kw.pop("heartbeat", 0.1),
                   ttl=kw.pop("ttl", 1.0), **kw)
    m.join()
    return m


def settle(*members: Membership) -> None:
    """Rounds until every shard is leased by the node that should hold it."""
    for _ in range(10):
        for m in members:
            m.heartbeat()
            m.detect_dead()
            r = m.rebalance()
            if r.release:
                m.release(r.release)
    for m in members:
        m.rebalance()


def test_the_shard_is_a_stable_hash_the_server_computes_the_same(pg_url: str, schema: str) -> None:
    ids = ["a", "order-17", "ünïcode-✓", "x" * 300, "", *(f"w{i}" for i in range(50))]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        got = [conn.execute(
            "SELECT ((('x' || substr(md5(%s), 1, 8))::bit(32)::bigint) %% %s)::integer",
            (i, DEFAULT_SHARDS),
        ).fetchone()[0] for i in ids]  # type: ignore[index]
    assert got == [shard_of(i, DEFAULT_SHARDS) for i in ids]
    assert shard_of("a", 256) == 185  # the same value in every process, every run (md5 0cc175b9...)


def test_the_row_holds_the_shard_a_child_shares_its_parents(pg_url: str, schema: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for wid, parent in (("root-1", None), ("child-1", "root-1")):
            conn.execute(
                f"INSERT INTO {schema}.workflows (id, type, status, parent_id, created_at, "
                f"updated_at) VALUES (%s, 't', 'running', %s, 0, 0)", (wid, parent),
            )
        shards = dict(conn.execute(f"SELECT id, shard FROM {schema}.workflows").fetchall())
    assert shards["root-1"] == shard_of("root-1", DEFAULT_SHARDS)
    assert shards["child-1"] == shards["root-1"] != shard_of("child-1", DEFAULT_SHARDS)


def test_rendezvous_moves_only_a_fair_share_on_join_and_leave() -> None:
    two = assignment(256, ["n1", "n2"])
    three = assignment(256, ["n1", "n2", "n3"])
    assert sorted(s for v in three.values() for s in v) == list(range(256))
    moved = {s for n in ("n1", "n2") for s in two[n] - three[n]}
    assert moved == three["n3"]  # only shards that the newcomer takes move
    assert 50 < len(three["n3"]) < 120  # about a third
    assert {s: owner_of(s, ["n2", "n1"]) for s in range(256)} == {
        s: owner_of(s, ["n1", "n2"]) for s in range(256)}  # the order of the list is irrelevant


def test_a_second_live_process_with_the_same_node_id_is_refused_naming_it(pg_url: str, schema: str) -> None:
    a = member(pg_url, schema, "game-1")
    try:
        with pytest.raises(NodeIdInUse, match="node_id 'game-1' is in use") as info:
            member(pg_url, schema, "game-1")
        assert info.value.node_id == "game-1"
        assert "another node_id" in str(info.value)
    finally:
        a.close()
    b = member(pg_url, schema, "game-1")  # once the first is gone, the name is free again
    assert b.incarnation != a.incarnation
    b.close()


def test_nodes_share_the_shards_and_a_killed_node_is_taken_over_at_once(pg_url: str, schema: str) -> None:
    a, b = member(pg_url, schema, "a"), member(pg_url, schema, "b")
    try:
        settle(a, b)
        share = assignment(DEFAULT_SHARDS, ["a", "b"])
        assert set(a.owned()) == share["a"] and set(b.owned()) == share["b"]
        epochs = b.owned()
        # b's session ends without a word (as when its process is killed): its lock is free.
        assert b._conn is not None
        b._conn.close()
        deadline = time.monotonic() + 10  # the server frees the lock once b's backend has exited
        while (dead := a.detect_dead()) == [] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert dead == ["b"]
        r = a.rebalance()
        assert set(r.gained) == share["b"]
        assert all(r.gained[s] == epochs[s] + 1 for s in share["b"])  # every lease: a new epoch
        assert len(a.owned()) == DEFAULT_SHARDS
        assert {n.node_id: (n.state, n.shards) for n in a.nodes()} == {
            "a": ("up", DEFAULT_SHARDS), "b": ("dead", 0)}
    finally:
        a.close()
        b.close()


def test_a_survivor_frozen_right_after_probing_a_dead_nodes_lock_does_not_keep_that_node_out(
    pg_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A survivor probes a dead node's session lock by taking it and giving it back. A survivor
    process frozen (SIGSTOP) right after its probe statement must not be left holding the lock:
    the dead node's successor, started under the same node_id, could not join for as long as the
    survivor stays frozen (NodeIdInUse naming a process that is dead)."""
    a, b = member(pg_url, schema, "a"), member(pg_url, schema, "b")
    try:
        settle(a, b)
        assert b._conn is not None
        b._conn.close()  # b's process is killed: its session ends, its lock is free
        frozen = threading.Event()
        thaw = threading.Event()
        run = Membership._exec

        def exec_then_freeze(self: Membership, template: str, params: Any = None) -> list[tuple[Any, ...]]:
            rows = run(self, template, params)
            if self is a and "pg_try_advisory_lock" in template and any(r[1] for r in rows):
                frozen.set()
                assert thaw.wait(30)  # b's lock was free: the process stops right after the probe
            return rows

        monkeypatch.setattr(Membership, "_exec", exec_then_freeze)
        deadline = time.monotonic() + 10
        found: list[str] = []

        def probe() -> None:
            while not found and time.monotonic() < deadline:
                found.extend(a.detect_dead())
                time.sleep(0.01)

        prober = threading.Thread(target=probe)
        prober.start()
        try:
            assert frozen.wait(10)
            monkeypatch.setattr(Membership, "_exec", run)
            c = member(pg_url, schema, "b")  # b's successor, while a is frozen
            assert c.incarnation != b.incarnation
            c.close()
        finally:
            thaw.set()
            prober.join(30)
    finally:
        a.close()
        b.close()


def test_a_lease_row_locked_by_a_frozen_transaction_holds_up_only_its_own_shard(pg_url: str, schema: str) -> None:
    """A survivor claims a dead node's shards at once, but for a lease row that an open
    transaction still share-locks (a frozen zombie's step, until the server ends it): that one
    is claimed at a later round, and the others are not held up waiting for it."""
    a, b = member(pg_url, schema, "a"), member(pg_url, schema, "b")
    try:
        settle(a, b)
        share = assignment(DEFAULT_SHARDS, ["a", "b"])
        held = min(share["b"])
        with psycopg.connect(pg_url) as frozen:
            frozen.execute(f"SELECT 1 FROM {schema}.af_shards WHERE shard = %s FOR SHARE", (held,))
            assert b._conn is not None
            b._conn.close()  # b is killed
            deadline = time.monotonic() + 10
            while a.detect_dead() != ["b"]:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            r = a.rebalance()
            assert set(r.gained) == share["b"] - {held}  # at once, but for the locked one
            frozen.rollback()  # the server ended the frozen transaction
        r = a.rebalance()
        assert set(r.gained) == {held}
        assert len(a.owned()) == DEFAULT_SHARDS
    finally:
        a.close()
        b.close()


def test_a_frozen_node_is_declared_dead_by_its_heartbeat_and_rejoins_as_a_new_incarnation(
    pg_url: str, schema: str
) -> None:
    a, b = member(pg_url, schema, "a"), member(pg_url, schema, "b")
    try:
        settle(a, b)
        time.sleep(1.2)  # b is frozen: no heartbeat past the ttl, its session still open
        a.heartbeat()
        assert a.detect_dead() == ["b"]
        a.rebalance()
        assert len(a.owned()) == DEFAULT_SHARDS
        assert b.heartbeat() is False  # b wakes up: it learns it was declared dead
        old = b.incarnation
        b.join()
        assert b.incarnation != old
        settle(a, b)
        assert set(b.owned()) == assignment(DEFAULT_SHARDS, ["a", "b"])["b"]
    finally:
        a.close()
        b.close()


def test_a_joining_node_takes_its_share_and_a_leaving_one_hands_its_share_off(
    pg_url: str, schema: str
) -> None:
    a = member(pg_url, schema, "a")
    b: Membership | None = None
    try:
        settle(a)
        assert len(a.owned()) == DEFAULT_SHARDS
        before = a.owned()
        b = member(pg_url, schema, "b")
        settle(a, b)
        share = assignment(DEFAULT_SHARDS, ["a", "b"])
        assert set(b.owned()) == share["b"]
        assert {s: e for s, e in a.owned().items()} == {s: before[s] for s in share["a"]}  # kept
        b.leave()
        settle(a)
        assert len(a.owned()) == DEFAULT_SHARDS
        assert [(n.node_id, n.state) for n in a.nodes()] == [("a", "up"), ("b", "left")]
    finally:
        a.close()
        if b is not None:
            b.close()


def _fence(conn: psycopg.Connection[Any], schema: str, m: Membership, shard: int, epoch: int) -> None:
    conn.execute(f"SELECT {schema}.af_fence(%s, %s, %s)", (shard, epoch, m.incarnation))


def test_the_fence_refuses_a_write_of_a_node_whose_lease_moved_even_frozen_mid_transaction(
    pg_url: str, schema: str
) -> None:
    a, b = member(pg_url, schema, "a"), member(pg_url, schema, "b")
    zombie = psycopg.connect(pg_url, autocommit=False,
                             options="-c idle_in_transaction_session_timeout=1500ms")
    try:
        settle(a, b)
        shard, epoch = sorted(b.owned().items())[0]
        # b's writer is in the middle of a step for the shard (fence taken), then b freezes.
        _fence(zombie, schema, b, shard, epoch)
        zombie.execute(f"INSERT INTO {schema}.history (workflow_id, at, event) VALUES ('w', 0, 'z')")
        time.sleep(1.2)
        a.heartbeat()
        assert a.detect_dead() == ["b"]
        started = time.monotonic()
        claimed = threading.Event()

        def claim() -> None:
            while shard not in a.owned():  # the claim waits for the zombie's share lock
                a.rebalance()
            claimed.set()

        t = threading.Thread(target=claim)
        t.start()
        t.join(10)
        assert claimed.is_set()
        # The server ended the zombie's open transaction (idle_in_transaction_session_timeout):
        # its write never committed, and the takeover went through after it.
        assert time.monotonic() - started >= 0.2
        assert a.owned()[shard] == epoch + 1
        with pytest.raises(psycopg.Error):
            zombie.commit()
        with psycopg.connect(pg_url, autocommit=True) as c:
            assert c.execute(f"SELECT count(*) FROM {schema}.history").fetchone() == (0,)
        # b, woken, tries its next step with its old lease: refused, nothing written.
        late = psycopg.connect(pg_url)
        try:
            with pytest.raises(psycopg.Error) as info:
                _fence(late, schema, b, shard, epoch)
            err = translate_error(info.value, "here", late)
            assert isinstance(err, Fenced) and err.shard == shard and err.epoch == epoch  # the one it held
            assert f"shard {shard} (epoch {epoch}) is no longer leased" in str(err)
        finally:
            late.close()
    finally:
        zombie.close()
        a.close()
        b.close()


def _handoff(pg_url: str, schema: str) -> tuple[Membership, Membership, int, int]:
    """b holds a shard that c, joining, should take: (b, c, that shard, b's epoch of it)."""
    b = member(pg_url, schema, "b")
    settle(b)
    c = member(pg_url, schema, "c")
    r = b.rebalance()
    assert r.release == assignment(DEFAULT_SHARDS, ["b", "c"])["c"]
    shard = min(r.release)
    return b, c, shard, b.owned()[shard]


def test_a_handoff_waits_for_a_step_in_flight_and_the_next_step_is_fenced(pg_url: str, schema: str) -> None:
    b, c, shard, epoch = _handoff(pg_url, schema)
    step = psycopg.connect(pg_url)
    try:
        _fence(step, schema, b, shard, epoch)
        committer = threading.Timer(0.3, step.commit)
        committer.start()
        b.release({shard})  # waits until the step commits (a thread commits it in 0.3 s)
        committer.join()
        assert shard not in b.owned()
        with pytest.raises(psycopg.Error):
            _fence(step, schema, b, shard, epoch)
        step.rollback()
        c.rebalance()
        assert c.owned()[shard] == epoch + 2  # released (+1), then claimed (+1)
    finally:
        step.close()
        b.close()
        c.close()


def test_a_release_that_times_out_waiting_is_given_back_by_a_later_round(pg_url: str, schema: str) -> None:
    b, c, shard, epoch = _handoff(pg_url, schema)
    step = psycopg.connect(pg_url)
    try:
        _fence(step, schema, b, shard, epoch)
        b.release({shard})  # the step holds on past the lock timeout: not given back yet
        assert shard not in b.owned()  # ... but never written for again
        c.rebalance()
        assert shard not in c.owned()
        step.commit()
        c.heartbeat()  # (the lock timeout took longer than c's ttl)
        r = b.rebalance()
        assert shard not in r.gained and shard not in b.owned()
        c.rebalance()
        assert c.owned()[shard] == epoch + 2
    finally:
        step.close()
        b.close()
        c.close()


def test_an_inbox_row_for_another_nodes_shard_leaves_a_wakeup_for_its_owner(pg_url: str, schema: str) -> None:
    a, b = member(pg_url, schema, "a"), member(pg_url, schema, "b")
    listener = psycopg.connect(pg_url, autocommit=True)
    try:
        settle(a, b)
        listener.execute(f"LISTEN {channel(schema)}")
        wid = next(f"w{i}" for i in range(1000) if shard_of(f"w{i}", DEFAULT_SHARDS) in b.owned())
        mine = next(f"m{i}" for i in range(1000) if shard_of(f"m{i}", DEFAULT_SHARDS) in a.owned())
        with psycopg.connect(pg_url) as conn:
            for w in (wid, mine):
                conn.execute(f"INSERT INTO {schema}.workflows (id, type, status, created_at, "
                             f"updated_at) VALUES (%s, 't', 'running', 0, 0)", (w,))
            conn.commit()
            assert sorted(b.take_wakeups()) == [wid]  # a start handed to its owner
            assert sorted(a.take_wakeups()) == [mine]
            # a's writer (its fence names its incarnation) signals both: only b gets a wake-up.
            _fence(conn, schema, a, shard_of(mine, DEFAULT_SHARDS), a.owned()[shard_of(mine, DEFAULT_SHARDS)])
            for w in (wid, mine):
                conn.execute(f"INSERT INTO {schema}.inbox (workflow_id, kind, name, payload, "
                             f"created_at) VALUES (%s, 'signal', 'go', ''::bytea, 0)", (w,))
            conn.commit()
        assert a.take_wakeups() == []
        assert b.take_wakeups() == [wid]
        assert b.take_wakeups() == []  # taken once
        a.notify([shard_of(wid, DEFAULT_SHARDS)])
        got = [n.payload for n in listener.notifies(timeout=2.0, stop_after=1)]
        assert got == [str(shard_of(wid, DEFAULT_SHARDS))]
    finally:
        listener.close()
        a.close()
        b.close()


def test_a_claim_and_a_write_share_locking_leases_in_another_order_cannot_deadlock(pg_url: str, schema: str) -> None:
    """A node's claim locks the free shards in order while a write transaction share-locks the
    shards it routes to in its own order. The claim waits for no lock (it skips a row locked now),
    so the two cannot deadlock: in a node's first round, inside ``ActorSystem()``, the claim takes
    every other shard at once, the write goes on, and the next round claims the skipped shard."""
    a = member(pg_url, schema, "a")
    writer = psycopg.connect(pg_url, autocommit=False)
    try:
        writer.execute(f"SELECT 1 FROM {schema}.af_shards WHERE shard = 200 FOR SHARE")
        a.heartbeat()
        a.rebalance()
        assert set(a.owned()) == set(range(DEFAULT_SHARDS)) - {200}
        writer.execute("SET lock_timeout = '5s'")
        writer.execute(f"SELECT 1 FROM {schema}.af_shards WHERE shard = 5 FOR SHARE")  # not blocked
        writer.rollback()
        a.rebalance()
        assert set(a.owned()) == set(range(DEFAULT_SHARDS))
    finally:
        writer.close()
        a.close()


def test_the_end_of_a_workflow_goes_to_the_nodes_that_said_they_wait_even_just_after_it() -> None:
    """A node sends the end of a workflow only if another node said it waits on it; an interest
    that comes in just after the end (the waiter read the row before the end committed, the
    interest arrived after it) is answered at once, so that no waiter is left to its poll."""
    from persistence._pg._cluster import ClusterNode

    node = ClusterNode("postgresql:///none", "s", "here", "a", read=lambda fn: None)
    node.membership.peers = 1  # not alone: another node may wait
    node.publish_done(["nobody-waits"])
    assert node._want_done == []
    assert node._interested(["waited-on"]) == []  # before its end: kept
    node.publish_done(["waited-on"])
    assert node._want_done == ["waited-on"]
    assert node._interested(["nobody-waits"]) == ["nobody-waits"]  # after its end: told at once
    node.publish_done(["waited-on"])  # an interest is answered once
    assert node._want_done == ["waited-on"]


def test_rounds_failing_for_a_long_outage_are_said_once_and_their_end_once(pg_url: str, schema: str) -> None:
    """A server away for minutes fails the node's round twice a second: one WARNING
    ``cluster_round_failed`` when it begins (the others at DEBUG), and one INFO
    ``cluster_round_recovered`` with how many rounds failed once a round passes again."""
    from structlog.testing import capture_logs

    from persistence import StorageUnavailable
    from persistence._pg._cluster import ClusterNode

    node = ClusterNode(pg_url, schema, "here", "n1", read=lambda f: None, ttl=0.4)  # type: ignore[arg-type,return-value]
    node.open()
    real = node.membership.detect_dead
    failures = 0
    failed_enough = threading.Event()
    go_on = threading.Event()

    def detect_dead() -> Any:
        nonlocal failures
        if not go_on.is_set():
            failures += 1
            if failures == 12:
                failed_enough.set()
            raise StorageUnavailable("the server is away", path="here")
        return real()

    node.membership.detect_dead = detect_dead  # type: ignore[method-assign]
    with capture_logs() as logs:
        node.start(None)  # type: ignore[arg-type]
        try:
            assert failed_enough.wait(30), "the rounds stopped trying"
            go_on.set()
            deadline = time.monotonic() + 30
            while not any(e["event"] == "cluster_round_recovered" for e in logs):
                assert time.monotonic() < deadline, "no round passed after the outage"
                node._stop.wait(0.05)
        finally:
            node.halt()
            node.membership.close()
    said = [(e["event"], e["log_level"]) for e in logs if e["event"].startswith("cluster_round")]
    assert said.count(("cluster_round_failed", "warning")) == 1, said
    recovered = [e for e in logs if e["event"] == "cluster_round_recovered"]
    assert len(recovered) == 1 and recovered[0]["log_level"] == "info"
    assert recovered[0]["failed_rounds"] >= 12


def test_nodes_gone_for_a_week_are_forgotten_when_a_node_joins(pg_url: str, schema: str) -> None:
    """Each process start under a new node name (the default: host and pid) adds a node; those
    that left or died more than a week ago are forgotten as a node joins, the others kept."""
    a = member(pg_url, schema, "a")
    b = member(pg_url, schema, "b")
    b.leave()
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for node_id, state, age in (("old-left", "left", "8 days"), ("old-dead", "dead", "8 days"),
                                        ("recent-dead", "dead", "6 days")):
                conn.execute(
                    f"INSERT INTO {schema}.af_nodes (node_id, incarnation, lock_key, state, heartbeat_at, "
                    f"started_at, pid, host, ttl) VALUES (%s, gen_random_uuid(), 1, %s, now() - %s::interval, "
                    f"now() - %s::interval, 1, 'gone', 1.0)", (node_id, state, age, age),
                )
        assert len(a.nodes()) == 5
        c = member(pg_url, schema, "c")
        try:
            assert [(n.node_id, n.state) for n in c.nodes()] == [
                ("a", "up"), ("b", "left"), ("c", "up"), ("recent-dead", "dead")
            ]
        finally:
            c.close()
    finally:
        a.close()
        b.close()
