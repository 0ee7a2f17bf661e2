"""A cluster of nodes on one PostgreSQL schema, in one process (``actors.testing.Cluster``): each
workflow runs on the one node that leases its shard, and every call works from any node; a node
that joins takes its share, one that leaves hands its share off, one that crashes has its
workflows resumed by the others; a step of a node that lost its lease commits nothing."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from structlog.testing import capture_logs

from actors import ActorSystem, Status
from actors.testing import Cluster, VirtualClock
from persistence import NodeIdInUse
from persistence._pg._cluster import Membership, Round
from persistence._pg._schema import parse_url
from tests.conftest import schema_of
from workflows import Cancelled

from . import flows
from .runtime_support import Inside, reader

T = 30  # every wait in these tests is bounded


@pytest.fixture(autouse=True)
def fresh_flows() -> None:
    with flows.CALLS_LOCK:
        flows.CALLS.clear()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def cluster(pg_store_url: str, clock: VirtualClock) -> Iterator[Cluster]:
    with Cluster(pg_store_url, 3, clock=clock) as c:
        yield c


def on(cluster: Cluster, node: str, prefix: str) -> str:
    """A new workflow id whose shard ``node`` leases."""
    return next(f"{prefix}-{i}" for i in range(10_000) if cluster.owner(f"{prefix}-{i}") == node)


def test_every_call_works_from_any_node_for_a_workflow_another_node_runs(cluster: Cluster) -> None:
    n1, n2, n3 = cluster["node-1"], cluster["node-2"], cluster["node-3"]
    wid = on(cluster, "node-2", "collect")
    ref = n1.start(flows.collect, 3, id=wid)  # started through node-1, run by node-2
    cluster.idle(T)
    assert cluster.owner(wid) == "node-2"
    assert n2.live_actors() >= 1 and n1.live_actors() == 0
    n1.get(wid).signal("item", "a")
    n3.get(wid).signal("item", "b")
    n2.get(wid).signal("item", "c")
    assert n3.get(wid).result(timeout=T) == ["a", "b", "c"]
    assert ref.status() is Status.COMPLETED

    quest = [n.start(flows.quester, "wolf", id=on(cluster, name, "quest"))
             for name, n in (("node-1", n1), ("node-2", n2), ("node-3", n3))]
    cluster.idle(T)
    assert n3.broadcast("killed", "wolf", 1) == 3
    assert n1.broadcast("killed", "wolf", 2) == 3
    assert [n2.get(q.id).result(timeout=T) for q in quest] == [[1, 2]] * 3

    waiting = n1.start(flows.waits_once, id=on(cluster, "node-3", "cancel"))
    cluster.idle(T)
    n2.get(waiting.id).cancel("stop")
    cluster.idle(T)
    assert n1.get(waiting.id).status() is Status.CANCELLED
    assert {i.id for i in n1.workflows()} == {i.id for i in n3.workflows()}  # one database


def test_a_child_runs_on_its_parents_node_and_its_result_reaches_the_parent(cluster: Cluster, clock: VirtualClock) -> None:
    wid = on(cluster, "node-3", "parent")
    ref = cluster["node-1"].start(flows.parent, [1, 2, 3], id=wid)
    for _ in range(3):
        cluster.idle(T)
        clock.advance(1)
    cluster.idle(T)
    assert ref.result(timeout=T) == 60
    children = [i.id for i in cluster["node-2"].workflows() if i.parent_id == wid]
    assert len(children) == 3 and {cluster.owner(c) for c in children} == {"node-3"}


def test_spread_children_run_on_the_nodes_of_their_own_shards(cluster: Cluster, clock: VirtualClock) -> None:
    wid = on(cluster, "node-1", "spread")
    ref = cluster["node-2"].start(flows.fan_out_spread, list(range(12)), id=wid)
    cluster.idle(T)
    children = [i.id for i in cluster["node-3"].workflows() if i.parent_id == wid]
    assert len(children) == 12
    owners = {cluster.owner(c) for c in children}
    assert len(owners) >= 2  # twelve ids over three nodes' shards
    clock.advance(1)
    cluster.idle(T)
    assert ref.result(timeout=T) == [v * 10 for v in range(12)]
    with pytest.raises(ValueError, match="placement= must be one of 'parent', 'spread'"):
        from workflows import spawn

        spawn(flows.child, 1, 1, placement="everywhere")  # type: ignore[arg-type]


def test_a_joining_node_takes_its_share_and_nothing_is_lost(cluster: Cluster) -> None:
    n1 = cluster["node-1"]
    refs = [n1.start(flows.counter, 2, id=f"count-{i}") for i in range(30)]
    cluster.idle(T)
    for r in refs:
        cluster["node-2"].get(r.id).signal("inc", 1)
    cluster.add("node-4")
    cluster.settle(T)
    held = {n.node_id: n.shards for n in n1.nodes()}
    assert set(held) == {"node-1", "node-2", "node-3", "node-4"} and sum(held.values()) == 256
    moved = [r.id for r in refs if cluster.owner(r.id) == "node-4"]
    assert moved  # about a quarter of them
    for r in refs:
        cluster["node-3"].get(r.id).signal("inc", 10)
    cluster.idle(T)
    assert [cluster["node-4"].get(r.id).result(timeout=T) for r in refs] == [11] * 30


def test_a_leaving_node_hands_its_share_off_first(cluster: Cluster, clock: VirtualClock) -> None:
    wid = on(cluster, "node-2", "sleep")
    ref = cluster["node-2"].start(flows.sleeper, 60, id=wid)
    adder = cluster["node-2"].start(flows.adder, 5, id=on(cluster, "node-2", "add"))
    cluster.idle(T)
    assert adder.result(timeout=T) == 20
    cluster.remove("node-2")  # its shards go to the others at once, not after a ttl
    cluster.settle(T)
    assert cluster.owner(wid) in ("node-1", "node-3")
    clock.advance(60)
    cluster.idle(T)
    assert cluster["node-1"].get(wid).result(timeout=T) == 60
    assert ref.id == wid


def test_a_crashed_nodes_workflows_resume_on_the_others(cluster: Cluster, clock: VirtualClock) -> None:
    sleeper = on(cluster, "node-1", "sleep")
    collector = on(cluster, "node-1", "collect")
    cluster["node-1"].start(flows.sleeper, 30, id=sleeper)
    cluster["node-1"].start(flows.collect, 2, id=collector)
    cluster["node-2"].get(collector).signal("item", 1)
    cluster.idle(T)
    cluster.crash("node-1")
    clock.advance(30)  # the timer fell due while its node was gone
    cluster["node-3"].get(collector).signal("item", 2)  # durable before anyone takes it
    cluster.idle(T)
    assert cluster.owner(sleeper) in ("node-2", "node-3")
    assert cluster["node-2"].get(sleeper).result(timeout=T) == 30
    assert cluster["node-3"].get(collector).result(timeout=T) == [1, 2]
    assert [n.node_id for n in cluster["node-2"].nodes()] == ["node-2", "node-3"]


def test_a_step_of_a_node_that_lost_its_lease_commits_nothing(pg_store_url: str, cluster: Cluster) -> None:
    n1 = cluster["node-1"]
    wid = on(cluster, "node-1", "fenced")
    n1.start(flows.counter, 2, id=wid)
    cluster.idle(T)
    # node-1 freezes (its membership thread stops) and the others declare it dead.
    frozen = Inside(n1)
    frozen.halt_node()
    with psycopg.connect(parse_url(pg_store_url)[0], autocommit=True) as conn:
        conn.execute(f"UPDATE {schema_of(pg_store_url)}.af_nodes SET state = 'dead' WHERE node_id = 'node-1'")
    deadline = time.monotonic() + T
    while not any(Inside(s).believes_it_owns(wid) for n, s in cluster.nodes.items() if n != "node-1"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # node-1 still believes it leases the shard: its step is refused by the fence in the
    # database, and the signal waits in the inbox for the new owner.
    assert frozen.believes_it_owns(wid)
    with capture_logs() as logs:
        n1.get(wid).signal("inc", 5)
        n1.idle(T)
    fenced = [e for e in logs if e["event"] == "step_fenced"]
    assert len(fenced) == 1
    # Every event of a node's threads names the node and how many shards it holds.
    assert fenced[0]["node_id"] == "node-1" and isinstance(fenced[0]["shards"], int)
    cluster.crash("node-1")
    cluster.idle(T)
    owner = cluster[cluster.owner(wid) or ""]
    owner.get(wid).signal("inc", 7)
    assert owner.get(wid).result(timeout=T) == 12  # the 5 counted once, by the new owner


def test_a_timer_that_fell_due_while_its_node_did_not_run_it_fires_when_the_node_takes_it_over(
        cluster: Cluster, clock: VirtualClock) -> None:
    """A node fires the timers it loaded when they fall due; one of a workflow it no longer runs
    goes nowhere and stays in the store. When the node takes the shard over again, the timer fires
    (it was once skipped there for ever, and the workflow waited on a timer long past due)."""
    n1 = cluster["node-1"]
    wid = on(cluster, "node-1", "sleep")
    ref = n1.start(flows.sleeper, 30, id=wid)
    cluster.idle(T)
    inside = Inside(n1)
    inside.disown(lambda _wid: False)  # as between a lease lost and taken again
    clock.advance(30)
    n1.idle(T)  # the timer fell due here and went nowhere
    assert ref.status() is Status.RUNNING
    inside.own_again()
    inside.take_over(wid)
    cluster.idle(T)
    assert ref.result(timeout=T) == 30


def test_a_node_is_alone_only_once_the_others_left_not_while_one_that_died_may_come_back(pg_store_url: str) -> None:
    """A node whose session ended (crashed, frozen, cut off from the database) may still append
    to inboxes when it is back, before it has rejoined: the others do not take themselves to be
    alone, so they read what it appended before they take a signal (arrival order). A node that
    left is gone for good."""
    with Cluster(pg_store_url, 3) as cluster:
        survivor = Inside(cluster["node-1"])
        assert not survivor.believes_alone()
        cluster.crash("node-2")
        cluster.remove("node-3")  # left
        deadline = time.monotonic() + T
        while cluster["node-1"].nodes() and len(cluster["node-1"].nodes()) > 1:
            assert time.monotonic() < deadline, "node-2 was not declared dead"
            time.sleep(0.05)
        cluster.settle(T)
        assert not survivor.believes_alone()  # node-2 is dead, not gone: its process runs here
    with Cluster(pg_store_url, 2) as cluster:
        survivor = Inside(cluster["node-1"])
        cluster.remove("node-2")
        deadline = time.monotonic() + T
        while not survivor.believes_alone():  # at its next round
            assert time.monotonic() < deadline, "a node that left still counts"
            time.sleep(0.05)


def test_nodes_are_listed_and_a_second_live_node_of_one_name_is_refused(
    pg_store_url: str, cluster: Cluster, clock: VirtualClock
) -> None:
    nodes = cluster["node-2"].nodes()
    assert [n.node_id for n in nodes] == ["node-1", "node-2", "node-3"]
    assert sum(n.shards for n in nodes) == 256
    assert all(0 <= n.heartbeat_age < 10 and n.started_at > 0 for n in nodes)
    with pytest.raises(NodeIdInUse, match="node_id 'node-2' is in use"):
        ActorSystem(pg_store_url, clock=clock, node_id="node-2")


def test_timers_fire_by_the_databases_clock_on_a_node_whose_clock_is_off(pg_store_url: str) -> None:
    """A timer armed on a node with a right clock and fired by one whose clock is 5 s ahead
    does not fire early: both run by the database's clock."""
    with Cluster(pg_store_url, 1, clock=None) as cluster:  # real time, anchored
        wid = on(cluster, "node-1", "sleep")
        ref = cluster["node-1"].start(flows.sleeper, 2.0, id=wid)
        cluster.idle(T)
        with reader(pg_store_url) as r:
            timer = r.timers(wid)[0]
        cluster.add("ahead", local_time=lambda: time.time() + 5.0)
        cluster.remove("node-1")  # the workflow moves to the node whose clock is ahead
        cluster.settle(T)
        assert cluster.owner(wid) == "ahead"
        assert cluster["ahead"].get(ref.id).result(timeout=T) >= 2.0 - 0.05
        with psycopg.connect(parse_url(pg_store_url)[0], autocommit=True) as conn:
            fired = conn.execute(
                f"SELECT updated_at FROM {schema_of(pg_store_url)}.workflows WHERE id = %s", (wid,)
            ).fetchone()
            db_now = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
        assert fired is not None and db_now is not None
        assert fired[0] >= timer.due_at  # the step that took the timer ran at or after its time
        assert fired[0] <= float(db_now[0]) + 0.5  # and by the database's clock, not 5 s ahead


def test_wf_nodes_lists_the_nodes_and_a_sqlite_file_no_system_owns_has_none(
    pg_store_url: str, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from actors.cli import main

    assert main(["nodes", "--db", pg_store_url, "--json"]) == 0
    nodes = json.loads(capsys.readouterr().out)
    assert [(n["node_id"], n["state"]) for n in nodes] == [("node-1", "up"), ("node-2", "up"), ("node-3", "up")]
    assert sum(n["shards"] for n in nodes) == 256
    cluster.remove("node-3")
    cluster.settle(T)
    assert main(["nodes", "--db", pg_store_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["NODE", "STATE", "SHARDS"]
    assert [line.split()[:2] for line in lines[1:]] == [["node-1", "up"], ["node-2", "up"], ["node-3", "left"]]
    with ActorSystem(str(tmp_path / "one.db")):
        pass
    assert main(["nodes", "--db", str(tmp_path / "one.db")]) == 0
    assert "no system has this SQLite file open now" in capsys.readouterr().out


def test_a_database_away_for_a_while_loses_nothing_and_the_nodes_rejoin(clock: VirtualClock) -> None:
    """The server stops under a running cluster: the nodes commit nothing meanwhile, then rejoin
    as new incarnations once it is back, and every acknowledged signal is consumed once."""
    from tests.pgserver import FAST, PgServer, PgUnavailable

    try:
        server = PgServer.start(FAST)
    except PgUnavailable as exc:
        from tests.conftest import pg_unavailable

        pg_unavailable(str(exc))
    try:
        with server.schema() as url, Cluster(f"{url}&schema={schema_of(url)}", 2, clock=clock) as cluster:
            ids = [on(cluster, "node-1", "away"), on(cluster, "node-2", "away")]
            refs = [cluster["node-1"].start(flows.collect, 2, id=w) for w in ids]
            for w in ids:
                cluster["node-2"].get(w).signal("item", "before")
            cluster.idle(T)
            before = {n: Inside(s).incarnation() for n, s in cluster.nodes.items()}
            with capture_logs() as logs:
                server.pause()
                time.sleep(1.5)  # the nodes' rounds fail: they give their shards up
                assert all(not Inside(s).owned_shards() for s in cluster)
                server.resume()
                cluster.settle(60)
            # Told as the runtime's events, each naming the node it happened to.
            for event in ("cluster_shards_given_up", "cluster_rejoined"):
                assert {e.get("node_id") for e in logs if e["event"] == event} == {"node-1", "node-2"}, event
            # (its end told once, at INFO: cluster_round_recovered; a round failing again as the
            # one before did, at DEBUG, however many rounds the outage lasts)
            told = {"cluster_round_recovered": ("info",), "cluster_round_failed": ("warning", "debug")}
            assert all(e["log_level"] in told.get(e["event"], ("warning",))
                       for e in logs if e["event"].startswith("cluster_")), logs
            for node in ("node-1", "node-2"):
                failed = [e["log_level"] for e in logs
                          if e["event"] == "cluster_round_failed" and e.get("node_id") == node]
                assert failed[:1] == ["warning"], failed
            after = {n: Inside(s).incarnation() for n, s in cluster.nodes.items()}
            assert all(after[n] != before[n] for n in before)  # each rejoined as a new incarnation
            for w in ids:
                cluster["node-1"].get(w).signal("item", "after")
            cluster.idle(T)
            assert [r.result(timeout=T) for r in refs] == [["before", "after"]] * 2
    finally:
        server.stop()


def test_wf_requests_are_carried_out_by_the_node_that_runs_the_workflow(pg_store_url: str, cluster: Cluster) -> None:
    from actors.cli import main

    wid = on(cluster, "node-3", "cli")
    ref = cluster["node-1"].start(flows.collect, 2, id=wid)
    cluster.idle(T)
    assert main(["signal", wid, "item", '"one"', "--db", pg_store_url]) == 0
    assert main(["signal", wid, "item", '"two"', "--db", pg_store_url]) == 0
    assert ref.result(timeout=T) == ["one", "two"]
    other = cluster["node-2"].start(flows.waits_once, id=on(cluster, "node-1", "cli"))
    cluster.idle(T)
    assert main(["cancel", other.id, "--db", pg_store_url]) == 0
    with pytest.raises(Cancelled):
        other.result(timeout=T)
    assert other.status() is Status.CANCELLED


def test_debug_fire_timer_of_a_workflow_another_node_runs(cluster: Cluster) -> None:
    wid = on(cluster, "node-2", "fire")
    ref = cluster["node-1"].start(flows.sleeper, 3600, id=wid)
    cluster.idle(T)
    cluster["node-3"].get(wid).debug_fire_timer("wake", timeout=T)  # returns once it is fired
    assert ref.result(timeout=T) == 0.0  # fired now, on the virtual clock, by node-2


def test_every_event_names_the_node_whose_system_logged_it_on_any_thread(cluster: Cluster, clock: VirtualClock) -> None:
    """Events logged on a caller's thread (not a node's own) name the node that was called: with
    several nodes in one process no thread tells which one it is."""
    n2, n3 = cluster["node-2"], cluster["node-3"]
    owners = {on(cluster, node, f"nap-{node}"): node for node in ("node-1", "node-2", "node-3")}
    ids = list(owners)
    with capture_logs() as logs:
        refs = n2.start_many(flows.sleeper, [(5,)] * 3, ids=ids)  # on this thread, for node-2
        asyncio.run(n3.start_async(flows.sleeper, 5, id=on(cluster, "node-1", "anap")))  # an executor's thread
        cluster.idle(T)
        clock.advance(5)
        cluster.idle(T)
        assert [r.result(timeout=T) for r in refs] == [5, 5, 5]
        n3.prune(older_than=0)  # on this thread, for node-3
        cluster.remove("node-1")  # its shutdown, on this thread
    nodeless = [e for e in logs if "node_id" not in e]
    assert not nodeless, nodeless
    assert all(isinstance(e.get("shards"), int) for e in logs if e["event"] != "system_shutdown")
    by_event = {e["event"]: e["node_id"] for e in logs if e["event"] in ("workflows_started", "workflows_pruned",
                                                                          "system_shutdown")}
    assert by_event == {"workflows_started": "node-2", "workflows_pruned": "node-3", "system_shutdown": "node-1"}
    # A step's events name the node that ran it, whichever node it was started through.
    finished = {e["workflow_id"]: e["node_id"] for e in logs if e["event"] == "workflow_completed"}
    assert {w: finished[w] for w in ids} == owners


def test_a_system_outside_the_cluster_logs_no_node_beside_a_node_in_the_process(
    pg_store_url: str, tmp_path: Path, clock: VirtualClock
) -> None:
    with Cluster(pg_store_url, 1, clock=clock) as cluster, ActorSystem(str(tmp_path / "plain.db"), clock=clock) as plain:
        with capture_logs() as logs:
            ref = plain.start(flows.sleeper, 1, id="plain-nap")
            node = cluster["node-1"].start(flows.sleeper, 1, id="node-nap")
            plain.idle(T)
            cluster.idle(T)
            clock.advance(1)
            plain.idle(T)
            cluster.idle(T)
            assert ref.result(timeout=T) == 1 and node.result(timeout=T) == 1
    mine = [e for e in logs if e.get("workflow_id") == "plain-nap"]
    theirs = [e for e in logs if e.get("workflow_id") == "node-nap"]
    assert mine and theirs
    assert [e for e in mine if "node_id" in e] == []
    assert all(e["node_id"] == "node-1" for e in theirs)


def test_a_workflow_started_here_has_its_shard_known_without_reading_it(cluster: Cluster) -> None:
    """A start's first step inserts a root workflow in its own id's shard, and a start through
    another node inserts it there too: the node that started it reads no row to learn its
    shard, neither for its steps' fences nor for the signals sent to it."""
    n1 = cluster["node-1"]
    shard_reads = Inside(n1).count_shard_reads()
    here = n1.start(flows.collect, 2)  # a generated id, of a shard node-1 leases: runs here
    cluster.idle(T)
    assert shard_reads == []  # its first step (which inserted it) was fenced without a read
    named = n1.start(flows.collect, 2, id=on(cluster, "node-1", "named"))
    elsewhere = n1.start(flows.collect, 2, id=on(cluster, "node-2", "elsewhere"))  # runs on node-2
    cluster.idle(T)
    assert cluster.owner(here.id) == "node-1" and cluster.owner(elsewhere.id) == "node-2"
    shard_reads.clear()  # a named start asks whether the id's shard is leased here: not known yet
    for ref in (here, named, elsewhere):
        ref.signal("item", "a")
        ref.signal("item", "b")
    assert [ref.result(timeout=T) for ref in (here, named, elsewhere)] == [["a", "b"]] * 3
    assert shard_reads == []


def test_the_end_of_a_workflow_is_announced_only_to_nodes_that_wait_on_it(pg_store_url: str) -> None:
    """A node alone sends no notice of a workflow's end (nobody else waits on it); once another
    node has joined, the notice goes out for a workflow whose ``result()`` that node waits on
    (it said so), and wakes it; not for one that only its own node waits on."""
    from persistence._pg._cluster import channel

    conninfo, schema = parse_url(pg_store_url)
    with psycopg.connect(conninfo, autocommit=True) as listener, Cluster(pg_store_url, 1) as cluster:
        listener.execute(f'LISTEN "{channel(schema)}"')

        def done_notices(wait: float) -> list[str]:
            got = [n.payload for n in listener.notifies(timeout=wait)]
            return [wid for p in got if p.startswith("done:") for wid in p[5:].split("\n")]

        n1 = cluster["node-1"]
        alone = n1.start(flows.collect, 1)
        alone.signal("item", "a")
        assert alone.result(timeout=T) == ["a"]
        assert done_notices(1.0) == []

        n2 = cluster.add()
        cluster.settle()
        here = n1.start(flows.collect, 1, id=on(cluster, "node-1", "told"))
        n1.get(here.id).signal("item", "b")
        assert n2.get(here.id).result(timeout=T) == ["b"]
        deadline = time.monotonic() + T
        seen: list[str] = []
        while here.id not in seen and time.monotonic() < deadline:
            seen += done_notices(0.5)
        assert here.id in seen

        untold = n1.start(flows.collect, 1, id=on(cluster, "node-1", "untold"))
        untold.signal("item", "c")
        assert untold.result(timeout=T) == ["c"]  # waited on by its own node only
        assert untold.id not in done_notices(1.0)


def test_a_start_while_this_node_takes_its_shard_over_still_runs_here(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that has just joined leases no shard yet: a start through it draws an id of a
    shard it does not lease, and the record is written alone for the shard's owner (no first step
    here, which the fence would refuse). If this very node takes that shard over in between, after
    the takeover's recovery looked for work and before the record's insert (which then leaves no
    wake-up: the shard is its own), the workflow still runs, here."""
    from persistence._shards import DEFAULT_SHARDS, assignment, shard_of

    share = assignment(DEFAULT_SHARDS, ["node-1", "node-2"])["node-2"]
    bits = next(h for h in (f"{i:012x}" for i in range(10_000)) if shard_of(f"sleeper-{h}", DEFAULT_SHARDS) in share)
    wid, shard = f"sleeper-{bits}", shard_of(f"sleeper-{bits}", DEFAULT_SHARDS)
    Inside.draw_ids(monkeypatch, *[bits] * 65)  # every id a start draws: this one
    # node-2 takes no shard until the start's record is about to be inserted: then the takeover
    # falls exactly between the refused step and the insert, however loaded the machine.
    from persistence._pg._cluster import Membership, Round

    may_take = threading.Event()
    rebalance = Membership.rebalance

    def rebalance_when_allowed(self: Membership) -> object:
        if self.node_id == "node-2" and not may_take.is_set():
            return Round()
        return rebalance(self)

    monkeypatch.setattr(Membership, "rebalance", rebalance_when_allowed)
    with capture_logs() as logs, Cluster(pg_store_url, 1) as cluster:
        n2 = cluster.add()
        inside = Inside(n2)
        assert shard not in inside.owned_shards()
        create = inside.store_method("submit_create_workflows")

        def create_after_the_takeover(wfs: object) -> object:
            may_take.set()
            deadline = time.monotonic() + T
            while not any(e["event"] == "shards_gained" and e.get("node_id") == "node-2" for e in list(logs)):
                assert time.monotonic() < deadline, "node-2 took no shard over"
                time.sleep(0.01)
            assert shard in inside.owned_shards()
            return create(wfs)

        inside.patch_store("submit_create_workflows", create_after_the_takeover)
        ref = n2.start(flows.sleeper, 0)
        assert ref.id == wid
        assert ref.result(timeout=T) == 0.0
        assert cluster.owner(wid) == "node-2"


def test_a_frozen_node_keeps_its_name_until_it_dies_and_a_system_without_node_id_joins(pg_store_url: str) -> None:
    """As the PostgreSQL guide says: a restart under the node_id of a process that is frozen
    (SIGSTOP) is refused with NodeIdInUse for as long as that process lives; a system opened
    without a node_id joins the cluster beside it as a node of its own; once the frozen process
    is killed, its name is free at once."""
    import os
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    program = ("import sys, time\nfrom actors import ActorSystem\n"
               "with ActorSystem(sys.argv[1], node_id='game-1'):\n"
               "    print('up', flush=True)\n    time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", program, pg_store_url], cwd=root, text=True,
                            stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(root)))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        proc.send_signal(signal.SIGSTOP)
        with pytest.raises(NodeIdInUse, match=rf"node_id 'game-1' is in use .*process {proc.pid}"):
            ActorSystem(pg_store_url, node_id="game-1")
        with ActorSystem(pg_store_url) as second:  # no node_id: host name and pid
            assert second.node_id != "game-1"
            assert {n.node_id for n in second.nodes()} == {"game-1", second.node_id}
        proc.kill()
        proc.wait(T)
        with ActorSystem(pg_store_url, node_id="game-1") as again:
            assert again.node_id == "game-1"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(T)


def test_a_start_on_a_node_that_leases_no_shard_yet_runs_on_the_owner_without_a_fenced_step(
    pg_store_url: str, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that has just joined leases no shard until its next rounds; a start with a generated
    id there writes the record and lets the shard's owner run the first step. It ran that step
    itself, which the fence refused (a `step_fenced` WARNING on a plain start), before the owner
    ran it again."""
    with Cluster(pg_store_url, 2, clock=clock) as c:
        # The leases stay where they are while the test runs: the others hand the new node its
        # share within a few rounds, which on a fast machine came before the first start.
        monkeypatch.setattr(Membership, "rebalance", lambda self: Round())
        new = c.add("node-3")
        assert not new._rt.cluster.owned_shards()
        with capture_logs() as logs:
            refs = [new.start(flows.collect, 1) for _ in range(5)]
            for ref in refs:
                ref.signal("item", 7)
            for ref in refs:
                assert ref.result(timeout=T) == [7]
        assert [e for e in logs if e["event"] == "step_fenced"] == []
        for ref in refs:
            assert ref.info().status is Status.COMPLETED
