"""Asks and published values in a cluster of three nodes on one PostgreSQL schema: an ask sent on
one node reaches a workflow another node runs, its reply comes back woken by the owner's notice
(not by the half-second reread), and a published value is read from any node."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import actors._talk
from actors import AskFailed
from actors.testing import Cluster, VirtualClock

from . import talk_flows as tf
from .runtime_support import Inside, _wait_until
from .test_cluster import on

T = 30


@pytest.fixture
def cluster(pg_store_url: str) -> Iterator[Cluster]:
    with Cluster(pg_store_url, 3, clock=VirtualClock()) as c:
        yield c


@pytest.fixture
def no_reread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A waiting caller rereads the store only after an hour: what it gets, a notice woke."""
    monkeypatch.setattr(actors._talk, "RECHECK", 3600.0)
    monkeypatch.setattr(actors._talk, "RECHECK_MAX", 3600.0)


def test_an_ask_sent_on_node_a_reaches_a_workflow_node_c_runs(
    cluster: Cluster, no_reread: None
) -> None:
    """An ask sent through node-1 to a workflow node-3 runs is answered by node-3, and node-1's
    asker is woken by node-3's notice (rereads are an hour apart here), every time; published
    values read from any node; an ask id asked on another node gets the stored reply."""
    a, c = cluster["node-1"], cluster["node-3"]
    wid = on(cluster, "node-3", "acct")
    a.start(tf.account, 100, id=wid)
    cluster.idle(T)
    assert cluster.owner(wid) == "node-3" and a.live_actors() == 0
    ref = a.get(wid)
    assert ref.ask("withdraw", 30, timeout=T) == 70  # sent on node-1, answered on node-3
    with pytest.raises(AskFailed, match="insufficient funds"):
        ref.ask("withdraw", 1000, timeout=T)
    assert [ref.ask("withdraw", 1, timeout=T) for _ in range(5)] == [69, 68, 67, 66, 65]
    assert a.live_actors() == 0  # node-1 never ran the workflow
    assert ref.published("balance") == 65
    assert cluster["node-2"].get(wid).published("balance") == 65
    assert c.get(wid).ask("withdraw", 5, ask_id="same", timeout=T) == 60
    assert a.get(wid).ask("withdraw", 5, ask_id="same", timeout=T) == 60  # the stored reply


def test_published_with_a_timeout_on_another_node_is_woken_by_the_commit(
    cluster: Cluster, no_reread: None
) -> None:
    """A reader on node-1 waiting for a value that a workflow on node-2 publishes is woken by
    node-2's notice once it commits (rereads are an hour apart here)."""
    a = cluster["node-1"]
    wid = on(cluster, "node-2", "prog")
    a.start(tf.progress, 1, id=wid)
    cluster.idle(T)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(a.get(wid).published("done", timeout=T)))
    reader.start()
    node2 = Inside(cluster["node-2"])._rt.cluster
    _wait_until(lambda: wid in node2._interest, "node-2 has heard that node-1 waits")
    cluster["node-2"].get(wid).signal("tick")
    reader.join(T)
    assert got == [1]
