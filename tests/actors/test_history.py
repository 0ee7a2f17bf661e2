"""What a workflow's history and the log say about its steps.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import json

import pytest
from structlog.testing import capture_logs

from actors import ActorSystem
from actors.cli import main
from workflows import Cancelled

from . import flows
from .runtime_support import (
    T,
    _steps_and_ends,
)

pytestmark = pytest.mark.usefixtures("fresh_flows")


def test_lifecycle_is_logged(system):
    """Each lifecycle transition is one structlog event bound to the workflow id."""
    with capture_logs() as logs:
        ref = system.start(flows.waits_once, id="logged")
        ref.signal("go", 0)
        ref.result(timeout=T)
        system.idle(timeout=T)
    events = [(e["event"], e.get("workflow_id")) for e in logs]
    assert ("workflow_started", "logged") in events
    assert ("workflow_completed", "logged") in events


def test_every_way_to_start_a_workflow_logs_it_started_once(db, clock):
    """``start_many``, ``start_many_async`` and a schedule's tick log ``workflow_started`` once per
    workflow they create, with its type, as ``start`` and ``spawn`` do (they logged nothing
    between the start and ``workflow_completed``); one that exists already is not logged."""
    import asyncio

    from .sched_flows import report

    with ActorSystem(db, clock=clock) as system, capture_logs() as logs:
        system.start_many(flows.adder, [(1,), (2,)], ids=["many-1", "many-2"])
        system.start_many(flows.adder, [(1,), (3,)], ids=["many-1", "many-3"])
        asyncio.run(system.start_many_async(flows.adder, [(4,)], ids=["many-4"]))
        tick = system.schedule("nightly", report, "x", every=3600).next_tick
        assert tick is not None
        clock.advance(3600)
        system.idle(timeout=T)
    started = [e for e in logs if e["event"] == "workflow_started"]
    assert sorted(e["workflow_id"] for e in started) == sorted(
        ["many-1", "many-2", "many-3", "many-4", f"nightly@{_tick_text(tick)}"]
    )
    assert {e["workflow_type"] for e in started} == {flows.adder.__workflow_key__, report.__workflow_key__}
    assert all(e["log_level"] == "info" for e in started)


def _tick_text(tick: float) -> str:
    from actors._schedules import tick_text

    return tick_text(tick)


def test_history_says_what_woke_each_step(db, clock):
    """Each step's history event names what woke it (start, signal, timer, procedure with its
    outcome, children, cancel), with its step number and time, ahead of the end's event."""
    t0 = clock.now()
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(flows.each_kind, id="k")
        ref.signal("go")
        system.idle(timeout=T)
        clock.advance(5)
        system.idle(timeout=T)
        clock.advance(1)
        system.idle(timeout=T)
        assert "never" in ref.info().waiting_on
        ref.cancel("enough")
        with pytest.raises(Cancelled):
            ref.result(timeout=T)
    events = _steps_and_ends(db, "k")
    assert [e[3] for e in events] == [True] * (len(events) - 1) + [False]  # the end: history table
    assert [e[1].pop("step") for e in events[:-1]] == list(range(1, len(events)))
    # What each step armed (the waits it made), beside what woke it.
    armed = [e[1].pop("armed", None) for e in events[:-1]]
    assert armed[:6] == [None, ["timer pause"], ["procedure double"], ["procedure refuses"],
                         ["child k/child-5.0", "child k/child-5.1"], None]
    double_fn, refuses_fn = f"{flows.__name__}:double", f"{flows.__name__}:refuses"
    assert [(e[0], e[1]) for e in events[:5]] == [
        ("started", {}),
        ("signal", {"name": "go"}),
        ("timer", {"name": "pause"}),
        ("procedure", {"function": double_fn, "attempts": 1, "ok": True}),
        ("procedure", {"function": refuses_fn, "attempts": 1, "ok": False, "error": "ValueError"}),
    ]
    # The two children end together: taken in one step, or the first in a step of its own.
    children = [(e[0], e[1]) for e in events[5:-2]]
    kids = {"k/child-5.0", "k/child-5.1"}  # spawned by step 5
    if len(children) == 1:
        (kind, detail), = children
        assert kind == "child" and detail["taken"] == 2 and detail["child"] in kids
    else:
        assert [c[0] for c in children] == ["gather", "child"] and children[0][1] == {"taken": 1}
        assert children[1][1]["child"] in kids and "taken" not in children[1][1]
    assert all(c[1].get("outcome", "completed") == "completed" for c in children)
    assert events[-2][:2] == ("cancel", {"reason": "enough"})
    assert events[-1][:2] == ("cancelled", {"reason": "enough"})
    assert [e[2] for e in events] == sorted(e[2] for e in events)
    assert events[0][2] == pytest.approx(t0) and events[2][2] == pytest.approx(t0 + 5)


@pytest.mark.parametrize("keep", [8, 40])  # under the row's steps (16), and over them
def test_positions_stay_put_as_a_history_limit_drops_the_oldest_steps(db, clock, keep):
    """An entry's position is its place in the whole history: as ``history_limit`` drops the
    oldest steps, the others keep theirs, so a page taken earlier still pages back, to entries
    that are gone (nothing), never to newer ones."""
    with ActorSystem(db, clock=clock, history_limit=keep) as system:
        ref = system.start(flows.collect, 400, id="long")
        for i in range(30):
            ref.signal("item", i)
        system.idle(T)
        page = ref.history(limit=5)
        assert [e.step for e in page] == list(range(27, 32))
        assert [e.position for e in page] == [e.step - 1 for e in page]  # step k: entry k - 1
        for i in range(30, 200):
            ref.signal("item", i)
        system.idle(T)
        kept = ref.history()
        assert [e.step for e in kept] == list(range(202 - keep, 202))
        assert [e.position for e in kept] == [e.step - 1 for e in kept]
        assert ref.history(limit=5, before=page[0].position) == []  # gone
        assert ref.history(limit=3, before=kept[2].position) == kept[:2]
    with ActorSystem(db, clock=clock) as system:
        # The limit lifted: what is stored shows (a few more steps), each at its position still.
        whole = system.get("long").history()
        assert whole[-keep:] == kept and len(whole) < 2 * 16 + keep
        assert [e.position for e in whole] == [e.step - 1 for e in whole]


def test_a_result_whose_repr_fails_completes_and_its_history_says_so(db, clock):
    """A workflow returning a value Python cannot write out as text (an int of more digits than
    it writes, an object whose __repr__ raises), picklable all the same, completes with it: the
    history's text of the result says what it is instead. It failed as a runtime fault, after
    five restarts, on that text alone."""
    from . import talk_flows as tf

    with ActorSystem(db, clock=clock) as system:
        big = system.start(flows.keeps_its_argument, {"n": 10**5000}, id="big")
        odd = system.start(flows.keeps_its_argument, tf.ReprFails(), id="odd")
        system.idle(timeout=T)
        big.signal("go")
        odd.signal("go")
        assert big.result(timeout=T) == {"n": 10**5000}
        assert isinstance(odd.result(timeout=T), tf.ReprFails)
        end = big.history()[-1]
        assert end.event == "completed"
        assert end.detail["result"].startswith("<dict that cannot be shown: ValueError: Exceeds the limit")
        assert odd.history()[-1].detail == {
            "result": "<ReprFails that cannot be shown: RuntimeError: this repr is broken>"
        }


def test_history_keeps_every_step_across_restarts(db, clock):
    """Every step is kept (the row describes the newest RECENT_STEPS to 2 * RECENT_STEPS, the
    history table the ones before), and a restart goes on from them: no step lost or described
    twice."""
    from persistence import RECENT_STEPS

    n = 3 * RECENT_STEPS + 5
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(flows.collect, n, id="c")
        for i in range(8):
            ref.signal("item", i)
        system.idle(timeout=T)
        assert len(_steps_and_ends(db, "c")) == 9
    with ActorSystem(db, clock=clock) as system:
        ref = system.get("c")
        for i in range(8, n):
            ref.signal("item", i)
        assert ref.result(timeout=T) == list(range(n))
    events = _steps_and_ends(db, "c")
    assert len(events) == n + 2
    assert [(e[0], e[1]) for e in events[:-1]] == [("started", {"step": 1})] + [
        ("signal", {"step": s, "name": "item"}) for s in range(2, n + 2)
    ]
    assert events[-1][0] == "completed"
    in_row = [e[3] for e in events[:-1]]
    kept = in_row.count(True)
    assert RECENT_STEPS <= kept <= 2 * RECENT_STEPS
    assert in_row == [False] * (len(in_row) - kept) + [True] * kept  # the older: the table


def test_history_is_paged_and_a_limit_keeps_the_newest_steps(db, clock, capsys):
    """``ref.history(limit, before)`` pages the whole history, oldest first; with
    ``history_limit=N`` the history is the newest N steps, and ``wf show`` says so."""
    n = 120
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(flows.collect, n, id="whole")
        for i in range(n):
            ref.signal("item", i)
        assert len(ref.result(timeout=T)) == n
        every = ref.history()
        assert [e.step for e in every] == [*range(1, n + 2), None]
        assert [e.position for e in every] == list(range(n + 2))
        assert every[-1].event == "completed" and every[5].detail == {"name": "item"}
        last = ref.history(limit=10)
        assert [e.step for e in last] == [*range(n - 7, n + 2), None]
        before = ref.history(limit=10, before=last[0].position)
        assert [e.step for e in before] == list(range(n - 17, n - 7))
        assert ref.history(limit=0) == [] and ref.history(before=0) == []
        with pytest.raises(ValueError, match="limit must be an int >= 0"):
            ref.history(limit=-1)
        # A value of another type is a TypeError, as for the system's other options.
        for bad in ("5", 2.5, True):
            with pytest.raises(TypeError, match=r"history\(\) limit must be an int >= 0 or None, got"):
                ref.history(limit=bad)
            with pytest.raises(TypeError, match=r"history\(\) before must be a position"):
                ref.history(before=bad)
    with ActorSystem(db, clock=clock, history_limit=30) as system:
        ref = system.start(flows.collect, n, id="cut")
        for i in range(n):
            ref.signal("item", i)
        ref.result(timeout=T)
        steps = [e.step for e in ref.history() if e.step is not None]
        assert steps == list(range(n + 2 - 30, n + 2))
        assert [e.event for e in ref.history(limit=2)] == ["signal", "completed"]
        # One written before the limit: the system that keeps 30 steps shows its newest 30 too.
        assert [e.step for e in system.get("whole").history()] == [*range(n + 2 - 30, n + 2), None]
        kept = [(e.event, e.step) for e in ref.history()]
    # wf show, with the system gone (its limit is in the database), shows the history it keeps,
    # not the few more steps the store holds between two trims.
    assert main(["show", "cut", "--db", db, "--json", "--history", "1000"]) == 0
    shown = json.loads(capsys.readouterr().out)["history"]
    assert [(h["event"], (h["detail"] or {}).get("step")) for h in shown] == kept
    with ActorSystem(db, clock=clock) as system:
        assert len(system.get("whole").history()) == n + 2  # and without the limit, all of it
    with pytest.raises(ValueError, match="history_limit must be a positive int"):
        ActorSystem(db, history_limit=0)
    for bad in ("30", 2.5, True):
        with pytest.raises(TypeError, match="history_limit must be a positive int"):
            ActorSystem(db, history_limit=bad)


def test_wf_show_writes_every_history_event_one_way(db, clock, capsys):
    """``wf show`` prints each event's fields as the same JSON, whether its step is still described
    by the workflow's row or was moved to the history table (written there without spaces)."""
    from persistence import RECENT_STEPS

    n = 3 * RECENT_STEPS
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(flows.collect, n, id="c")
        for i in range(n):
            ref.signal("item", i)
        ref.result(timeout=T)
    assert main(["show", "c", "--db", db, "--history", str(n + 2)]) == 0
    out = capsys.readouterr().out
    lines = out[out.index("\nhistory") + 1:].splitlines()[1:]
    details = [line.split(None, 3)[3] for line in lines]
    assert len(details) == n + 2
    assert details[1] == '{"step": 2, "name": "item"}'
    assert all(d == json.dumps(json.loads(d)) for d in details), details


def _page(whole, limit, before):
    end = len(whole) if before is None else max(0, min(before, len(whole)))
    return whole[max(0, end - limit):end]


def test_a_page_of_a_long_history_is_that_page_of_the_whole_history(db, clock, monkeypatch):
    """``history(limit, before)`` reads only the newest rows it needs where that gives the
    same page, and the whole history where it may not (rows of one millisecond, a clock that
    went back): every page is the one the whole history holds there."""
    from actors.testing import VirtualClock

    def pages(ref):
        whole = ref.history()
        assert [e.position for e in whole] == list(range(len(whole)))
        for limit in (0, 1, 5, 17, 40, 500):
            for before in (None, 0, 1, 10, 33, 70, len(whole) - 1, len(whole), len(whole) + 5):
                assert ref.history(limit=limit, before=before) == _page(whole, limit, before), (limit, before)
        return whole

    with ActorSystem(db, clock=clock) as system:
        ref = system.start(flows.collect, 10**6, id="long")
        for i in range(110):
            ref.signal("item", i)
            system.idle(T)
            if i < 30 or i > 50:  # steps 32 to 52 in one millisecond
                clock.advance(1)
        whole = pages(ref)
        # The last page, of steps each in its own millisecond, is read without the whole history.
        whole_reads = []
        store = system._rt.store
        read_whole = store.history_from
        monkeypatch.setattr(store, "history_from", lambda *a, **k: whole_reads.append(a) or read_whole(*a, **k))
        assert ref.history(limit=20) == whole[-20:] and not whole_reads
        assert ref.history(limit=20, before=whole[-30].position) == whole[-50:-30] and not whole_reads
        assert ref.history(limit=5, before=whole[45].position) == whole[40:45] and whole_reads  # one millisecond
    # A system whose clock is behind the steps stored: its steps come first in time order.
    with ActorSystem(db, clock=VirtualClock(clock.now() - 500)) as system:
        ref = system.get("long")
        for i in range(40):
            ref.signal("item", i)
            system.idle(T)
        ref.cancel("enough")
        system.idle(T)
        whole = pages(ref)
        steps = [e.step for e in whole if e.step is not None]
        assert "cancelled" in [e.event for e in whole] and steps != sorted(steps)  # in time order
