"""SPEC §1, §3, §5, §7 and §8 (and §6's behaviours) read as a user of Temporal, DBOS or Akka reads
them, promise by promise.

Each test that takes ``system`` runs on SQLite and on PostgreSQL (the ``db`` fixture of
``conftest.py``), under a VirtualClock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from structlog.testing import capture_logs

from actors import (
    ActorSystem,
    Status,
    TimerNotArmed,
    UnknownWorkflow,
    WorkflowFailed,
    WorkflowInfo,
)
from actors.cli import main
from workflows import (
    Cancelled,
    ChildFailed,
    CompileError,
    Event,
    ProcedureFailed,
    RetryPolicy,
    broadcast,
    gather,
    idempotency_key,
    info,
    now,
    procedure,
    reducer,
    select,
    send,
    signal,
    spawn,
    subscribe,
    timer,
    unsubscribe,
    workflow,
    workflow_id,
)

from .runtime_support import T, app_events

GATE = threading.Event()
RAN: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    GATE.clear()
    RAN.clear()


@reducer
def note(db, wf: str, text: str) -> None:
    db["app_events"].insert({"wf": wf, "text": text}, pk="id", alter=True)


@procedure
def price_of(item: int) -> int:
    return item * 10


@procedure
def waits_for_gate(tag: str) -> str:
    GATE.wait(T)
    RAN.append(tag)
    return tag


@procedure(retry=RetryPolicy(maximum_attempts=1))
def always_fails(what: str) -> None:
    raise KeyError(what)


@workflow
async def short_child(x: int) -> int:
    await timer("nap", after=5)
    return x + 1


@workflow
async def failing_child(msg: str) -> None:
    await timer("nap", after=1)
    raise ValueError(msg)


@workflow
async def waiting_child(tag: str) -> str:
    try:
        await signal("never")
    finally:
        reducer(note, workflow_id(), f"{tag} cleaned")
    return "no"


# -- §1: the auction of the example, as written ----------------------------------------------------


@workflow
async def auction(item_id: int, seller: str):
    price = await procedure(price_of, item_id)
    high_bidder = None
    reducer(note, workflow_id(), f"auction for {item_id} opens at {price}")
    closes_at = now() + 60
    while True:
        match await select(timer("end", at=closes_at), signal("bid"), signal("cancel")):
            case Event("end"):
                return {"winner": high_bidder, "price": price}
            case Event("bid", bid):
                if bid["amount"] > price:
                    high_bidder, price = bid["bidder"], bid["amount"]
            case Event("cancel") if high_bidder is None:
                return {"cancelled": True}


def test_the_auction_of_the_example_closes_at_its_one_deadline(system, clock, db):
    ref = system.start(auction, 7, "carol", id="auction-7")
    assert ref.id == "auction-7"
    ref.signal("bid", {"bidder": "alice", "amount": 100})
    system.idle(timeout=T)
    clock.advance(30)
    ref.signal("bid", {"bidder": "bob", "amount": 50})  # too low
    ref.signal("cancel")  # ignored: there is a high bidder
    system.idle(timeout=T)
    clock.advance(29)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING  # the deadline did not move with the loop turns
    clock.advance(1)
    assert ref.result(timeout=T) == {"winner": "alice", "price": 100}
    assert app_events(db, "auction-7") == ["auction for 7 opens at 70"]


def test_the_auction_survives_a_restart_with_its_deadline_and_buffered_signals(db, clock):
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(auction, 7, "carol", id="auction-7", test_mode=False)
        system.idle(timeout=T)
        ref.signal("bid", {"bidder": "alice", "amount": 100})
        system.idle(timeout=T)
    clock.advance(45)
    with ActorSystem(db, clock=clock) as system:
        ref = system.get("auction-7")
        ref.signal("bid", {"bidder": "bob", "amount": 120})
        system.idle(timeout=T)
        assert ref.status() is Status.RUNNING
        clock.advance(15)
        assert ref.result(timeout=T) == {"winner": "bob", "price": 120}


# -- §3: Event -------------------------------------------------------------------------------------


def test_event_is_a_frozen_dataclass_with_kind_as_third_field():
    fields = [f.name for f in dataclasses.fields(Event)]
    assert fields[:3] == ["name", "value", "kind"]
    assert Event.__match_args__ == ("name", "value")
    e = Event("bid", {"amount": 1}, "signal")
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.name = "x"  # type: ignore[misc]
    assert e == Event("bid", {"amount": 1}, "signal")
    assert e != Event("bid", {"amount": 1}, "request")
    assert hash(Event("end", None, "timer")) == hash(Event("end", None, "timer"))
    match Event("end", None, "timer"):
        case Event("end", v, kind="timer"):
            assert v is None
        case _:
            pytest.fail("no match")


@workflow
async def picks(which: str) -> Event:
    arms = {
        "timer": timer("t", after=1),
        "signal": signal("s"),
        "procedure": procedure(price_of, 4),
        "named_procedure": procedure(price_of, 5, name="quote"),
        "child": spawn(short_child, 1),
        "named_child": spawn(short_child, 2, name="kid"),
    }
    if which == "timer":
        return await select(arms["timer"], signal("s"))
    if which == "signal":
        return await select(timer("t", after=100), arms["signal"])
    if which in ("procedure", "named_procedure"):
        return await select(timer("t", after=100), arms[which])
    return await select(timer("t", after=100), arms[which])


@pytest.mark.parametrize(
    "which, expected",
    [
        ("timer", Event("t", None, "timer")),
        ("signal", Event("s", {"p": 1}, "signal")),
        ("procedure", Event("price_of", 40, "procedure")),
        ("named_procedure", Event("quote", 50, "procedure")),
        ("child", Event("short_child", 2, "child")),
        ("named_child", Event("kid", 3, "child")),
    ],
)
def test_each_kind_of_arm_wins_as_its_event(system, clock, which, expected):
    ref = system.start(picks, which)
    system.idle(timeout=T)
    if which == "signal":
        ref.signal("s", {"p": 1})
    clock.advance(5)  # the timer arm's second, or the child's nap
    assert ref.result(timeout=T) == expected


# -- §3: select disarms the losers -----------------------------------------------------------------


@workflow
async def signal_beats_timer_then_waits() -> str:
    await select(timer("slow", after=100), signal("go"))
    await signal("again")
    return "done"


def test_a_losing_timer_is_cancelled_and_cannot_be_fired_by_name(system, clock):
    ref = system.start(signal_beats_timer_then_waits, test_mode=True)
    system.idle(timeout=T)
    assert "timer 'slow' due" in ref.info().waiting_on
    ref.signal("go")
    system.idle(timeout=T)
    with pytest.raises(TimerNotArmed, match="'slow'") as e:
        ref.debug_fire_timer("slow")
    assert e.value.armed == []
    assert "armed timers: none" in str(e.value)
    clock.advance(200)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    ref.signal("again")
    assert ref.result(timeout=T) == "done"




@workflow
async def signal_beats_child() -> str:
    ev = await select(spawn(waiting_child, "loser", id="loser-child"), signal("go"))
    await timer("after", after=1)
    return ev.name


def test_a_losing_child_is_cancelled_and_its_finally_runs(system, clock, db):
    ref = system.start(signal_beats_child)
    system.idle(timeout=T)
    child = system.get("loser-child")
    assert child.status() is Status.RUNNING
    ref.signal("go")
    system.idle(timeout=T)
    assert child.status() is Status.CANCELLED
    with pytest.raises(Cancelled):
        child.result(timeout=T)
    assert app_events(db, "loser-child") == ["loser cleaned"]
    clock.advance(1)
    assert ref.result(timeout=T) == "go"


@workflow
async def signal_beats_procedure() -> list:
    ev = await select(procedure(waits_for_gate, "late"), signal("go"))
    got = [ev.name]
    got.append((await select(signal("next"), timer("t", after=10))).name)
    return got


def test_a_losing_procedure_s_result_is_discarded(system, clock):
    ref = system.start(signal_beats_procedure)
    ref.signal("go")
    # the workflow is now in its second select; the procedure still runs
    GATE.set()
    system.idle(timeout=T)
    assert RAN == ["late"]
    assert ref.status() is Status.RUNNING  # the late result woke nothing
    ref.signal("next")
    assert ref.result(timeout=T) == ["go", "next"]


@workflow
async def select_timer_each_turn() -> int:
    turns = 0
    while True:
        ev = await select(timer("quiet", after=10), signal("ping"))
        if ev.name == "quiet":
            return turns
        turns += 1


def test_a_timer_in_a_select_is_armed_again_each_time_the_select_starts(system, clock):
    ref = system.start(select_timer_each_turn)
    system.idle(timeout=T)
    for _ in range(3):
        clock.advance(6)
        ref.signal("ping")
        system.idle(timeout=T)
    assert ref.status() is Status.RUNNING  # 18 s passed, never 10 quiet ones
    clock.advance(9)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    clock.advance(1)
    assert ref.result(timeout=T) == 3


# -- §3: gather ------------------------------------------------------------------------------------


@workflow
async def gathers_in_order() -> list:
    return await gather(
        spawn(short_child, 10),  # done at 5 s
        timer("t", after=1),
        signal("s"),
        procedure(price_of, 3),
    )


def test_gather_gives_results_in_the_order_of_its_commands(system, clock):
    ref = system.start(gathers_in_order)
    system.idle(timeout=T)
    ref.signal("s", "payload")
    clock.advance(1)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    clock.advance(4)
    assert ref.result(timeout=T) == [11, None, "payload", 30]


@workflow
async def gather_first_failure() -> str:
    try:
        await gather(
            spawn(waiting_child, "sibling", id="gather-sibling"),
            spawn(failing_child, "boom", id="gather-failer"),
            timer("long", after=1000),
        )
    except ChildFailed as e:
        return f"{e.child_id}:{e.error_type}:{e.error_message}"
    return "no"


def test_gather_raises_the_first_failure_and_cancels_the_rest(system, clock, db):
    ref = system.start(gather_first_failure, test_mode=False)
    system.idle(timeout=T)
    clock.advance(1)
    assert ref.result(timeout=T) == "gather-failer:ValueError:boom"
    system.idle(timeout=T)
    assert system.get("gather-sibling").status() is Status.CANCELLED
    assert app_events(db, "gather-sibling") == ["sibling cleaned"]


@workflow
async def gather_procedure_failure() -> str:
    try:
        await gather(procedure(waits_for_gate, "slow"), procedure(always_fails, "k"))
    except ProcedureFailed as e:
        return f"{e.procedure}|{e.attempts}|{e.error_type}"
    return "no"


def test_gather_raises_a_procedure_failure_without_waiting_for_the_rest(system, clock):
    ref = system.start(gather_procedure_failure)
    proc, attempts, etype = ref.result(timeout=T).split("|")  # the slow one still runs
    assert proc.endswith("always_fails")
    assert (attempts, etype) == ("1", "KeyError")
    assert RAN == []
    GATE.set()
    system.idle(timeout=T)
    assert RAN == ["slow"]
    assert ref.result(timeout=T) == f"{proc}|1|KeyError"


# -- §3: children ----------------------------------------------------------------------------------


@workflow
async def parent_with_two_children() -> str:
    await spawn(short_child, 0, id="quick-child")  # awaited, done
    await select(spawn(short_child, 1, id="kept-child", detached=True), timer("soon", after=1))
    await select(spawn(short_child, 2, id="owned-child"), timer("soon2", after=1))
    return "parent done"


def test_a_detached_child_outlives_its_parent_and_others_are_cancelled_with_it(system, clock):
    ref = system.start(parent_with_two_children)
    system.idle(timeout=T)
    clock.advance(5)  # quick-child done
    system.idle(timeout=T)
    clock.advance(1)  # soon: the detached child lost the select, and is left running
    system.idle(timeout=T)
    clock.advance(1)  # soon2
    assert ref.result(timeout=T) == "parent done"
    system.idle(timeout=T)
    assert system.get("owned-child").status() is Status.CANCELLED
    kept = system.get("kept-child")
    assert kept.status() is Status.RUNNING
    assert kept.info().parent_id == ref.id
    clock.advance(5)
    assert kept.result(timeout=T) == 2


@workflow
async def parent_returns_while_child_runs() -> str:
    await select(spawn(short_child, 1, id="attached-child"), timer("t", after=1))
    return "bye"


def test_a_parent_that_ends_cancels_its_attached_child(system, clock):
    ref = system.start(parent_returns_while_child_runs)
    system.idle(timeout=T)
    clock.advance(1)
    assert ref.result(timeout=T) == "bye"
    system.idle(timeout=T)
    assert system.get("attached-child").status() is Status.CANCELLED


@workflow
async def parent_of_failing() -> dict:
    try:
        await spawn(failing_child, "bad input", id="failing-kid")
    except ChildFailed as e:
        return {
            "child_id": e.child_id,
            "child_type": e.child_type,
            "error_type": e.error_type,
            "error_message": e.error_message,
            "traceback": e.traceback,
            "isinstance": isinstance(e, Exception),
        }
    return {}


def test_child_failed_carries_the_child_s_id_type_error_and_traceback(system, clock):
    ref = system.start(parent_of_failing)
    system.idle(timeout=T)
    clock.advance(1)
    got = ref.result(timeout=T)
    assert got["child_id"] == "failing-kid"
    assert got["child_type"].endswith("failing_child")
    assert (got["error_type"], got["error_message"]) == ("ValueError", "bad input")
    assert "test_spec_probe8.py" in got["traceback"] and "raise ValueError(msg)" in got["traceback"]
    assert got["isinstance"]
    assert system.get("failing-kid").status() is Status.FAILED


@workflow
async def parent_of_failing_uncaught() -> None:
    await spawn(failing_child, "deep", id="failing-kid2")


def test_an_uncaught_child_failure_fails_the_parent_as_child_failed(system, clock):
    ref = system.start(parent_of_failing_uncaught)
    system.idle(timeout=T)
    clock.advance(1)
    with pytest.raises(WorkflowFailed) as e:
        ref.result(timeout=T)
    assert e.value.error_type.endswith("ChildFailed")
    assert "deep" in e.value.error_message
    assert ref.status() is Status.FAILED


@workflow
async def catches_procedure_failure() -> dict:
    try:
        await procedure(always_fails, "the-key")
    except ProcedureFailed as e:
        return {
            "procedure": e.procedure,
            "attempts": e.attempts,
            "error_type": e.error_type,
            "error_message": e.error_message,
            "traceback": e.traceback,
        }
    return {}


def test_procedure_failed_carries_the_procedure_its_attempts_and_the_cause(system):
    got = system.start(catches_procedure_failure).result(timeout=T)
    assert got["procedure"].endswith("always_fails")
    assert got["attempts"] == 1
    assert got["error_type"] == "KeyError"
    assert "the-key" in got["error_message"]
    assert "raise KeyError(what)" in got["traceback"]


# -- §3: the rest of the authoring API -------------------------------------------------------------


@workflow
async def awaits_asyncio() -> None:
    await asyncio.sleep(0)


def test_awaiting_something_that_is_no_command_fails_naming_the_line(system):
    ref = system.start(awaits_asyncio)
    with pytest.raises(WorkflowFailed) as e:
        ref.result(timeout=T)
    assert e.value.error_type.endswith("WorkflowError")
    assert "await asyncio.sleep(0)" in e.value.traceback
    assert "asyncio.sleep" in e.value.error_message and "test_spec_probe8.py:" in e.value.error_message


@workflow
async def helper_flow(x: int) -> int:
    await timer("h", after=1)
    return x * 3 + (1 if workflow_id() == info().id else 0)


@workflow
async def calls_helper_inline(x: int) -> list:
    got = await helper_flow(x)
    return [got, info().parent_id, info().type]


def test_a_workflow_awaited_directly_runs_inline_in_the_caller(system, clock):
    ref = system.start(calls_helper_inline, 2)
    system.idle(timeout=T)
    clock.advance(1)
    got, parent, wtype = ref.result(timeout=T)
    assert got == 7
    assert parent is None
    assert wtype.endswith("calls_helper_inline")
    assert [w.id for w in system.workflows()] == [ref.id]


@workflow
async def raises_here(msg: str) -> None:
    await timer("t", after=0)
    raise RuntimeError(msg)


def test_result_raises_workflow_failed_with_type_message_and_user_traceback(system):
    ref = system.start(raises_here, "it broke")
    with pytest.raises(WorkflowFailed) as e:
        ref.result(timeout=T)
    assert e.value.workflow_id == ref.id
    assert e.value.error_type == "RuntimeError"
    assert e.value.error_message == "it broke"
    assert "test_spec_probe8.py" in e.value.traceback
    assert "raise RuntimeError(msg)" in e.value.traceback
    assert ref.status() is Status.FAILED
    i = ref.info()
    assert i.status is Status.FAILED and i.result is None and "it broke" in str(i.error)


def test_procedures_and_reducers_are_plain_callables_outside_a_workflow():
    assert price_of(3) == 30

    class Table:
        rows: list = []

        def insert(self, row, **kw):
            self.rows.append(row)

    note({"app_events": Table()}, "w", "hi")
    assert Table.rows == [{"wf": "w", "text": "hi"}]


def test_a_workflow_defined_in_a_function_runs_in_that_process(system):
    @workflow
    async def local_flow(x: int) -> int:
        await timer("t", after=0)
        return x + 1

    assert system.start(local_flow, 1).result(timeout=T) == 2


def test_a_workflow_closing_over_the_enclosing_function_s_variable_is_a_compile_error():
    factor = 3
    with pytest.raises(CompileError, match="factor"):

        @workflow
        async def closes(x: int) -> int:
            await timer("t", after=0)
            return x * factor


# -- §5: the system and its refs -------------------------------------------------------------------


@workflow
async def waits_for(name: str) -> object:
    return await signal(name)


def test_start_of_the_id_of_a_finished_workflow_returns_it_and_runs_nothing_again(system):
    first = system.start(waits_for, "a", id="done-once")
    first.signal("a", "v")
    assert first.result(timeout=T) == "v"
    again = system.start(waits_for, "a", id="done-once")
    assert again.status() is Status.COMPLETED
    assert again.result(timeout=T) == "v"


def test_get_of_an_unknown_id_raises_unknown_workflow_naming_it(system):
    with pytest.raises(UnknownWorkflow, match="no-such-workflow"):
        system.get("no-such-workflow")
    assert issubclass(UnknownWorkflow, Exception)


def test_workflow_info_is_a_frozen_dataclass_with_the_spec_fields(system, clock):
    ref = system.start(waits_for, "go", id="info-1", test_mode=True)
    system.idle(timeout=T)
    i = ref.info()
    assert isinstance(i, WorkflowInfo)
    names = {f.name for f in dataclasses.fields(WorkflowInfo)}
    assert {"id", "type", "status", "parent_id", "waiting_on", "created_at", "updated_at", "result",
            "error", "test_mode"} <= names
    with pytest.raises(dataclasses.FrozenInstanceError):
        i.status = Status.FAILED  # type: ignore[misc]
    assert (i.id, i.status, i.parent_id, i.result, i.error, i.test_mode) == (
        "info-1", Status.RUNNING, None, None, None, True)
    assert i.type == f"{__name__}:waits_for"
    assert i.created_at == i.updated_at == clock.now()
    assert "signal 'go'" in i.waiting_on
    clock.advance(10)
    ref.signal("go", {"k": [1, 2]})
    assert ref.result(timeout=T) == {"k": [1, 2]}
    done = ref.info()
    assert done.status is Status.COMPLETED and done.result == {"k": [1, 2]} and done.error is None
    assert done.updated_at == clock.now() and done.created_at == i.created_at
    assert not done.waiting_on


@workflow
async def waits_on_everything() -> list:
    return await gather(timer("alarm", after=3600), signal("door"), procedure(waits_for_gate, "w"),
                        spawn(waits_for, "child-signal", id="info-kid"))


def test_waiting_on_names_timers_with_due_times_signals_procedures_and_children(system, clock):
    ref = system.start(waits_on_everything, id="info-all")  # its first step armed them all
    text = ref.info().waiting_on
    due = time.strftime("%Y-%m-%d %H:%M", time.gmtime(clock.now() + 3600))
    assert "timer 'alarm'" in text and due in text
    assert "signal 'door'" in text
    assert "procedure" in text and "waits_for_gate" in text
    assert "child" in text and "info-kid" in text
    kid = system.get("info-kid").info()
    assert kid.parent_id == "info-all"
    GATE.set()
    ref.cancel()
    with pytest.raises(Cancelled):
        ref.result(timeout=T)


def test_result_with_a_timeout_raises_timeout_error(system):
    ref = system.start(waits_for, "never")
    with pytest.raises(TimeoutError):
        ref.result(timeout=0.05)
    assert ref.status() is Status.RUNNING


def test_status_is_an_enum_of_the_four_states():
    assert [s.name for s in Status] == ["RUNNING", "COMPLETED", "FAILED", "CANCELLED"]


def test_workflows_filters_by_status_and_type(system):
    a = system.start(waits_for, "x", id="fa")
    b = system.start(short_child, 1, id="fb", test_mode=True)
    c = system.start(waits_for, "y", id="fc")
    c.signal("y")
    c.result(timeout=T)
    system.idle(timeout=T)
    assert sorted(w.id for w in system.workflows()) == ["fa", "fb", "fc"]
    assert sorted(w.id for w in system.workflows(status=Status.RUNNING)) == ["fa", "fb"]
    assert [w.id for w in system.workflows(status=Status.COMPLETED)] == ["fc"]
    assert sorted(w.id for w in system.workflows(type=waits_for)) == ["fa", "fc"]
    assert [w.id for w in system.workflows(status=Status.RUNNING, type=waits_for)] == ["fa"]
    assert [w.id for w in system.workflows(type=f"{__name__}:short_child")] == ["fb"]
    assert a.id == "fa" and b.id == "fb"


def test_idle_waits_for_a_running_procedure(system):
    ref = system.start(waits_on_one_gate)
    with pytest.raises(TimeoutError):
        system.idle(timeout=0.1)
    GATE.set()
    system.idle(timeout=T)
    assert ref.status() is Status.COMPLETED


@workflow
async def waits_on_one_gate() -> str:
    return await procedure(waits_for_gate, "one")


# -- §5: cancel ------------------------------------------------------------------------------------


@workflow
async def cancel_parent() -> str:
    try:
        await gather(spawn(waiting_child, "c1", id="cp-c1"), spawn(waiting_child, "c2", id="cp-c2"))
    finally:
        reducer(note, workflow_id(), "parent cleaned")
    return "no"


def test_cancel_runs_finally_and_reaches_every_child(system, db):
    ref = system.start(cancel_parent, id="cp")
    system.idle(timeout=T)
    ref.cancel("shutting the zone")
    with pytest.raises(Cancelled) as e:
        ref.result(timeout=T)
    assert e.value.reason == "shutting the zone"
    system.idle(timeout=T)
    assert app_events(db, "cp") == ["parent cleaned"]
    for kid in ("cp-c1", "cp-c2"):
        assert system.get(kid).status() is Status.CANCELLED
        assert app_events(db, kid) == [f"{kid[-2:]} cleaned"]
    assert ref.status() is Status.CANCELLED


@workflow
async def catches_and_goes_on() -> str:
    try:
        await signal("never")
    except Cancelled:
        reducer(note, workflow_id(), "caught")
    await timer("grace", after=1)
    return "finished after cancel"


def test_a_cancel_caught_by_the_workflow_lets_it_finish_its_own_way(system, clock, db):
    ref = system.start(catches_and_goes_on, id="cg")
    system.idle(timeout=T)
    ref.cancel()
    system.idle(timeout=T)
    assert app_events(db, "cg") == ["caught"]
    clock.advance(1)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == "finished after cancel"
    assert ref.status() is Status.COMPLETED


def test_cancel_of_a_procedure_wait_discards_its_result(system):
    ref = system.start(waits_on_one_gate)
    ref.cancel()
    with pytest.raises(Cancelled):
        ref.result(timeout=T)
    GATE.set()
    system.idle(timeout=T)
    assert ref.status() is Status.CANCELLED


# -- §5: test mode, debug calls, the clock ---------------------------------------------------------


@workflow
async def two_timers() -> list:
    got = []
    while len(got) < 2:
        ev = await select(timer("a", after=10), timer("b", after=20))
        got.append((ev.name, now()))
    return got


def test_test_mode_timers_fire_only_when_fired_by_name(system, clock):
    ref = system.start(two_timers, test_mode=True)
    system.idle(timeout=T)
    clock.advance(1000)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    with pytest.raises(TimerNotArmed) as e:
        ref.debug_fire_timer("c")
    assert sorted(e.value.armed) == ["a", "b"]
    assert "'a'" in str(e.value) and "'b'" in str(e.value)
    ref.debug_fire_timer("b")
    system.idle(timeout=T)
    ref.debug_fire_timer("a")
    t = clock.now()
    assert ref.result(timeout=T) == [("b", t), ("a", t)]


def test_a_virtual_clock_fires_timers_at_their_time_not_before(system, clock):
    ref = system.start(two_timers)
    system.idle(timeout=T)
    start = clock.now()
    clock.advance(9.5)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    clock.advance(0.5)
    system.idle(timeout=T)
    clock.advance(10)
    assert ref.result(timeout=T) == [("a", start + 10), ("a", start + 20)]


@workflow
async def subscribed(group: str) -> object:
    subscribe("orders", group)
    return await signal("orders")


def test_debug_send_signal_bypasses_subscription_filters_and_broadcast_respects_them(system):
    red = system.start(subscribed, "red", id="red")
    blue = system.start(subscribed, "blue", id="blue")
    system.idle(timeout=T)
    system.broadcast("orders", "red", "for red")
    assert red.result(timeout=T) == "for red"
    system.idle(timeout=T)
    assert blue.status() is Status.RUNNING
    blue.debug_send_signal("orders", "direct")
    assert blue.result(timeout=T) == "direct"


# -- §7: the wf command line -----------------------------------------------------------------------


def wf(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_wf_list_json_gives_each_workflow_the_fields_of_workflow_info(system, db, capsys):
    system.start(waits_for, "go", id="cli-a", test_mode=True)
    system.start(raises_here, "bad", id="cli-b")
    system.idle(timeout=T)
    code, out, err = wf(capsys, "list", "--db", db, "--json")
    assert code == 0, err
    rows = {r["id"]: r for r in json.loads(out)}
    assert set(rows) == {"cli-a", "cli-b"}
    a, b = rows["cli-a"], rows["cli-b"]
    assert {"id", "type", "status", "parent_id", "waiting_on", "created_at", "updated_at", "result",
            "error", "test_mode"} <= set(a)
    assert (a["status"], a["test_mode"], a["parent_id"]) == ("running", True, None)
    assert a["type"] == f"{__name__}:waits_for"
    assert b["status"] == "failed"
    assert "RuntimeError" in json.dumps(b["error"]) and "bad" in json.dumps(b["error"])
    code, out, _ = wf(capsys, "list", "--db", db, "--json", "--status", "failed")
    assert [r["id"] for r in json.loads(out)] == ["cli-b"]
    code, out, _ = wf(capsys, "list", "--db", db, "--json", "--type", "waits_for")
    assert [r["id"] for r in json.loads(out)] == ["cli-a"]


def test_wf_show_json_of_a_running_and_a_failed_workflow(system, db, capsys):
    system.start(waits_for, "go", id="show-a")
    system.start(raises_here, "bad news", id="show-b")
    system.idle(timeout=T)
    code, out, err = wf(capsys, "show", "show-a", "--db", db, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["id"] == "show-a" and data["status"] == "running"
    assert [a["name"] for a in data["waiting_on"]["arms"]] == ["go"]
    assert data["history"]
    code, out, err = wf(capsys, "show", "show-b", "--db", db)
    assert code == 0, err
    assert "failed" in out and "RuntimeError" in out and "bad news" in out


def test_wf_show_of_an_unknown_id_is_an_error_naming_it(system, db, capsys):
    code, out, err = wf(capsys, "show", "nobody-here", "--db", db)
    assert code != 0
    assert "nobody-here" in err and out == ""
    assert len(err.strip().splitlines()) == 1


def test_wf_fire_timer_of_a_timer_not_armed_lists_the_armed_ones(system, db, capsys):
    system.start(short_child, 1, id="cli-ft", test_mode=True)
    system.idle(timeout=T)
    code, out, err = wf(capsys, "fire-timer", "cli-ft", "nope", "--db", db)
    assert code != 0
    assert "nope" in err and "nap" in err


def test_wf_signal_with_a_name_never_awaited_warns_naming_the_awaited_ones(system, db, capsys):
    ref = system.start(signal_beats_timer_then_waits, id="cli-w")
    system.idle(timeout=T)
    code, out, err = wf(capsys, "signal", "cli-w", "og", "1", "--db", db)
    assert code == 0  # sent all the same: a newer version of the code may await it
    assert "'og'" in err and "'go'" in err and "'again'" in err
    code, out, err = wf(capsys, "signal", "cli-w", "go", "1", "--db", db)
    assert code == 0 and "warn" not in err.lower()
    system.idle(timeout=T)
    assert "signal 'again'" in ref.info().waiting_on


def test_wf_takes_its_database_from_wf_db(system, db, capsys, monkeypatch):
    system.start(waits_for, "go", id="env-a")
    system.idle(timeout=T)
    monkeypatch.setenv("WF_DB", db)
    code, out, err = wf(capsys, "list", "--json")
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)] == ["env-a"]


# -- §8: the async twins ---------------------------------------------------------------------------


def test_every_async_twin_answers_as_its_blocking_call_does(system, clock):
    async def main() -> None:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        ref = await system.start_async(waits_for, "go", id="aio-1", test_mode=False)
        assert ref.id == "aio-1"
        assert (await system.start_async(waits_for, "other", id="aio-1")) == ref
        pending = asyncio.ensure_future(ref.result_async(timeout=T))
        before = ticks
        while ticks < before + 5:
            await asyncio.sleep(0.01)
        assert not pending.done()  # the loop went on while result_async waited
        with pytest.raises(TimeoutError):
            await ref.result_async(timeout=0.05)
        await ref.signal_async("go", [1])
        assert await pending == [1]
        sub = await system.start_async(subscribed, "red", id="aio-sub")
        await system.idle_async(timeout=T)
        await system.broadcast_async("orders", "red", "hi")
        assert await sub.result_async(timeout=T) == "hi"
        c = await system.start_async(waiting_child, "aio", id="aio-c")
        await system.idle_async(timeout=T)
        await c.cancel_async("bye")
        with pytest.raises(Cancelled, match="bye"):
            await c.result_async(timeout=T)
        f = await system.start_async(raises_here, "async boom")
        with pytest.raises(WorkflowFailed, match="async boom"):
            await f.result_async(timeout=T)
        ticker.cancel()

    asyncio.run(main())


# -- §8: logging levels ------------------------------------------------------------------------------


def test_misuse_is_a_warning_and_a_failure_for_good_an_error(system, clock):
    with capture_logs() as logs:
        ref = system.start(signal_beats_timer_then_waits, id="log-a")
        system.idle(timeout=T)
        ref.signal("not-awaited", 1)
        bad = system.start(raises_here, "for good", id="log-b")
        with pytest.raises(WorkflowFailed):
            bad.result(timeout=T)
        system.idle(timeout=T)
    levels = {}
    for e in logs:
        levels.setdefault(e.get("workflow_id"), []).append((e["event"], e["log_level"]))
    warned = [ev for ev, lvl in levels.get("log-a", []) if lvl == "warning"]
    assert warned, levels.get("log-a")
    assert any(lvl == "error" for ev, lvl in levels.get("log-b", [])), levels.get("log-b")
    for e in logs:
        if e.get("workflow_id") in ("log-a", "log-b"):
            assert e.get("workflow_type", "").startswith(__name__)


# -- ordering, timers, a step's atomicity, subscriptions, test mode ---------------------------------


@workflow
async def picks_among_buffered() -> list:
    await signal("start")
    first = await select(signal("a"), signal("b"))
    second = await signal("a")
    return [first, second]


def test_a_select_over_buffered_signals_takes_the_earliest_and_leaves_the_other_buffered(system):
    ref = system.start(picks_among_buffered)
    ref.signal("b", "b1")
    ref.signal("a", "a1")
    ref.signal("start")
    assert ref.result(timeout=T) == [Event("b", "b1", "signal"), "a1"]


@workflow
async def empty_gather() -> list:
    return await gather()


def test_gather_of_nothing_is_an_empty_list(system):
    assert system.start(empty_gather).result(timeout=T) == []


@workflow
async def deadline_in_the_past() -> float:
    await timer("past", at=now() - 100)
    return now()


def test_a_timer_due_in_the_past_fires_at_once(system, clock):
    assert system.start(deadline_in_the_past).result(timeout=T) == clock.now()


@workflow
async def timedelta_timer() -> float:
    start = now()
    await timer("td", after=datetime.timedelta(minutes=2))
    return now() - start


def test_a_timer_after_a_timedelta(system, clock):
    ref = system.start(timedelta_timer)
    system.idle(timeout=T)
    clock.advance(119)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    clock.advance(1)
    assert ref.result(timeout=T) == 120


@workflow
async def sends_then_fails(target: str) -> None:
    send(target, "go", "from a good step")
    await timer("t", after=1)
    send(target, "go", "from a failing step")
    reducer(explodes)


@reducer
def explodes(db) -> None:
    raise RuntimeError("reducer down")


@workflow
async def receives_two() -> list:
    return [await signal("go"), await signal("go")]


def test_a_reducer_that_raises_rolls_back_the_step_s_signals_too(system, clock):
    target = system.start(receives_two, id="recv")
    sender = system.start(sends_then_fails, "recv", id="sender")
    system.idle(timeout=T)
    for _ in range(8):
        clock.advance(61)
        system.idle(timeout=T)
    assert sender.status() is Status.FAILED
    assert target.status() is Status.RUNNING
    assert "signal 'go'" in target.info().waiting_on  # only the first send arrived


@workflow
async def child_reports_info() -> list:
    return [info().parent_id, info().type, workflow_id(), info().test_mode]


@workflow
async def parent_asks_child_info() -> list:
    return await spawn(child_reports_info, id="info-child")


def test_info_in_a_child_names_its_parent(system):
    ref = system.start(parent_asks_child_info, id="info-parent")
    assert ref.result(timeout=T) == ["info-parent", f"{__name__}:child_reports_info", "info-child", False]


@workflow
async def parent_in_test_mode() -> int:
    return await spawn(short_child, 1, id="tm-child")


def test_a_child_of_a_test_mode_workflow_is_in_test_mode_too(system, clock):
    ref = system.start(parent_in_test_mode, test_mode=True)
    system.idle(timeout=T)
    kid = system.get("tm-child")
    assert kid.info().test_mode
    clock.advance(10)
    system.idle(timeout=T)
    assert kid.status() is Status.RUNNING
    kid.debug_fire_timer("nap")
    assert ref.result(timeout=T) == 2


@workflow
async def unsubscribes() -> list:
    subscribe("news", "a")
    got = [await signal("news")]
    unsubscribe("news", "a")
    got.append((await select(signal("news"), timer("t", after=5))).name)
    return got


def test_unsubscribe_stops_broadcasts(system, clock):
    ref = system.start(unsubscribes)
    system.idle(timeout=T)
    system.broadcast("news", "a", 1)
    system.idle(timeout=T)
    system.broadcast("news", "a", 2)
    system.idle(timeout=T)
    clock.advance(5)
    assert ref.result(timeout=T) == [1, "t"]


def test_start_takes_positional_arguments_only(system):
    with pytest.raises(TypeError):
        system.start(waits_for, name="x")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        system.start(waits_for)


# -- failures and cancels in select, in children and grandchildren; wf's refusals -----------------


@workflow
async def select_with_failing_procedure() -> str:
    try:
        await select(procedure(always_fails, "x"), timer("guard", after=100))
    except ProcedureFailed as e:
        await signal("after")
        return e.error_type
    return "no"


def test_a_failing_procedure_arm_raises_at_the_select_and_disarms_its_timer(system):
    ref = system.start(select_with_failing_procedure, test_mode=True)
    system.idle(timeout=T)
    assert "signal 'after'" in ref.info().waiting_on
    with pytest.raises(TimerNotArmed):
        ref.debug_fire_timer("guard")
    ref.signal("after")
    assert ref.result(timeout=T) == "KeyError"


@workflow
async def select_with_failing_child() -> str:
    try:
        await select(spawn(failing_child, "kid broke", id="sel-fail"), signal("never"))
    except ChildFailed as e:
        return f"{e.child_id}:{e.error_message}"
    return "no"


def test_a_failing_child_arm_raises_child_failed_at_the_select(system, clock):
    ref = system.start(select_with_failing_child)
    system.idle(timeout=T)
    clock.advance(1)
    assert ref.result(timeout=T) == "sel-fail:kid broke"


@workflow
async def awaits_cancelled_child() -> dict:
    try:
        await spawn(waiting_child, "x", id="to-cancel")
    except ChildFailed as e:
        return {"type": e.error_type, "msg": e.error_message}
    return {}


def test_a_child_cancelled_from_outside_is_child_failed_in_its_parent(system):
    ref = system.start(awaits_cancelled_child)
    system.idle(timeout=T)
    system.get("to-cancel").cancel("ops said so")
    got = ref.result(timeout=T)
    assert "Cancelled" in got["type"]
    assert "ops said so" in got["msg"]


@workflow
async def grandparent() -> int:
    return await spawn(middle, id="gp-middle")


@workflow
async def middle() -> int:
    return await spawn(waiting_child, "grandkid", id="gp-leaf")


def test_cancel_reaches_grandchildren(system, db):
    ref = system.start(grandparent)
    system.idle(timeout=T)
    ref.cancel()
    system.idle(timeout=T)
    for wid in ("gp-middle", "gp-leaf"):
        assert system.get(wid).status() is Status.CANCELLED
    assert app_events(db, "gp-leaf") == ["grandkid cleaned"]


def test_debug_fire_timer_fires_an_armed_timer_of_a_workflow_not_in_test_mode(system, clock):
    ref = system.start(two_timers)
    system.idle(timeout=T)
    ref.debug_fire_timer("b")
    system.idle(timeout=T)
    t = clock.now()
    clock.advance(10)
    assert ref.result(timeout=T) == [("b", t), ("a", t + 10)]


class Odd(Exception):
    def __init__(self, a, b):
        super().__init__(f"odd {a} {b}")
        self.lock = threading.Lock()  # cannot be pickled


@workflow
async def raises_odd() -> None:
    await timer("t", after=0)
    raise Odd(1, 2)


def test_an_error_that_cannot_be_pickled_still_fails_the_workflow_with_its_text(system):
    ref = system.start(raises_odd)
    with pytest.raises(WorkflowFailed) as e:
        ref.result(timeout=T)
    assert e.value.error_type.endswith("Odd")
    assert e.value.error_message == "odd 1 2"
    assert "raise Odd(1, 2)" in e.value.traceback


@workflow
async def returns_a_lock() -> object:
    await timer("t", after=0)
    return threading.Lock()


def test_a_result_that_cannot_be_pickled_fails_the_workflow_clearly(system):
    ref = system.start(returns_a_lock)
    with pytest.raises(WorkflowFailed) as e:
        ref.result(timeout=T)
    assert "lock" in (e.value.error_message + e.value.error_type).lower()
    system.idle(timeout=T)
    assert ref.status() is Status.FAILED


def test_a_failure_is_read_back_whole_after_a_restart(db, clock):
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(raises_here, "still broken", id="fail-restart")
        with pytest.raises(WorkflowFailed) as first:
            ref.result(timeout=T)
    with ActorSystem(db, clock=clock) as system:
        with pytest.raises(WorkflowFailed) as again:
            system.get("fail-restart").result(timeout=T)
    a, b = first.value, again.value
    assert (a.workflow_id, a.error_type, a.error_message, a.traceback) == (
        b.workflow_id, b.error_type, b.error_message, b.traceback)
    assert "still broken" in str(b)


def test_result_with_timeout_zero_answers_a_finished_workflow(system):
    ref = system.start(empty_gather)
    ref.result(timeout=T)
    assert ref.result(timeout=0) == []


def test_wf_list_json_of_an_empty_database_is_an_empty_list(system, db, capsys):
    code, out, err = wf(capsys, "list", "--db", db, "--json")
    assert code == 0, err
    assert json.loads(out) == []


def test_wf_list_of_a_missing_file_is_an_error_and_creates_nothing(tmp_path, capsys):
    path = tmp_path / "typo.db"
    code, out, err = wf(capsys, "list", "--db", str(path))
    assert code != 0
    assert str(path) in err or "typo.db" in err
    assert not path.exists()


def test_wf_signal_and_cancel_of_an_unknown_id_name_it(system, db, capsys):
    for argv in (["signal", "ghost", "go", "1"], ["cancel", "ghost"], ["fire-timer", "ghost", "t"]):
        code, out, err = wf(capsys, *argv, "--db", db)
        assert code != 0, argv
        assert "ghost" in err, (argv, err)


def test_wf_cancel_of_a_finished_workflow_says_it_is_finished(system, db, capsys):
    ref = system.start(empty_gather, id="fin")
    ref.result(timeout=T)
    code, out, err = wf(capsys, "cancel", "fin", "--db", db)
    assert code != 0
    assert "fin" in err and "completed" in err


# -- cancels, detached children, recovery, few live actors, retries, local functions --------------


@workflow
async def swallows_exceptions() -> str:
    try:
        await signal("never")
    except Exception:
        return "swallowed"
    return "no"


def test_except_exception_does_not_swallow_a_cancel(system):
    ref = system.start(swallows_exceptions)
    system.idle(timeout=T)
    ref.cancel()
    with pytest.raises(Cancelled):
        ref.result(timeout=T)
    assert ref.status() is Status.CANCELLED


@workflow
async def gathers_one_signal_twice() -> list:
    return await gather(signal("x"), signal("x"))


def test_gather_of_one_signal_twice(system):
    ref = system.start(gathers_one_signal_twice)
    ref.signal("x", 1)
    ref.signal("x", 2)
    assert ref.result(timeout=T) == [1, 2]


def test_a_signal_payload_is_taken_as_it_was_at_the_call(system):
    ref = system.start(waits_for, "go")
    payload = {"items": [1]}
    ref.signal("go", payload)
    payload["items"].append(2)
    assert ref.result(timeout=T) == {"items": [1]}


@workflow
async def no_filter_subscriber() -> object:
    subscribe("weather")
    return await signal("weather")


def test_a_broadcast_with_no_filter_reaches_a_subscription_with_none(system):
    ref = system.start(no_filter_subscriber)
    system.idle(timeout=T)
    system.broadcast("weather", None, "rain")
    assert ref.result(timeout=T) == "rain"


@procedure(retry=RetryPolicy(maximum_attempts=1))
def fails_twice_then_works(tag: str) -> str:
    RAN.append(tag)
    if len(RAN) < 3:
        raise ConnectionError("flaky")
    return f"ok after {len(RAN)}"


@workflow
async def overrides_retry() -> str:
    return await procedure(fails_twice_then_works, "t", retry=RetryPolicy(maximum_attempts=3, initial_interval=1.0))


def test_a_call_s_retry_overrides_the_decorator_s(system, clock):
    ref = system.start(overrides_retry)
    for _ in range(3):
        system.idle(timeout=T)
        clock.advance(10)
    assert ref.result(timeout=T) == "ok after 3"


def test_a_workflow_is_recovered_by_a_process_that_never_imported_its_module(tmp_path):
    (tmp_path / "shopmod.py").write_text(textwrap.dedent("""
        from workflows import workflow, timer, signal

        @workflow
        async def shop(n: int) -> int:
            got = await signal("pay")
            await timer("ship", after=0.2)
            return n + got
    """))
    db = str(tmp_path / "shop.db")
    first = textwrap.dedent(f"""
        from actors import ActorSystem
        import shopmod
        with ActorSystem({db!r}) as s:
            s.start(shopmod.shop, 1, id="order-1")
    """)
    second = textwrap.dedent(f"""
        import sys
        from actors import ActorSystem
        with ActorSystem({db!r}) as s:
            r = s.get("order-1")
            r.signal("pay", 41)
            print(r.result(timeout=30))
            assert "shopmod" in sys.modules
    """)

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.getcwd()]))
    for code in (first, second):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                              cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert done.stdout == "42\n"


@workflow
async def parent_awaits_detached() -> int:
    return await spawn(short_child, 7, id="det-awaited", detached=True)


def test_a_detached_child_s_result_reaches_the_parent_that_awaits_it(system, clock):
    a = system.start(parent_awaits_detached, id="pad-1")
    system.idle(timeout=T)
    clock.advance(5)
    assert a.result(timeout=T) == 8
    system.get("det-awaited").result(timeout=T)


@workflow
async def parent_awaits_detached_2() -> int:
    return await spawn(short_child, 7, id="det-left", detached=True)


def test_cancelling_a_parent_leaves_its_detached_child_running(system, clock):
    ref = system.start(parent_awaits_detached_2)
    system.idle(timeout=T)
    ref.cancel()
    with pytest.raises(Cancelled):
        ref.result(timeout=T)
    system.idle(timeout=T)
    kid = system.get("det-left")
    assert kid.status() is Status.RUNNING
    clock.advance(5)
    assert kid.result(timeout=T) == 8


@workflow
async def two_children_race() -> str:
    ev = await select(spawn(short_child, 1, id="race-fast"), spawn(waiting_child, "slow", id="race-slow"))
    return f"{ev.name}:{ev.value}:{ev.kind}"


def test_a_race_of_two_children_cancels_the_loser(system, clock, db):
    ref = system.start(two_children_race)
    system.idle(timeout=T)
    clock.advance(5)
    assert ref.result(timeout=T) == "short_child:2:child"
    system.idle(timeout=T)
    assert system.get("race-slow").status() is Status.CANCELLED
    assert app_events(db, "race-slow") == ["slow cleaned"]


@workflow
async def cleanup_spawns_a_child() -> str:
    try:
        await signal("never")
    finally:
        await spawn(short_child, 1, id="cleanup-kid")
    return "no"


def test_a_cancelled_workflow_s_finally_may_spawn_and_await_a_child(system, clock):
    ref = system.start(cleanup_spawns_a_child)
    system.idle(timeout=T)
    ref.cancel()
    system.idle(timeout=T)
    kid = system.get("cleanup-kid")
    assert kid.status() is Status.RUNNING
    clock.advance(5)
    with pytest.raises(Cancelled):
        ref.result(timeout=T)
    assert kid.result(timeout=T) == 2


def test_a_test_mode_timer_due_while_the_process_was_down_still_waits_to_be_fired(db, clock):
    with ActorSystem(db, clock=clock) as system:
        system.start(short_child, 1, id="tm-down", test_mode=True)
        system.idle(timeout=T)
    clock.advance(1000)
    with ActorSystem(db, clock=clock) as system:
        ref = system.get("tm-down")
        system.idle(timeout=T)
        assert ref.status() is Status.RUNNING
        assert "timer 'nap'" in ref.info().waiting_on
        ref.debug_fire_timer("nap")
        assert ref.result(timeout=T) == 2


def test_more_workflows_than_live_actors_each_answer_their_signals(db, clock):
    with ActorSystem(db, clock=clock, max_live=1, passivate_after=0) as system:
        refs = [system.start(receives_two, id=f"many-{i}") for i in range(4)]
        system.idle(timeout=T)
        clock.advance(120)
        for r in reversed(refs):
            r.signal("go", r.id)
        for r in refs:
            r.signal("go", 2)
        assert [r.result(timeout=T) for r in refs] == [[r.id, 2] for r in refs]


@procedure(retry=RetryPolicy(maximum_attempts=5, initial_interval=10.0))
def keeps_failing(tag: str) -> None:
    RAN.append(tag)
    raise ConnectionError("down")


@workflow
async def retries_in_the_background() -> None:
    await procedure(keeps_failing, "r")


def test_a_cancel_during_a_procedure_s_backoff_stops_its_retries(system, clock):
    ref = system.start(retries_in_the_background)
    system.idle(timeout=T)
    assert RAN == ["r"]
    ref.cancel()
    with pytest.raises(Cancelled):
        ref.result(timeout=T)
    for _ in range(5):
        clock.advance(100)
        system.idle(timeout=T)
    assert RAN == ["r"]


def test_workflows_takes_a_status_by_its_name_too(system):
    system.start(waits_for, "x", id="by-name")
    system.idle(timeout=T)
    assert [w.id for w in system.workflows(status="running")] == ["by-name"]
    assert system.workflows(status="completed") == []


@workflow
async def uses_given_ones(price_fn, note_fn, x: int) -> int:
    price = await procedure(price_fn, x)
    reducer(note_fn, workflow_id(), f"price {price}")
    return price


def test_a_procedure_and_a_reducer_defined_in_a_function_work_in_that_process(system, db):
    @procedure
    def local_price(x: int) -> int:
        return x * 100

    @reducer
    def local_note(db, wf: str, text: str) -> None:
        db["app_events"].insert({"wf": wf, "text": text}, pk="id", alter=True)

    assert system.start(uses_given_ones, local_price, local_note, 2, id="local-fns").result(timeout=T) == 200
    assert app_events(db, "local-fns") == ["price 200"]


@workflow
async def broadcasts_from_a_workflow(zone: str) -> str:
    broadcast("orders", zone, f"from {workflow_id()}")
    await timer("t", after=1)
    return "sent"


def test_a_workflow_s_broadcast_reaches_the_subscribers_when_its_step_commits(system, clock):
    red = system.start(subscribed, "red", id="b-red")
    blue = system.start(subscribed, "blue", id="b-blue")
    system.idle(timeout=T)
    system.start(broadcasts_from_a_workflow, "red", id="caster")
    assert red.result(timeout=T) == "from caster"
    system.idle(timeout=T)
    assert blue.status() is Status.RUNNING


def test_a_select_s_timer_keeps_its_due_time_across_a_restart(db, clock):
    with ActorSystem(db, clock=clock) as system:
        system.start(select_timer_each_turn, id="sel-restart")
        system.idle(timeout=T)
    clock.advance(6)
    with ActorSystem(db, clock=clock) as system:
        ref = system.get("sel-restart")
        system.idle(timeout=T)
        assert ref.status() is Status.RUNNING
        clock.advance(4)  # 10 s after the select started, not after the restart
        assert ref.result(timeout=T) == 0


KEYS: list[str] = []


@procedure(retry=RetryPolicy(maximum_attempts=3, initial_interval=1.0))
def charges_once(amount: int) -> int:
    KEYS.append(idempotency_key())
    if len(KEYS) % 3:
        raise ConnectionError("gateway busy")
    return amount


@workflow
async def charges_twice() -> list:
    return [await procedure(charges_once, 5), await procedure(charges_once, 6)]


def test_a_procedure_keeps_its_idempotency_key_across_retries_and_each_call_has_its_own(system, clock):
    KEYS.clear()
    ref = system.start(charges_twice)
    for _ in range(6):
        system.idle(timeout=T)
        clock.advance(10)
    assert ref.result(timeout=T) == [5, 6]
    assert len(KEYS) == 6
    assert len(set(KEYS[:3])) == 1 and len(set(KEYS[3:])) == 1
    assert KEYS[0] != KEYS[3]


@workflow
async def gather_child_fails_while_a_procedure_retries() -> str:
    try:
        await gather(procedure(keeps_failing, "g"), spawn(failing_child, "first"))
    except ChildFailed:
        await signal("done")
        return "caught"
    return "no"


def test_a_procedure_gather_cancelled_tries_no_more(system, clock):
    ref = system.start(gather_child_fails_while_a_procedure_retries)
    system.idle(timeout=T)
    assert RAN == ["g"]  # its first attempt failed; the next is due in 10 s
    clock.advance(1)  # the child fails first
    system.idle(timeout=T)
    assert "signal 'done'" in ref.info().waiting_on
    for _ in range(5):
        clock.advance(100)
        system.idle(timeout=T)
    assert RAN == ["g"]
    ref.signal("done")
    assert ref.result(timeout=T) == "caught"
