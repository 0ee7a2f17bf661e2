"""Procedure limits (SPEC §13): ``@procedure(concurrency=N, rate=R)`` bounds the attempts running
at once (measured inside the procedure) and started per second, retries included; calls beyond
wait in order, and `wf show` and the web view say so."""

from __future__ import annotations

import statistics
import time

import pytest

from actors import ActorSystem, Status
from actors import cli as wf_cli
from actors.testing import VirtualClock
from persistence import open_store
from workflows import Cancelled

from . import limit_flows as lf

T = 60.0


@pytest.fixture(autouse=True)
def fresh() -> None:
    lf.reset()


def test_100_calls_with_concurrency_3_never_run_more_than_3_at_once(db: str) -> None:
    with ActorSystem(db, procedure_workers=8) as system:
        refs = system.start_many(lf.call_three, [(n,) for n in range(100)])
        assert [r.result(timeout=T) for r in refs] == list(range(100))
        system.idle(T)
        gate = system._rt.procedures.limits.gates["tests.actors.limit_flows:three_at_once"]
        assert gate is not None and gate.most == 3
    assert lf.MOST[0] == 3  # never more, and the limit was reached: 3 ran at once
    assert sorted(int(w) for w, _ in lf.STARTS) == list(range(100))  # each once


def test_retries_count_against_the_limit(db: str) -> None:
    with ActorSystem(db, procedure_workers=8) as system:
        refs = system.start_many(lf.call_flaky, [(n,) for n in range(20)])
        assert [r.result(timeout=T) for r in refs] == list(range(20))
    assert lf.MOST[0] == 2
    assert len(lf.STARTS) == 40  # two attempts each: the failed one and its retry


def test_calls_beyond_the_limit_start_in_the_order_they_were_made(db: str) -> None:
    with ActorSystem(db, procedure_workers=8) as system:
        ref = system.start(lf.call_in_order, 12)
        assert ref.result(timeout=T) == list(range(12))
    assert [w for w, _ in lf.STARTS] == [str(i) for i in range(12)]
    assert lf.MOST[0] == 1


def test_rate_10_spreads_the_starts_a_tenth_of_a_second_apart(db: str) -> None:
    with ActorSystem(db, procedure_workers=8) as system:
        refs = system.start_many(lf.call_rated, [(n,) for n in range(20)])
        assert sorted(r.result(timeout=T) for r in refs) == list(range(20))
    times = sorted(t for _, t in lf.STARTS)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    # The limit spaces the starts it lets go 0.1 s apart; seen from inside the procedure, a start
    # may come a little late (a worker thread's wake-up), and the next on time after it.
    assert statistics.median(gaps) >= 0.095
    assert times[-1] - times[0] >= 1.8  # 20 starts at 10 a second: about 2 seconds
    assert max(sum(1 for t in times if s <= t < s + 1.0) for s in times) <= 11


def test_wf_show_and_the_web_view_say_a_call_waits_for_its_limit(db: str, capsys) -> None:  # type: ignore[no-untyped-def]
    with ActorSystem(db, procedure_workers=8) as system:
        refs = [system.start(lf.call_held, n, id=f"held-{n}") for n in range(3)]
        deadline = time.monotonic() + T
        store = open_store(db, owner=False)
        try:
            while len(store.read_table("SELECT key FROM limit_waits")) < 2:
                assert time.monotonic() < deadline, "two calls never waited for the limit"
                time.sleep(0.02)
            waiting = [
                r.id
                for r in refs
                if store.read_table("SELECT key FROM limit_waits WHERE workflow_id = ?", (r.id,))
            ]
            assert len(waiting) == 2
            capsys.readouterr()
            assert wf_cli.main(["show", waiting[0], "--db", db]) == 0
            out = capsys.readouterr().out
            assert "waiting for its concurrency limit" in out
            assert wf_cli.main(["show", waiting[0], "--db", db, "--json"]) == 0
            assert '"waiting_for_limit": "concurrency"' in capsys.readouterr().out
            pytest.importorskip("starlette")
            from starlette.testclient import TestClient

            from actors._ui import create_app

            page = (
                TestClient(create_app(store, db, allowed_hosts=frozenset({"testserver"})))
                .get(f"/w/{waiting[0]}")
                .text
            )
            assert "waiting for its concurrency limit" in page
        finally:
            lf.GATE.set()
            store.close()
        assert sorted(r.result(timeout=T) for r in refs) == [0, 1, 2]
        system.idle(T)
        assert system._rt.store.read_table("SELECT key FROM limit_waits") == []  # notes gone
        assert all(r.status() is Status.COMPLETED for r in refs)


def _until(what: str, cond) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + T
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _started() -> list[str]:
    with lf.LOCK:
        return [w for w, _ in lf.STARTS]


def _waiting_for_limit(system: ActorSystem, wid: str) -> bool:
    return bool(system._rt.store.read_table("SELECT key FROM limit_waits WHERE workflow_id = ?", (wid,)))


def test_a_call_in_its_limits_line_does_not_start_once_its_workflow_is_cancelled(db: str) -> None:
    with ActorSystem(db, procedure_workers=8) as system:
        first = system.start(lf.call_held, 1, id="first")
        _until("the first call never started", lambda: _started() == ["1"])
        second = system.start(lf.call_held, 2, id="second")
        _until("the second call never waited for the limit", lambda: _waiting_for_limit(system, "second"))
        second.cancel("not needed")
        with pytest.raises(Cancelled):
            second.result(timeout=T)
        lf.GATE.set()
        assert first.result(timeout=T) == 1
        system.idle(T)
    assert _started() == ["1"]  # the cancelled workflow's call never ran


def test_a_call_in_its_limits_line_does_not_start_once_its_select_arm_lost(db: str) -> None:
    clock = VirtualClock()
    with ActorSystem(db, clock=clock, procedure_workers=8) as system:
        first = system.start(lf.call_held, 1, id="first")
        _until("the first call never started", lambda: _started() == ["1"])
        raced = system.start(lf.held_or_timer, 2, id="raced")
        _until("the raced call never waited for the limit", lambda: _waiting_for_limit(system, "raced"))
        clock.advance(5)
        assert raced.result(timeout=T) == "t"
        lf.GATE.set()
        assert first.result(timeout=T) == 1
        system.idle(T)
    assert _started() == ["1"]


def test_a_call_queued_for_a_worker_does_not_start_once_its_workflow_is_cancelled(db: str) -> None:
    with ActorSystem(db, procedure_workers=1) as system:
        first = system.start(lf.call_gated, 1, id="first")
        _until("the first call never started", lambda: _started() == ["1"])
        queued = system.start(lf.call_gated, 2, id="queued")
        _until("the second call was never made", lambda: bool(system._rt.store.procedures("queued")))
        queued.cancel()
        with pytest.raises(Cancelled):
            queued.result(timeout=T)
        lf.GATE.set()
        assert first.result(timeout=T) == 1
        system.idle(T)
    assert _started() == ["1"]


def test_an_attempt_abandoned_at_its_timeout_keeps_its_place_in_the_limit_until_it_returns(db: str) -> None:
    """concurrency=1 bounds the attempts running at once: one abandoned at its timeout still
    runs on its thread, so the next call waits for it to return."""
    with ActorSystem(db, procedure_workers=8) as system:
        refs = [system.start(lf.call_outliving, n, id=f"o{n}") for n in range(3)]
        assert refs[0].result(timeout=T) == "ProcedureFailed"  # its one attempt timed out
        _until("no call waited behind the abandoned attempt", lambda: _waiting_for_limit(system, "o1"))
        assert _started() == ["0"] and lf.MOST[0] == 1  # the others wait: it still runs
        lf.GATE.set()  # it returns; the others start, one at a time (each returns at once now)
        assert [r.result(timeout=T) for r in refs[1:]] == ["returned", "returned"]
    assert sorted(_started()) == ["0", "1", "2"] and lf.MOST[0] == 1


def test_limit_options_are_checked_at_decoration() -> None:
    from workflows import procedure

    with pytest.raises(
        ValueError, match="concurrency= must be a whole number of attempts, 1 or more"
    ):
        procedure(concurrency=0)(lambda: None)
    with pytest.raises(ValueError, match="rate= must be a positive number of starts per second"):
        procedure(rate=-1)(lambda: None)


def test_limit_options_of_the_wrong_type_are_type_errors_that_are_value_errors_too() -> None:
    """``concurrency="2"``, ``concurrency=2.0`` and ``rate="3"`` are of the wrong type: a
    ``TypeError``, as ``timeout="5"`` and ``RetryPolicy(maximum_attempts="3")`` raise (they were
    ``ValueError``s alone), that is the ``ValueError`` of a bad limit too; a wrong value of the
    right type stays a ``ValueError`` alone."""
    from workflows import procedure

    for options, says in (
        ({"concurrency": "2"}, "concurrency= must be a whole number"),
        ({"concurrency": 2.0}, "concurrency= must be a whole number"),
        ({"concurrency": True}, "concurrency= must be a whole number"),
        ({"rate": "3"}, "rate= must be a positive number"),
        ({"rate": None, "concurrency": [1]}, "concurrency= must be a whole number"),
    ):
        with pytest.raises(TypeError, match=says) as caught:
            procedure(**options)(lambda: None)
        assert isinstance(caught.value, ValueError)
    for options in ({"concurrency": 0}, {"rate": 0}, {"rate": float("inf")}):
        with pytest.raises(ValueError) as bad:
            procedure(**options)(lambda: None)
        assert not isinstance(bad.value, TypeError)


def test_in_a_3_node_cluster_each_node_holds_the_limit_for_its_own_attempts(
    pg_store_url: str,
) -> None:
    """A limit holds in one system: each node runs at most 3 attempts at once, and every call
    completes wherever its workflow runs."""
    from actors.testing import Cluster

    with Cluster(pg_store_url, 3, procedure_workers=8) as cluster:
        refs = cluster["node-1"].start_many(lf.call_three, [(n,) for n in range(60)])
        assert sorted(r.result(timeout=T) for r in refs) == list(range(60))
        cluster.idle(T)
        most = {
            name: s._rt.procedures.limits.gates.get("tests.actors.limit_flows:three_at_once")
            for name, s in cluster.nodes.items()
        }
        ran = {name: g.most for name, g in most.items() if g is not None}
    assert len(ran) >= 2 and all(1 <= m <= 3 for m in ran.values()), ran
    assert lf.MOST[0] <= 3 * len(ran)
    assert sorted(int(w) for w, _ in lf.STARTS) == list(range(60))  # each once


def test_an_outcome_recorded_by_a_node_that_lost_the_workflow_reaches_the_new_owner(
    pg_store_url: str,
) -> None:
    """A node whose attempt was running when the workflow's shard was taken over records the
    outcome in the call's row (its step is refused by the fence). The new owner's own attempt,
    waiting for its limit meanwhile, finds the call done when its turn comes: it runs nothing and
    hands the recorded outcome to the workflow, which goes on (it waited on the call for good)."""
    import psycopg

    from actors.testing import Cluster
    from persistence._pg._schema import parse_url
    from tests.conftest import schema_of

    from .runtime_support import Inside
    from .test_cluster import on

    with Cluster(pg_store_url, 2, procedure_workers=4) as cluster:
        n1, n2 = cluster["node-1"], cluster["node-2"]
        target, blocker = on(cluster, "node-1", "target"), on(cluster, "node-2", "blocker")
        n2.start(lf.call_held_apart, 2, id=blocker)  # node-2's one slot of the limit, taken
        n1.start(lf.call_held_apart, 1, id=target)
        _until("the two calls never started", lambda: sorted(_started()) == ["1", "2"])
        # node-1 freezes while its attempt runs, and node-2 takes its shards over.
        frozen = Inside(n1)
        frozen.halt_node()
        with psycopg.connect(parse_url(pg_store_url)[0], autocommit=True) as conn:
            conn.execute(
                f"UPDATE {schema_of(pg_store_url)}.af_nodes SET state = 'dead' WHERE node_id = 'node-1'"
            )
        _until("node-2 never took the workflow over", lambda: Inside(n2).believes_it_owns(target))
        line = n2._rt.procedures.limits.gates["tests.actors.limit_flows:held_apart"]
        assert line is not None
        _until("node-2's call never waited for its limit", lambda: any(w == target for _, w, _ in line.line))
        lf.gate(1).set()  # node-1's attempt returns; its step is fenced, its outcome kept in the row
        _until(
            "node-1 never recorded the outcome",
            lambda: [p.status for p in n2._rt.store.procedures(target)] == ["done"],
        )
        lf.gate(2).set()  # node-2's slot frees: its turn comes for a call that is done
        assert n2.get(target).result(timeout=T) == 1
        assert n2.get(blocker).result(timeout=T) == 2
        assert sorted(_started()) == ["1", "2"]  # node-2 did not run the done call again
        cluster.crash("node-1")
