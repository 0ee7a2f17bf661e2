"""SPEC §5, §7 and §9 to §13 read as a user of Temporal, DBOS or Akka reads them: retention and
history, talking to a running workflow (published values, asks and replies), schedules, metrics,
procedure limits, a clean SIGTERM and the `wf` commands of these sections.

Each test that takes ``system`` runs on SQLite and on PostgreSQL (the ``db`` fixture of
``conftest.py``), under a VirtualClock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import os
import signal as os_signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from actors import (
    ActorSystem,
    AskFailed,
    HistoryEntry,
    ScheduleInfo,
    Status,
    SystemClosed,
    UnknownWorkflow,
    WorkflowNotRunning,
    WorkflowPruned,
)
from actors.cli import main
from actors.testing import VirtualClock
from workflows import (
    Event,
    Request,
    RetryPolicy,
    info,
    procedure,
    publish,
    reducer,
    reply,
    request,
    select,
    signal,
    timer,
    workflow,
)

from .runtime_support import T

ROOT = Path(__file__).resolve().parents[2]
GATE = threading.Event()
RAN: list[str] = []
RAN_LOCK = threading.Lock()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    GATE.clear()
    RAN.clear()


def wf(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- flows -----------------------------------------------------------------------------------------


@workflow
async def counter(n: int) -> int:
    """Publishes its count after each 'tick' signal; ends after n ticks."""
    total = 0
    for _ in range(n):
        await signal("tick")
        total += 1
        publish("count", total)
    return total


@workflow
async def quick(x: int) -> int:
    return x * 2


@workflow
async def naps(seconds: float) -> str:
    await timer("nap", after=seconds)
    return "rested"


@workflow
async def teller(balance: int) -> int:
    """Answers 'withdraw' asks until 'close'."""
    publish("balance", balance)
    while True:
        match await select(request("withdraw"), signal("close")):
            case Event("withdraw", req):
                if req.payload > balance:
                    reply(req, error=ValueError(f"insufficient funds: {balance} < {req.payload}"))
                else:
                    balance -= req.payload
                    publish("balance", balance)
                    reply(req, balance)
            case Event("close"):
                return balance


@workflow
async def takes_one_request_and_ends() -> str:
    req = await request("q")
    return f"ignored {req.payload}"


@workflow
async def echo_request() -> tuple[str, object, str, str]:
    req = await request("q")
    reply(req, "ok")
    return (req.name, req.payload, req.id, type(req).__name__)


@workflow
async def select_request_kind() -> str:
    ev = await select(request("q"), timer("t", after=100))
    assert isinstance(ev.value, Request)
    reply(ev.value, ev.kind)
    return ev.kind


@workflow
async def publishes_twice_in_one_step() -> None:
    publish("k", 1)
    publish("k", 2)
    await signal("end")


@workflow
async def when_scheduled() -> float | None:
    return info().scheduled_at


@workflow
async def sleeps_long() -> str:
    await timer("long", after=1000)
    return "woke"


# -- §10: retention and history --------------------------------------------------------------------


def test_a_finished_workflow_is_kept_for_retention_seconds_then_deleted(db, clock):
    with ActorSystem(db, clock=clock, retention=100) as s:
        ref = s.start(quick, 2, id="q")
        assert ref.result(timeout=T) == 4
        clock.advance(99)
        s.idle(timeout=T)
        assert s.get("q").result(timeout=T) == 4  # still there
        clock.advance(2)
        s.idle(timeout=T)
        with pytest.raises(UnknownWorkflow, match="pruned"):
            s.get("q")
        with pytest.raises(UnknownWorkflow, match="pruned"):
            ref.result(timeout=T)


def test_retention_none_keeps_a_finished_workflow_for_years(db, clock):
    with ActorSystem(db, clock=clock, retention=None) as s:
        s.start(quick, 2, id="q").result(timeout=T)
        clock.advance(20 * 365 * 86400)
        s.idle(timeout=T)
        assert s.get("q").result(timeout=T) == 4
        assert s.prune(older_than=10 * 365 * 86400) == 1  # prune by hand still works


def test_retention_never_touches_a_running_workflow(db, clock):
    with ActorSystem(db, clock=clock, retention=10) as s:
        ref = s.start(counter, 2, id="c")
        s.idle(timeout=T)
        clock.advance(10_000)
        s.idle(timeout=T)
        assert ref.status() is Status.RUNNING


def test_prune_says_how_many_and_leaves_the_running_and_the_young(system, clock):
    for i in range(3):
        system.start(quick, i, id=f"old-{i}").result(timeout=T)
    system.start(counter, 1, id="running")
    system.idle(timeout=T)
    clock.advance(3600)
    system.start(quick, 9, id="young").result(timeout=T)
    assert system.prune(older_than=1800) == 3
    assert system.prune(older_than=1800) == 0
    assert {w.id for w in system.workflows()} == {"running", "young"}
    assert system.prune(older_than=0) == 1  # 0: every finished workflow
    assert [w.id for w in system.workflows()] == ["running"]


@pytest.mark.parametrize("bad", ["1h", None, [1]])
def test_prune_with_something_that_is_no_number_is_a_type_error(system, bad):
    with pytest.raises(TypeError):
        system.prune(older_than=bad)


def test_prune_with_a_negative_age_is_a_value_error(system):
    with pytest.raises(ValueError):
        system.prune(older_than=-1)


def test_prune_after_shutdown_is_system_closed(db, clock):
    s = ActorSystem(db, clock=clock)
    s.shutdown()
    with pytest.raises(SystemClosed):
        s.prune(older_than=0)


def test_get_of_a_pruned_workflow_says_it_may_have_been_pruned(system):
    system.start(quick, 1, id="gone").result(timeout=T)
    assert system.prune(older_than=0) == 1
    with pytest.raises(UnknownWorkflow) as e:
        system.get("gone")
    assert "gone" in str(e.value) and "pruned" in str(e.value)


def test_wf_prune_older_than_deletes_and_says_how_many(db, clock, capsys):
    with ActorSystem(db, clock=clock) as s:
        for i in range(2):
            s.start(quick, i, id=f"p-{i}").result(timeout=T)
        s.start(counter, 1, id="running")
        s.idle(timeout=T)
        clock.advance(7200)
        code, out, err = wf(capsys, "prune", "--older-than", "1h", "--db", db)
        assert code == 0, err
        assert "2" in out
        assert {w.id for w in s.workflows()} == {"running"}


def test_wf_prune_with_a_bad_age_is_an_error(tmp_path, capsys):
    path = str(tmp_path / "wf.db")
    with ActorSystem(path, clock=VirtualClock()):
        pass
    with pytest.raises(SystemExit) as e:
        main(["prune", "--older-than", "soon", "--db", path])
    assert e.value.code != 0


@workflow
async def stepper(n: int) -> str:
    for _ in range(n):
        got = await signal("s")
        publish("last", got)
    return "done"


def test_history_is_every_step_in_order_and_how_it_ended(system):
    ref = system.start(stepper, 70, id="h")  # more steps than a workflow's row describes
    system.idle(timeout=T)
    for i in range(70):
        ref.signal("s", i)
    assert ref.result(timeout=T) == "done"
    hist = ref.history()
    assert all(isinstance(h, HistoryEntry) for h in hist)
    assert [h.position for h in hist] == list(range(len(hist)))
    steps = [h.step for h in hist if h.step is not None]
    assert steps == sorted(steps) and len(steps) == len(set(steps))
    assert len(steps) == 71  # the first step, and one per signal
    assert hist[-1].event == "completed"
    ats = [h.at for h in hist]
    assert ats == sorted(ats)


def test_history_pages_back_with_limit_and_before(system):
    ref = system.start(stepper, 12, id="h")
    system.idle(timeout=T)
    for i in range(12):
        ref.signal("s", i)
    ref.result(timeout=T)
    whole = ref.history()
    last = ref.history(limit=5)
    assert last == whole[-5:]
    before = ref.history(limit=5, before=last[0].position)
    assert before == whole[-10:-5]
    assert ref.history(limit=0) == []
    assert ref.history(before=0) == []
    pages: list[HistoryEntry] = []
    page = ref.history(limit=4)
    while page:
        pages = page + pages
        page = ref.history(limit=4, before=page[0].position)
    assert pages == whole


def test_history_says_what_a_step_armed_published_and_replied(system):
    ref = system.start(teller, 10, id="t")
    system.idle(timeout=T)
    assert ref.ask("withdraw", 3, timeout=T) == 7
    text = json.dumps([dataclasses.asdict(h) for h in ref.history()])
    assert "balance" in text  # published
    assert "replied" in text


def test_history_limit_keeps_the_newest_steps(db, clock):
    with ActorSystem(db, clock=clock, history_limit=3) as s:
        ref = s.start(stepper, 40, id="h")
        s.idle(timeout=T)
        for i in range(40):
            ref.signal("s", i)
        ref.result(timeout=T)
        hist = ref.history()
        steps = [h.step for h in hist if h.step is not None]
        assert len(steps) <= 3
        assert hist[-1].event == "completed"


@pytest.mark.parametrize("bad", [0, -1, "3", 2.5, True])
def test_history_limit_must_be_a_positive_int(tmp_path, bad):
    with pytest.raises((TypeError, ValueError)):
        ActorSystem(str(tmp_path / "x.db"), history_limit=bad)


def test_history_of_bad_pages_is_refused(system):
    ref = system.start(quick, 1, id="q")
    ref.result(timeout=T)
    with pytest.raises(ValueError):
        ref.history(limit=-1)
    with pytest.raises(TypeError):
        ref.history(limit="5")
    with pytest.raises(TypeError):
        ref.history(before=1.5)


def test_history_of_a_pruned_workflow_is_unknown_workflow(system):
    ref = system.start(quick, 1, id="q")
    ref.result(timeout=T)
    system.prune(older_than=0)
    with pytest.raises(UnknownWorkflow):
        ref.history()


def test_wf_show_history_n_shows_the_newest_n_events(system, db, capsys):
    ref = system.start(stepper, 10, id="h")
    system.idle(timeout=T)
    for i in range(10):
        ref.signal("s", i)
    ref.result(timeout=T)
    code, out, err = wf(capsys, "show", "h", "--db", db, "--history", "3", "--json")
    assert code == 0, err
    shown = json.loads(out)["history"]
    assert len(shown) == 3
    assert shown[-1]["event"] == "completed"


def test_a_pruned_id_is_refused_by_start_with_workflow_pruned_naming_when_it_ended(system, clock):
    system.start(quick, 1, id="once").result(timeout=T)
    ended = system.get("once").info().updated_at
    system.prune(older_than=0)
    with pytest.raises(WorkflowPruned) as e:
        system.start(quick, 1, id="once")
    assert isinstance(e.value, UnknownWorkflow)
    when = datetime.datetime.fromtimestamp(ended, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
    assert when in str(e.value)
    assert e.value.ended_at == pytest.approx(ended)
    ref = system.start(quick, 5, id="once", reuse_id=True)
    assert ref.result(timeout=T) == 10


def test_a_tombstone_lasts_id_retention_seconds(db, clock):
    with ActorSystem(db, clock=clock, id_retention=100) as s:
        s.start(quick, 1, id="once").result(timeout=T)
        s.prune(older_than=0)
        with pytest.raises(WorkflowPruned):
            s.start(quick, 1, id="once")
        clock.advance(101)
        s.idle(timeout=T)
        assert s.start(quick, 2, id="once").result(timeout=T) == 4


def test_a_tombstone_outlives_a_restart(db, clock):
    with ActorSystem(db, clock=clock) as s:
        s.start(quick, 1, id="once").result(timeout=T)
        s.prune(older_than=0)
    with ActorSystem(db, clock=clock) as s, pytest.raises(WorkflowPruned):
        s.start(quick, 1, id="once")


def test_reuse_id_of_a_running_workflow_returns_it_and_starts_nothing(system):
    ref = system.start(counter, 1, id="c")
    again = system.start(counter, 1, id="c", reuse_id=True)
    assert again == ref and len(system.workflows()) == 1


# -- §12: published values -------------------------------------------------------------------------


def test_published_before_any_publish_is_a_key_error_at_once(system):
    ref = system.start(counter, 2, id="c")
    system.idle(timeout=T)
    with pytest.raises(KeyError):
        ref.published("count")
    with pytest.raises(KeyError):
        ref.published("count", timeout=None)


def test_published_with_a_timeout_and_nothing_published_is_a_timeout_error(system):
    ref = system.start(counter, 2, id="c")
    system.idle(timeout=T)
    with pytest.raises(TimeoutError):
        ref.published("count", timeout=0.05)
    with pytest.raises(TimeoutError):
        ref.published("count", timeout=0)


def test_published_waits_for_the_first_value(system):
    ref = system.start(counter, 2, id="c")
    system.idle(timeout=T)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(ref.published("count", timeout=T)))
    reader.start()
    ref.signal("tick")
    reader.join(T)
    assert got == [1]


def test_published_the_last_write_wins_within_a_step_and_across_steps(system):
    ref = system.start(publishes_twice_in_one_step, id="p")
    system.idle(timeout=T)
    assert ref.published("k") == 2
    ref2 = system.start(counter, 3, id="c")
    system.idle(timeout=T)
    for _ in range(3):
        ref2.signal("tick")
    ref2.result(timeout=T)
    assert ref2.published("count") == 3


def test_published_is_read_after_the_workflow_finished_and_after_a_restart(db, clock):
    with ActorSystem(db, clock=clock) as s:
        ref = s.start(counter, 1, id="c")
        s.idle(timeout=T)
        ref.signal("tick")
        assert ref.result(timeout=T) == 1
        assert ref.published("count") == 1
    with ActorSystem(db, clock=clock) as s:
        assert s.get("c").published("count") == 1
        assert s.get("c").info().published == {"count": 1}


def test_published_is_read_while_the_workflow_is_passivated(db, clock):
    with ActorSystem(db, clock=clock, passivate_after=0.0) as s:
        ref = s.start(counter, 3, id="c")
        s.idle(timeout=T)
        ref.signal("tick")
        s.idle(timeout=T)
        assert ref.published("count") == 1
        assert ref.status() is Status.RUNNING


def test_workflow_info_published_holds_keys_and_values(system):
    ref = system.start(teller, 10, id="t")
    system.idle(timeout=T)
    assert ref.info().published == {"balance": 10}
    assert [w.published for w in system.workflows()] == [{"balance": 10}]
    q = system.start(quick, 1, id="q")
    q.result(timeout=T)
    assert q.info().published == {}


def test_published_of_a_key_that_is_no_string_is_a_type_error(system):
    ref = system.start(counter, 1, id="c")
    with pytest.raises(TypeError):
        ref.published(3)  # type: ignore[arg-type]


def test_published_with_a_negative_timeout_is_a_value_error(system):
    ref = system.start(counter, 1, id="c")
    with pytest.raises(ValueError):
        ref.published("count", timeout=-1)


def test_published_after_shutdown_is_system_closed(db, clock):
    s = ActorSystem(db, clock=clock)
    ref = s.start(counter, 1, id="c")
    s.idle(timeout=T)
    s.shutdown()
    with pytest.raises(SystemClosed):
        ref.published("count")


def test_published_of_a_pruned_workflow_is_unknown_workflow(system):
    ref = system.start(counter, 1, id="c")
    system.idle(timeout=T)
    ref.signal("tick")
    ref.result(timeout=T)
    system.prune(older_than=0)
    with pytest.raises(UnknownWorkflow):
        ref.published("count")


def test_published_async_answers_as_published(system):
    ref = system.start(counter, 2, id="c")
    system.idle(timeout=T)

    async def go() -> object:
        with pytest.raises(KeyError):
            await ref.published_async("count")
        waiting = asyncio.ensure_future(ref.published_async("count", timeout=T))
        await asyncio.sleep(0)
        await ref.signal_async("tick")
        return await asyncio.wait_for(waiting, T)

    assert asyncio.run(go()) == 1


def test_wf_show_lists_the_published_values(system, db, capsys):
    system.start(teller, 42, id="t")
    system.idle(timeout=T)
    code, out, err = wf(capsys, "show", "t", "--db", db, "--json")
    assert code == 0, err
    assert json.loads(out)["published"] == {"balance": 42}
    code, out, _ = wf(capsys, "show", "t", "--db", db)
    assert "balance" in out and "42" in out


# -- §12: asks -------------------------------------------------------------------------------------


def test_ask_returns_the_reply_and_the_request_carries_name_payload_and_id(system):
    ref = system.start(echo_request, id="e")
    system.idle(timeout=T)
    assert ref.ask("q", {"x": 1}, timeout=T, ask_id="my-ask") == "ok"
    assert ref.result(timeout=T) == ("q", {"x": 1}, "my-ask", "Request")


def test_a_request_arm_of_select_wins_as_an_event_of_kind_request(system):
    ref = system.start(select_request_kind, id="s")
    system.idle(timeout=T)
    assert ref.ask("q", timeout=T) == "request"
    assert ref.result(timeout=T) == "request"


def test_an_ask_refused_with_an_error_raises_ask_failed_carrying_it(system):
    ref = system.start(teller, 10, id="t")
    system.idle(timeout=T)
    with pytest.raises(AskFailed) as e:
        ref.ask("withdraw", 100, timeout=T)
    assert isinstance(e.value.error, ValueError)
    assert "insufficient funds: 10 < 100" in str(e.value)
    assert ref.ask("withdraw", 4, timeout=T) == 6  # the workflow goes on


def test_an_ask_of_a_workflow_that_ends_without_replying_raises_workflow_not_running(system):
    ref = system.start(takes_one_request_and_ends, id="w")
    system.idle(timeout=T)
    with pytest.raises(WorkflowNotRunning):
        ref.ask("q", 1, timeout=T)
    assert ref.result(timeout=T) == "ignored 1"


def test_an_ask_of_a_finished_workflow_raises_workflow_not_running(system):
    ref = system.start(quick, 1, id="q")
    ref.result(timeout=T)
    with pytest.raises(WorkflowNotRunning):
        ref.ask("anything", timeout=T)


def test_an_ask_of_a_workflow_that_finishes_while_asked_is_workflow_not_running(system):
    ref = system.start(teller, 10, id="t")
    system.idle(timeout=T)
    got: list[BaseException] = []

    def ask() -> None:
        try:
            ref.ask("deposit", 5, timeout=T)  # never awaited by the teller
        except BaseException as e:  # noqa: BLE001
            got.append(e)

    asker = threading.Thread(target=ask)
    asker.start()
    system.idle(timeout=T)
    ref.signal("close")
    asker.join(T)
    assert not asker.is_alive()
    assert len(got) == 1 and isinstance(got[0], WorkflowNotRunning), got


def test_an_ask_with_a_timeout_raises_timeout_error_and_the_same_ask_id_gets_the_reply_later(system):
    ref = system.start(teller, 10, id="t")
    system.idle(timeout=T)
    with pytest.raises(TimeoutError):
        ref.ask("deposit", 5, timeout=0.05, ask_id="d-1")
    with pytest.raises(TimeoutError):
        ref.ask("deposit", 5, timeout=0, ask_id="d-1")


def test_an_ask_asked_again_with_its_ask_id_returns_the_recorded_reply_without_asking_twice(db, clock):
    with ActorSystem(db, clock=clock) as s:
        ref = s.start(teller, 10, id="t")
        s.idle(timeout=T)
        assert ref.ask("withdraw", 3, ask_id="a1", timeout=T) == 7
        assert ref.ask("withdraw", 3, ask_id="a1", timeout=T) == 7
        assert ref.published("balance") == 7
    with ActorSystem(db, clock=clock) as s:
        ref = s.get("t")
        assert ref.ask("withdraw", 3, ask_id="a1", timeout=T) == 7  # after a restart too
        s.idle(timeout=T)
        assert ref.published("balance") == 7  # withdrawn once


def test_an_ask_made_before_a_restart_is_answered_after_it(db, clock):
    with ActorSystem(db, clock=clock) as s:
        ref = s.start(stepper, 1, id="st")  # does not take asks yet
        s.idle(timeout=T)
        with pytest.raises(TimeoutError):
            ref.ask("q", 1, ask_id="later", timeout=0.05)
    with ActorSystem(db, clock=clock) as s:
        s.idle(timeout=T)
        assert s.get("st").status() is Status.RUNNING


def test_an_ask_of_an_unknown_id_is_unknown_workflow(system):
    system.start(quick, 1, id="q").result(timeout=T)
    ref = system.get("q")
    system.prune(older_than=0)
    with pytest.raises(UnknownWorkflow):
        ref.ask("q", timeout=T)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"name": 3}, TypeError),
        ({"name": ""}, TypeError),
        ({"name": "q", "timeout": -1}, ValueError),
        ({"name": "q", "timeout": "5"}, TypeError),
        ({"name": "q", "ask_id": 7}, TypeError),
    ],
)
def test_an_ask_with_wrong_arguments_is_refused_before_it_is_sent(system, kwargs, error):
    ref = system.start(echo_request, id="e")
    system.idle(timeout=T)
    with pytest.raises(error):
        ref.ask(**kwargs)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING  # nothing reached it


def test_an_ask_after_shutdown_is_system_closed(db, clock):
    s = ActorSystem(db, clock=clock)
    ref = s.start(echo_request, id="e")
    s.idle(timeout=T)
    s.shutdown()
    with pytest.raises(SystemClosed):
        ref.ask("q", timeout=T)


def test_ask_async_answers_as_ask(system):
    ref = system.start(teller, 10, id="t")
    system.idle(timeout=T)

    async def go() -> object:
        with pytest.raises(AskFailed):
            await ref.ask_async("withdraw", 50, timeout=T)
        return await ref.ask_async("withdraw", 1, timeout=T)

    assert asyncio.run(go()) == 9


def test_wf_ask_prints_the_reply_as_json(system, db, capsys):
    system.start(teller, 10, id="t")
    system.idle(timeout=T)
    code, out, err = wf(capsys, "ask", "t", "withdraw", "4", "--db", db)
    assert (code, json.loads(out)) == (0, 6), err
    code, out, err = wf(capsys, "ask", "t", "withdraw", "400", "--db", db)
    assert code != 0 and "insufficient funds" in err


def test_the_names_of_section_12_are_exported_where_spec_says():
    import actors
    import workflows

    for name in ("publish", "request", "reply", "Request"):
        assert name in workflows.__all__, name
    for name in ("AskFailed", "WorkflowPruned", "WorkflowNotRunning", "ScheduleInfo"):
        assert name in actors.__all__, name
    assert issubclass(actors.WorkflowPruned, actors.UnknownWorkflow)
    fields = [f.name for f in dataclasses.fields(ScheduleInfo)]
    assert fields[:6] == ["id", "workflow", "cron", "every", "next_tick", "last_started"]


def test_info_scheduled_at_is_none_for_a_workflow_no_schedule_started(system):
    assert system.start(when_scheduled, id="w").result(timeout=T) is None


# -- §13: schedules ----------------------------------------------------------------------------------

START = 1_700_000_000.0  # the VirtualClock's start: 2023-11-14T22:13:20Z


def test_an_every_schedule_starts_its_workflow_at_each_tick_with_the_tick_in_its_id(system, clock):
    made = system.schedule("beat", when_scheduled, every=60)
    assert isinstance(made, ScheduleInfo)
    assert (made.id, made.cron, made.every, made.last_started) == ("beat", None, 60.0, None)
    assert made.workflow.endswith(":when_scheduled")
    assert made.next_tick == 1_700_000_040.0
    system.idle(timeout=T)
    assert system.workflows() == []
    clock.advance(40)
    system.idle(timeout=T)
    ref = system.get("beat@2023-11-14T22:14:00Z")
    assert ref.result(timeout=T) == 1_700_000_040.0
    assert ref.info().scheduled_at == 1_700_000_040.0
    [s] = system.schedules()
    assert s.last_started == "beat@2023-11-14T22:14:00Z" and s.next_tick == 1_700_000_100.0
    clock.advance(60)
    system.idle(timeout=T)
    assert sorted(w.id for w in system.workflows()) == [
        "beat@2023-11-14T22:14:00Z", "beat@2023-11-14T22:15:00Z"]


def test_a_cron_schedule_ticks_on_its_expression(system, clock):
    made = system.schedule("five", when_scheduled, cron="*/5 * * * *")
    assert made.cron == "*/5 * * * *" and made.every is None
    assert made.next_tick == datetime.datetime(2023, 11, 14, 22, 15, tzinfo=datetime.UTC).timestamp()
    clock.advance(100)
    system.idle(timeout=T)
    assert [w.id for w in system.workflows()] == ["five@2023-11-14T22:15:00Z"]


def test_a_cron_schedule_in_a_time_zone_ticks_at_that_zone_s_time(system):
    made = system.schedule("night", when_scheduled, cron="0 2 * * *", timezone="Europe/Paris")
    # 02:00 in Paris in November (CET, UTC+1) is 01:00 UTC.
    assert made.next_tick == datetime.datetime(2023, 11, 15, 1, 0, tzinfo=datetime.UTC).timestamp()


@pytest.mark.parametrize(
    "cron", ["", "* * *", "61 * * * *", "* 25 * * *", "not a cron", "* * * * * * * *", "@reboot"])
def test_a_bad_cron_string_is_a_value_error_and_schedules_nothing(system, cron):
    with pytest.raises(ValueError, match="cron"):
        system.schedule("bad", when_scheduled, cron=cron)
    assert system.schedules() == []


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, ValueError),  # neither cron nor every
        ({"cron": "* * * * *", "every": 60}, ValueError),
        ({"every": 0}, ValueError),
        ({"every": -5}, ValueError),
        ({"every": "60"}, TypeError),
        ({"cron": 5}, TypeError),
        ({"every": 60, "overlap": "queue"}, ValueError),
        ({"every": 60, "catchup": "some"}, ValueError),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, ValueError),
    ],
)
def test_schedule_refuses_what_is_not_a_schedule(system, kwargs, error):
    with pytest.raises(error):
        system.schedule("bad", when_scheduled, **kwargs)
    assert system.schedules() == []


def test_schedule_of_something_that_is_no_workflow_is_a_type_error(system):
    async def plain() -> None:
        return None

    with pytest.raises(TypeError):
        system.schedule("bad", plain, every=60)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        system.schedule(7, when_scheduled, every=60)  # type: ignore[call-overload]
    assert system.schedules() == []


def test_scheduling_an_id_again_updates_it(system, clock):
    system.schedule("s", quick, 1, every=60)
    updated = system.schedule("s", quick, 2, every=120)
    [only] = system.schedules()
    assert only == updated and only.every == 120.0
    clock.advance(100)  # its one tick: 22:14:00, a multiple of 120 s
    system.idle(timeout=T)
    [run] = system.workflows()
    assert run.result == 4  # the new arguments


def test_unschedule_says_whether_there_was_one_and_leaves_its_runs(system, clock):
    system.schedule("s", quick, 1, every=60)
    clock.advance(60)
    system.idle(timeout=T)
    assert system.unschedule("s") is True
    assert system.unschedule("s") is False
    assert system.unschedule("never") is False
    clock.advance(600)
    system.idle(timeout=T)
    assert len(system.workflows()) == 1 and system.schedules() == []


def test_schedule_calls_after_shutdown_are_system_closed(db, clock):
    s = ActorSystem(db, clock=clock)
    s.shutdown()
    with pytest.raises(SystemClosed):
        s.schedule("s", quick, 1, every=60)
    with pytest.raises(SystemClosed):
        s.schedules()
    with pytest.raises(SystemClosed):
        s.unschedule("s")


@pytest.mark.parametrize("overlap", ["skip", "allow"])
def test_overlap_skip_skips_a_tick_while_the_previous_run_runs(system, clock, overlap):
    system.schedule("o", sleeps_long, every=60, overlap=overlap)
    clock.advance(40)  # the first tick
    system.idle(timeout=T)
    clock.advance(60)  # the second, while the first run still sleeps
    system.idle(timeout=T)
    runs = system.workflows()
    assert len(runs) == (1 if overlap == "skip" else 2)


@pytest.mark.parametrize(("catchup", "started"), [("latest", 1), ("all", 10), ("none", 0)])
def test_after_downtime_catchup_decides_which_missed_ticks_start(db, catchup, started):
    clock = VirtualClock()
    with ActorSystem(db, clock=clock) as s:
        s.schedule("c", quick, 1, every=60, catchup=catchup)
        s.idle(timeout=T)
    clock.advance(40 + 9 * 60 + 30)  # ten ticks fall due while nothing runs
    with ActorSystem(db, clock=clock) as s:
        s.idle(timeout=T)
        ids = sorted(w.id for w in s.workflows())
        assert len(ids) == started, ids
        if catchup == "latest":
            assert ids == ["c@2023-11-14T22:23:00Z"]


def test_each_tick_starts_once_across_restarts(db):
    clock = VirtualClock()
    for _ in range(3):
        with ActorSystem(db, clock=clock) as s:
            s.schedule("once", quick, 1, every=60)  # scheduled again at every start: an update
            clock.advance(60)
            s.idle(timeout=T)
    with ActorSystem(db, clock=clock) as s:
        s.idle(timeout=T)
        ids = [w.id for w in s.workflows()]
    assert len(ids) == len(set(ids)) == 3


def test_wf_schedules_lists_them_with_their_next_tick(system, db, capsys):
    system.schedule("beat", quick, 1, every=60)
    code, out, err = wf(capsys, "schedules", "--db", db, "--json")
    assert code == 0, err
    [row] = json.loads(out)
    assert row["id"] == "beat" and row["next_tick"] == 1_700_000_040.0 and row["every"] == 60
    code, out, _ = wf(capsys, "schedules", "--db", db)
    assert "beat" in out and "2023-11-14T22:14:00Z" in out


def test_schedule_async_twins(system, clock):
    async def go() -> list[ScheduleInfo]:
        await system.schedule_async("a", quick, 1, every=60)
        got = await system.schedules_async()
        assert await system.unschedule_async("a") is True
        return got

    assert [s.id for s in asyncio.run(go())] == ["a"]


# -- §13: metrics ------------------------------------------------------------------------------------


@procedure
def double(x: int) -> int:
    return 2 * x


@procedure
def refuses(x: int) -> int:
    raise ValueError(x)


@workflow
async def metered(x: int) -> int:
    got = await procedure(double, x)
    await timer("t", after=10)
    await signal("go")
    return got


def _value(registry, name: str, **labels: str) -> float | None:  # type: ignore[no-untyped-def]
    v: float | None = registry.get_sample_value(name, labels)
    return v


def test_metrics_of_a_registry_carry_the_spec_s_families_and_labels(db, clock):
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    key = f"{metered.__module__}:metered"
    with ActorSystem(db, clock=clock, metrics=registry) as s:
        refs = [s.start(metered, i, id=f"m-{i}") for i in range(2)]
        s.idle(timeout=T)
        clock.advance(12)
        s.idle(timeout=T)
        refs[0].signal("go")
        refs[1].cancel()
        assert refs[0].result(timeout=T) == 0
        s.idle(timeout=T)
        ask_ref = s.start(teller, 5, id="t")
        s.idle(timeout=T)
        ask_ref.ask("withdraw", 1, timeout=T)
        text = generate_latest(registry).decode()
        assert _value(registry, "actorflow_workflows_started_total", type=key) == 2
        assert _value(registry, "actorflow_workflows_finished_total", type=key, status="completed") == 1
        assert _value(registry, "actorflow_workflows_finished_total", type=key, status="cancelled") == 1
        assert (_value(registry, "actorflow_steps_total", type=key) or 0) >= 6
        assert (_value(registry, "actorflow_step_duration_seconds_count", type=key) or 0) >= 6
        assert _value(registry, "actorflow_signals_sent_total", source="client") == 1
        assert _value(registry, "actorflow_asks_sent_total") == 1
        assert _value(registry, "actorflow_timers_fired_total") == 2
        assert _value(registry, "actorflow_timer_lateness_seconds_count") == 2
        fn = f"{double.__module__}:double"
        assert _value(registry, "actorflow_procedure_attempts_total", function=fn) == 2
        assert _value(registry, "actorflow_procedure_duration_seconds_count", function=fn) == 2
        for family in (
            "actorflow_commit_batches", "actorflow_inbox_messages", "actorflow_actors_live",
            "actorflow_actors_passivated", "actorflow_storage_faults", "actorflow_procedure_failures",
            "actorflow_procedure_retries",
        ):
            assert family in text, family
        assert "m-0" not in text and "m-1" not in text  # never an id as a label
    # Shut down: the families are taken out of the registry.
    assert "actorflow_" not in generate_latest(registry).decode()


def test_metrics_true_uses_the_default_registry_and_shutdown_takes_them_out(tmp_path):
    import prometheus_client

    with ActorSystem(str(tmp_path / "m.db"), clock=VirtualClock(), metrics=True) as s:
        s.start(quick, 1, id="q").result(timeout=T)
        s.idle(timeout=T)
        assert prometheus_client.REGISTRY.get_sample_value(
            "actorflow_workflows_started_total", {"type": f"{quick.__module__}:quick"}) == 1
    assert prometheus_client.REGISTRY.get_sample_value(
        "actorflow_workflows_started_total", {"type": f"{quick.__module__}:quick"}) is None


@pytest.mark.parametrize("bad", ["yes", 1, object()])
def test_metrics_of_something_that_is_no_registry_is_a_type_error(tmp_path, bad):
    with pytest.raises(TypeError):
        ActorSystem(str(tmp_path / "m.db"), metrics=bad)
    ActorSystem(str(tmp_path / "m.db")).shutdown()  # nothing of the refused one holds the file


def test_metrics_count_a_failed_procedure_and_a_failed_workflow(tmp_path):
    from prometheus_client import CollectorRegistry

    @workflow
    async def calls_refuses() -> int:
        return await procedure(refuses, 1, retry=RetryPolicy(maximum_attempts=2, initial_interval=1))

    registry = CollectorRegistry()
    clock = VirtualClock()
    with ActorSystem(str(tmp_path / "m.db"), clock=clock, metrics=registry) as s:
        ref = s.start(calls_refuses, id="r")
        s.idle(timeout=T)
        clock.advance(5)
        s.idle(timeout=T)
        assert ref.status() is Status.FAILED
        fn = f"{refuses.__module__}:refuses"
        assert _value(registry, "actorflow_procedure_attempts_total", function=fn) == 2
        assert _value(registry, "actorflow_procedure_retries_total", function=fn) == 1
        assert _value(registry, "actorflow_procedure_failures_total", function=fn) == 1
        key = f"{calls_refuses.__module__}:{calls_refuses.__qualname__}"
        assert _value(registry, "actorflow_workflows_finished_total", type=key, status="failed") == 1


def test_schedule_ticks_are_counted(tmp_path):
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    clock = VirtualClock()
    with ActorSystem(str(tmp_path / "m.db"), clock=clock, metrics=registry) as s:
        s.schedule("o", sleeps_long, every=60)
        clock.advance(40)
        s.idle(timeout=T)
        clock.advance(60)
        s.idle(timeout=T)
        assert _value(registry, "actorflow_schedule_ticks_total", outcome="started") == 1
        assert _value(registry, "actorflow_schedule_ticks_total", outcome="skipped") == 1


def test_a_system_just_opened_registers_every_family_spec_lists(tmp_path):
    """A dashboard or an alert may name a family before anything of it happened (no failure,
    no retry yet): each is registered, and described by a scrape, from the start."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    with ActorSystem(str(tmp_path / "m.db"), clock=VirtualClock(), metrics=registry):
        names = {m.name for m in registry.collect()}
        text = generate_latest(registry).decode()
    for family in (
        "actorflow_workflows_started", "actorflow_workflows_finished", "actorflow_steps",
        "actorflow_step_duration_seconds", "actorflow_commit_batches", "actorflow_signals_sent",
        "actorflow_asks_sent", "actorflow_timers_fired", "actorflow_timer_lateness_seconds",
        "actorflow_procedure_attempts", "actorflow_procedure_failures",
        "actorflow_procedure_retries", "actorflow_procedure_duration_seconds",
        "actorflow_inbox_messages", "actorflow_actors_live", "actorflow_actors_passivated",
        "actorflow_storage_faults", "actorflow_cluster_shards_owned",
        "actorflow_cluster_lease_renewals", "actorflow_cluster_takeovers",
    ):
        assert family in names, family
        assert f"# TYPE {family}" in text, family
    assert "actorflow_timer_lateness_seconds_count 0.0" in text


# -- §13: limits -------------------------------------------------------------------------------------

RUNNING = [0]
MOST = [0]
STARTED = threading.Condition()


@procedure(concurrency=1)
def one_at_a_time(tag: str) -> str:
    with STARTED:
        RUNNING[0] += 1
        MOST[0] = max(MOST[0], RUNNING[0])
        RAN.append(tag)
        STARTED.notify_all()
    try:
        GATE.wait(T)
    finally:
        with STARTED:
            RUNNING[0] -= 1
    return tag


@procedure(rate=1)
def once_a_second(tag: str) -> str:
    with STARTED:
        RAN.append(tag)
    return tag


@workflow
async def calls_limited(tag: str) -> str:
    return await procedure(one_at_a_time, tag)


@workflow
async def calls_rated(tag: str) -> str:
    return await procedure(once_a_second, tag)


def _wait_for(cond, what: str) -> None:  # type: ignore[no-untyped-def]
    with STARTED:
        assert STARTED.wait_for(cond, T), f"{what} did not happen within {T}s"


def test_concurrency_1_runs_one_attempt_at_a_time_and_wf_show_says_the_others_wait(system, db, capsys):
    RUNNING[0] = MOST[0] = 0
    refs = [system.start(calls_limited, f"c{i}", id=f"c{i}") for i in range(3)]
    _wait_for(lambda: len(RAN) == 1, "the first attempt")
    waiting = [r for r in refs if r.id != RAN[0]]
    code, out, err = wf(capsys, "show", waiting[0].id, "--db", db)
    assert code == 0, err
    assert "limit" in out, out
    GATE.set()
    assert sorted(r.result(timeout=T) for r in refs) == ["c0", "c1", "c2"]
    assert MOST[0] == 1 and sorted(RAN) == ["c0", "c1", "c2"]


def test_rate_1_starts_one_attempt_per_second_of_the_system_clock(system, clock):
    refs = [system.start(calls_rated, f"r{i}", id=f"r{i}") for i in range(3)]
    system.idle(timeout=T)
    assert len(RAN) == 1
    clock.advance(1)
    system.idle(timeout=T)
    assert len(RAN) == 2
    clock.advance(1)
    system.idle(timeout=T)
    assert sorted(r.result(timeout=T) for r in refs) == ["r0", "r1", "r2"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"concurrency": 0}, ValueError),
        ({"concurrency": -1}, ValueError),
        ({"concurrency": "2"}, TypeError),
        ({"concurrency": 1.5}, TypeError),
        ({"rate": 0}, ValueError),
        ({"rate": -2}, ValueError),
        ({"rate": "fast"}, TypeError),
    ],
)
def test_a_limit_that_is_no_limit_is_refused_at_decoration(kwargs, error):
    with pytest.raises(error):

        @procedure(**kwargs)
        def f() -> None:
            return None


# -- §13: a clean SIGTERM ----------------------------------------------------------------------------


@reducer
def seen(db, wf: str, text: str) -> None:
    db["app_events"].insert({"wf": wf, "text": text}, pk="id", alter=True)


@workflow
async def term_counter() -> None:
    while True:
        v = await signal("inc")
        reducer(seen, "counter", str(v))


@procedure
def waits_for_stdin(tag: str) -> str:
    print(f"started {tag}", flush=True)
    sys.stdin.readline()
    return f"called {tag}"


def _serving(script: str, *args: str, stdin: bool = False) -> tuple[subprocess.Popen[str], Any, list[str]]:
    """Start ``script`` in a new interpreter: the process, a queue of its stdout lines and the
    list its stderr lines go to (both read as they come, so that no pipe fills and blocks it).
    A process that does not exit in time is asked for its threads' stacks (``_exit_code``)."""
    import queue

    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT), PYTHONFAULTHANDLER="1"),
        stdin=subprocess.PIPE if stdin else None, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    errors: list[str] = []
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    threading.Thread(target=lambda: [errors.append(x) for x in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
    return proc, lines, errors


# A new interpreter that imports this module (compiling its workflows) prints its first line
# after seconds, tens of them on a loaded machine: its lines are waited for up to this, not T.
STARTUP = 180


def _next_line(proc: subprocess.Popen[str], lines: Any, errors: list[str], seen: list[str]) -> str:
    """The next line ``proc`` prints, waited for up to STARTUP seconds; else the test fails with
    the lines seen so far and the process's stderr."""
    import queue

    try:
        return str(lines.get(timeout=STARTUP)).strip()
    except queue.Empty:
        pytest.fail(f"no line from the process within {STARTUP}s (exit code {proc.poll()}); the "
                    f"lines before: {seen!r}; its stderr:\n{''.join(errors)[-5000:]}")


def _exit_code(proc: subprocess.Popen[str], errors: list[str]) -> int:
    """The exit code of ``proc``, which was asked to stop; if it has not exited within T
    seconds, the test fails with the stacks of its threads (SIGABRT, under PYTHONFAULTHANDLER)."""
    try:
        return proc.wait(T)
    except subprocess.TimeoutExpired:
        proc.send_signal(os_signal.SIGABRT)
        try:
            proc.wait(T)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(T)
        pytest.fail(f"the process did not exit within {T}s of the signal; its stderr, with its "
                    f"threads' stacks:\n{''.join(errors)[-20000:]}")


@workflow
async def term_caller(tag: str) -> str:
    got = await procedure(waits_for_stdin, tag)
    reducer(seen, "caller", got)
    return got


SERVE = """
import logging, sys, threading
from actors import ActorSystem
from tests.actors import test_spec_probe9 as f

db, acks = sys.argv[1], sys.argv[2]
# The application's own output: the runtime's INFO events, among them "system_serving" once
# serve() has taken SIGTERM and SIGINT.
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
system = ActorSystem(db, procedure_workers=2)
counter = system.start(f.term_counter, id="counter")
system.start(f.term_caller, "once", id="caller")

def send():
    with open(acks, "a") as out:
        for i in range(1_000_000):
            try:
                counter.signal("inc", i)
            except Exception as e:
                print("sender stopped:", type(e).__name__, flush=True)
                return
            out.write(f"{i}\\n")
            out.flush()
            if i == 0:
                print("first signal acknowledged", flush=True)

threading.Thread(target=send, daemon=True).start()
system.serve()
print("served", flush=True)
"""


def test_sigterm_while_steps_and_a_procedure_run_exits_cleanly_and_the_next_start_loses_nothing(
    db, tmp_path
):

    from .runtime_support import app_events

    acks = tmp_path / "acks"
    proc, lines, errors = _serving(SERVE, db, str(acks), stdin=True)
    seen: list[str] = []
    try:
        # SIGTERM once serve() has taken it, the procedure runs and a signal was acknowledged.
        # The process's print() and its log lines share stdout and may run into one line, so
        # each is looked for within the lines.
        while not all(any(text in x for x in seen)
                      for text in ("started once", "first signal acknowledged", "system_serving")):
            seen.append(_next_line(proc, lines, errors, seen))
        proc.send_signal(os_signal.SIGTERM)  # the procedure runs, the counter's steps too
        proc.stdin.write("go\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        assert _exit_code(proc, errors) == 0, "".join(errors)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = seen
    while not lines.empty():
        out.append(lines.get_nowait().strip())
    assert any("served" in x for x in out), out
    acked = [int(x) for x in acks.read_text().split()]
    assert acked, "no signal was acknowledged before the SIGTERM"
    with ActorSystem(db) as s:
        assert s.get("caller").result(timeout=T) == "called once"  # its outcome was kept
        s.idle(timeout=T)
        counted = [int(x) for x in app_events(db, "counter")]
        assert len(counted) == len(set(counted)), "a signal was counted twice"
        assert set(acked) <= set(counted), "an acknowledged signal was lost"
        assert counted == sorted(counted)
        assert app_events(db, "caller") == ["called once"]  # its reducer ran once
        assert s.get("counter").status() is Status.RUNNING


def test_retention_and_prune_take_a_timedelta_as_timer_and_every_do(db, clock):
    with ActorSystem(db, clock=clock, retention=datetime.timedelta(minutes=10),
                     id_retention=datetime.timedelta(hours=1)) as s:
        assert (s.retention, s.id_retention) == (600.0, 3600.0)
        s.start(quick, 1, id="a").result(timeout=T)
        clock.advance(120)
        s.start(quick, 2, id="b").result(timeout=T)
        assert s.prune(older_than=datetime.timedelta(minutes=1)) == 1
        assert [w.id for w in s.workflows()] == ["b"]
        clock.advance(601)
        s.idle(timeout=T)
        assert s.workflows() == []


# -- §9, §13: wf nodes on SQLite, a cluster of one -----------------------------------------------------


def test_wf_nodes_on_a_sqlite_file_lists_the_system_that_owns_it_as_system_nodes_does(tmp_path, capsys):
    path = str(tmp_path / "wf.db")
    with ActorSystem(path, clock=VirtualClock(), node_id="game-1") as s:
        [node] = s.nodes()
        code, out, err = wf(capsys, "nodes", "--db", path, "--json")
        assert code == 0, err
        [row] = json.loads(out)
        assert (row["node_id"], row["state"], row["shards"]) == ("game-1", "up", 1)
        assert row["started_at"] == pytest.approx(node.started_at)
        code, out, err = wf(capsys, "nodes", "--db", path)
        assert code == 0 and "game-1" in out and "up" in out, err
    code, out, err = wf(capsys, "nodes", "--db", path, "--json")
    assert (code, json.loads(out)) == (0, []), err  # no system has it open
    code, out, err = wf(capsys, "nodes", "--db", path)
    assert code == 0 and "no system has this SQLite file open" in out, err


# -- more of §10 and §12 -----------------------------------------------------------------------------


@workflow
async def busy_then_asked() -> str:
    await signal("open")
    req = await request("q")
    reply(req, f"answer {req.payload}")
    return "done"


@workflow
async def sender_and_sleeper(to: str) -> str:
    from workflows import send

    send(to, "hello", 1)
    await timer("nap", after=5)
    got = await procedure(double, 21)
    return f"{got}"


def test_an_ask_waits_buffered_until_the_workflow_awaits_its_request(system):
    ref = system.start(busy_then_asked, id="b")
    system.idle(timeout=T)
    got: list[object] = []
    asker = threading.Thread(target=lambda: got.append(ref.ask("q", 7, timeout=T, ask_id="x")))
    asker.start()
    system.idle(timeout=T)
    assert not got  # not awaited yet: buffered, as a signal is
    ref.signal("open")
    asker.join(T)
    assert got == ["answer 7"]
    assert ref.result(timeout=T) == "done"


def test_an_ask_made_while_the_system_was_down_is_answered_by_the_next_start(db, clock):
    with ActorSystem(db, clock=clock) as s:
        ref = s.start(busy_then_asked, id="b")
        s.idle(timeout=T)
        with pytest.raises(TimeoutError):
            ref.ask("q", 1, timeout=0.01, ask_id="kept")
    with ActorSystem(db, clock=clock) as s:
        ref = s.get("b")
        ref.signal("open")
        assert ref.ask("q", 1, timeout=T, ask_id="kept") == "answer 1"
        assert ref.result(timeout=T) == "done"


def test_an_ask_of_a_passivated_workflow_wakes_it(db, clock):
    with ActorSystem(db, clock=clock, passivate_after=0.0) as s:
        ref = s.start(teller, 3, id="t")
        s.idle(timeout=T)
        assert ref.ask("withdraw", 1, timeout=T) == 2
        s.idle(timeout=T)
        assert ref.ask("withdraw", 1, timeout=T) == 1


def test_waiting_on_names_the_request_a_workflow_awaits(system):
    ref = system.start(echo_request, id="e")
    system.idle(timeout=T)
    assert "q" in (ref.info().waiting_on or "")


def test_history_says_what_woke_each_step_what_it_sent_and_armed(system, clock):
    target = system.start(counter, 5, id="target")
    ref = system.start(sender_and_sleeper, "target", id="s")
    system.idle(timeout=T)
    clock.advance(5)
    assert ref.result(timeout=T) == "42"
    hist = ref.history()
    text = json.dumps([[h.event, h.detail] for h in hist])
    assert "hello to target" in text  # what it sent
    assert "timer nap" in text and "procedure double" in text  # what it armed
    events = [h.event for h in hist]
    assert events[0] == "started" and events[-1] == "completed"
    assert "timer" in events and "procedure" in events  # what woke its steps
    assert target.status() is Status.RUNNING


def test_publish_request_and_reply_outside_a_workflow_are_clear_errors():
    from workflows import WorkflowError

    with pytest.raises(WorkflowError):
        publish("k", 1)
    with pytest.raises(TypeError):
        request(3)  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError)):
        request("")


@workflow
async def publishes_none_and_replies_nothing() -> None:
    publish("k", None)
    req = await request("q")
    reply(req)
    await signal("end")


def test_a_published_none_is_a_value_and_a_bare_reply_answers_none(system):
    ref = system.start(publishes_none_and_replies_nothing, id="n")
    system.idle(timeout=T)
    assert ref.published("k") is None
    assert ref.published("k", timeout=T) is None
    assert ref.info().published == {"k": None}
    assert ref.ask("q", timeout=T) is None


def test_catchup_all_under_overlap_skip_starts_the_first_missed_tick_and_skips_the_rest(db):
    clock = VirtualClock()
    with ActorSystem(db, clock=clock) as s:
        s.schedule("c", sleeps_long, every=60, catchup="all")
        s.idle(timeout=T)
    clock.advance(40 + 4 * 60)  # five ticks missed
    with ActorSystem(db, clock=clock) as s:
        s.idle(timeout=T)
        assert [w.id for w in s.workflows()] == ["c@2023-11-14T22:14:00Z"]
        [info_] = s.schedules()
        assert info_.next_tick == 1_700_000_040.0 + 5 * 60


def test_serve_after_shutdown_is_system_closed_and_off_the_main_thread_a_clear_error(tmp_path):
    s = ActorSystem(str(tmp_path / "s.db"), clock=VirtualClock())
    errors: list[BaseException] = []

    def off_main() -> None:
        try:
            s.serve()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=off_main)
    t.start()
    t.join(T)
    assert len(errors) == 1 and "main thread" in str(errors[0])
    s.shutdown()
    with pytest.raises(SystemClosed):
        s.serve()


def test_a_workflow_deleted_by_retention_leaves_a_tombstone_too(db, clock):
    with ActorSystem(db, clock=clock, retention=100) as s:
        s.start(quick, 1, id="once").result(timeout=T)
        clock.advance(101)
        s.idle(timeout=T)
        with pytest.raises(WorkflowPruned):
            s.start(quick, 1, id="once")
        with pytest.raises(UnknownWorkflow, match="pruned"):
            s.get("once")


def test_history_before_past_the_newest_position_pages_from_the_newest(system):
    ref = system.start(quick, 1, id="q")
    ref.result(timeout=T)
    whole = ref.history()
    assert ref.history(before=10_000) == whole
    assert ref.history(limit=1, before=10_000) == whole[-1:]


@pytest.mark.parametrize(
    "call",
    [
        lambda s, r: r.history(),
        lambda s, r: r.published("balance"),
        lambda s, r: r.ask("withdraw", 1),
        lambda s, r: s.nodes(),
        lambda s, r: s.schedules(),
        lambda s, r: s.unschedule("x"),
        lambda s, r: s.prune(older_than=0),
        lambda s, r: asyncio.run(r.published_async("balance")),
        lambda s, r: asyncio.run(r.ask_async("withdraw", 1)),
        lambda s, r: asyncio.run(s.schedule_async("x", quick, 1, every=5)),
        lambda s, r: asyncio.run(s.prune_async(0)),
        lambda s, r: asyncio.run(s.serve_async()),
    ],
)
def test_each_call_of_these_sections_after_shutdown_is_system_closed(tmp_path, call):
    s = ActorSystem(str(tmp_path / "c.db"), clock=VirtualClock())
    ref = s.start(teller, 1, id="t")
    s.idle(timeout=T)
    s.shutdown()
    with pytest.raises(SystemClosed):
        call(s, ref)


@pytest.mark.parametrize("what", ["ask", "published"])
def test_a_caller_waiting_on_a_workflow_when_the_system_shuts_down_gets_system_closed(tmp_path, what):
    s = ActorSystem(str(tmp_path / "c.db"), clock=VirtualClock())
    ref = s.start(busy_then_asked, id="b")
    s.idle(timeout=T)
    got: list[BaseException] = []

    def wait() -> None:
        try:
            if what == "ask":
                ref.ask("q", 1, ask_id="mine")
            else:
                ref.published("never", timeout=T)
        except BaseException as e:  # noqa: BLE001
            got.append(e)

    with pytest.raises(KeyError):
        ref.published("never")
    waiter = threading.Thread(target=wait)
    waiter.start()
    s.idle(timeout=T)
    s.shutdown()
    waiter.join(T)
    assert not waiter.is_alive()
    assert len(got) == 1 and isinstance(got[0], SystemClosed), got
    if what == "ask":
        assert got[0].ask_id == "mine"  # asked again with it, the next system answers


# -- §9 with §12 and §13: two nodes on one PostgreSQL database -----------------------------------------


def test_two_nodes_start_every_late_tick_under_overlap_skip(pg_store_url):
    """Ten ticks come due in one round of the schedules' driver, and their runs' shards are
    shared by two nodes: a run the other node starts has not taken its first steps when the next
    tick is judged, so that one is judged at a later round (from what the store has of the run),
    not skipped as overlapping a run that merely had not begun."""
    clock = VirtualClock()
    with ActorSystem(pg_store_url, node_id="n1", clock=clock) as a, \
            ActorSystem(pg_store_url, node_id="n2", clock=clock) as b:
        a.schedule("beat", quick, 3, every=60, catchup="all")
        clock.advance(600)
        deadline = time.monotonic() + T
        while len(a.workflows()) < 10 and time.monotonic() < deadline:
            a.idle(timeout=T)
            b.idle(timeout=T)
            threading.Event().wait(0.05)
        a.idle(timeout=T)
        b.idle(timeout=T)
        runs = a.workflows()
        assert len(runs) == 10, sorted(w.id for w in runs)
        assert {w.status for w in runs} == {"completed"}


def test_two_nodes_start_each_tick_once_and_answer_asks_and_reads_from_either(pg_store_url):
    clock = VirtualClock()
    with ActorSystem(pg_store_url, node_id="n1", clock=clock) as a, \
            ActorSystem(pg_store_url, node_id="n2", clock=clock) as b:
        assert {n.node_id for n in a.nodes()} == {"n1", "n2"}
        # catchup="all": a tick that came due while the nodes were still sharing out their
        # shards (whose owner runs the schedule) is started late, not skipped as missed.
        a.schedule("beat", quick, 3, every=60, catchup="all")
        b.schedule("beat", quick, 3, every=60, catchup="all")  # the same id again, from the other node: an update
        assert len(a.schedules()) == 1 == len(b.schedules())
        for _ in range(3):
            clock.advance(60)
            a.idle(timeout=T)
            b.idle(timeout=T)
        deadline = time.monotonic() + T
        while len(a.workflows()) < 3 and time.monotonic() < deadline:  # the owner's next round
            threading.Event().wait(0.05)
            a.idle(timeout=T)
            b.idle(timeout=T)
        ids = sorted(w.id for w in a.workflows())
        assert ids == sorted(w.id for w in b.workflows())
        assert len(ids) == len(set(ids)) == 3
        refs = [a.start(teller, 10, id=f"t{i}") for i in range(6)]  # spread over both nodes
        a.idle(timeout=T)
        b.idle(timeout=T)
        for r in refs:
            assert b.get(r.id).ask("withdraw", 4, timeout=T) == 6
            assert a.get(r.id).published("balance") == 6
            assert b.get(r.id).history()[-1].detail.get("replied")


def test_a_node_that_shuts_down_hands_its_shards_off_and_shows_as_left(pg_store_url, capsys):
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    clock = VirtualClock()
    with ActorSystem(pg_store_url, node_id="n1", clock=clock, metrics=registry) as a:
        b = ActorSystem(pg_store_url, node_id="n2", clock=clock)
        refs = [b.start(teller, 10, id=f"t{i}") for i in range(6)]
        b.idle(timeout=T)
        a.idle(timeout=T)
        b.shutdown()
        code, out, err = wf(capsys, "nodes", "--db", pg_store_url, "--json")
        assert code == 0, err
        states = {n["node_id"]: n["state"] for n in json.loads(out)}
        assert states == {"n1": "up", "n2": "left"}
        [only] = a.nodes()
        assert only.node_id == "n1"
        assert _value(registry, "actorflow_cluster_shards_owned") == only.shards
        for r in refs:  # every workflow goes on, on the node left
            assert a.get(r.id).ask("withdraw", 1, timeout=T) == 9


def test_calls_waiting_for_their_rate_limit_wait_durably_across_a_restart(db):
    clock = VirtualClock()
    with ActorSystem(db, clock=clock) as s:
        for i in range(3):
            s.start(calls_rated, f"r{i}", id=f"r{i}")
        s.idle(timeout=T)
        assert len(RAN) == 1
    with ActorSystem(db, clock=clock) as s:
        s.idle(timeout=T)
        clock.advance(1)
        s.idle(timeout=T)
        clock.advance(1)
        s.idle(timeout=T)
        assert sorted(s.get(f"r{i}").result(timeout=T) for i in range(3)) == ["r0", "r1", "r2"]
    assert sorted(RAN) == ["r0", "r1", "r2"]  # each call once


# -- the signatures and defaults of these sections ------------------------------------------------


def test_the_signatures_and_defaults_are_the_spec_s():
    import inspect

    from actors import WorkflowRef

    system = inspect.signature(ActorSystem)
    for name, default in (("retention", 7 * 86400), ("history_limit", None),
                          ("id_retention", 30 * 86400), ("metrics", None)):
        assert system.parameters[name].default == default, name
    sched = inspect.signature(ActorSystem.schedule)
    assert list(sched.parameters)[:4] == ["self", "id", "wf", "args"]
    for name, default in (("cron", None), ("every", None), ("timezone", "UTC"),
                          ("overlap", "skip"), ("catchup", "latest")):
        assert sched.parameters[name].default == default, name
    assert list(inspect.signature(ActorSystem.prune).parameters) == ["self", "older_than"]
    pub = inspect.signature(WorkflowRef.published)
    assert list(pub.parameters) == ["self", "key", "timeout"] and pub.parameters["timeout"].default is None
    ask = inspect.signature(WorkflowRef.ask)
    assert list(ask.parameters) == ["self", "name", "payload", "timeout", "ask_id"]
    assert all(ask.parameters[p].default is None for p in ("payload", "timeout", "ask_id"))
    hist = inspect.signature(WorkflowRef.history)
    assert list(hist.parameters) == ["self", "limit", "before"]
    start = inspect.signature(ActorSystem.start)
    assert start.parameters["reuse_id"].default is False


def test_a_schedule_made_with_the_defaults_skips_overlaps_and_catches_up_the_latest(system):
    made = system.schedule("d", quick, 1, cron="@hourly")
    assert (made.timezone, made.overlap, made.catchup) == ("UTC", "skip", "latest")
    assert made.next_tick == datetime.datetime(2023, 11, 14, 23, 0, tzinfo=datetime.UTC).timestamp()


def test_wf_ask_and_wf_show_history_of_an_unknown_id_name_it(system, db, capsys):
    code, out, err = wf(capsys, "ask", "nope", "q", "1", "--db", db, "--timeout", "1")
    assert code == 1 and "'nope'" in err and out == ""
    code, out, err = wf(capsys, "show", "nope", "--history", "3", "--db", db)
    assert code == 1 and "'nope'" in err


def test_wf_ask_with_a_payload_that_is_not_json_is_refused_and_asks_nothing(system, db, capsys):
    ref = system.start(echo_request, id="e")
    system.idle(timeout=T)
    code, out, err = wf(capsys, "ask", "e", "q", "{not json", "--db", db, "--timeout", "1")
    assert code != 0 and "JSON" in err
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    assert ref.ask("q", timeout=T) == "ok"


def test_wf_schedules_of_a_database_with_none_says_so(system, db, capsys):
    code, out, err = wf(capsys, "schedules", "--db", db, "--json")
    assert (code, json.loads(out)) == (0, [])
    code, out, err = wf(capsys, "schedules", "--db", db)
    assert code == 0 and "no schedules" in out


SERVE_SIMPLE = """
import asyncio, logging, sys
from actors import ActorSystem
from tests.actors import test_spec_probe9 as f

db, mode = sys.argv[1], sys.argv[2]
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
system = ActorSystem(db)
system.start(f.teller, 10, id="t")
system.idle(timeout=30)
if mode == "async":
    asyncio.run(system.serve_async())
else:
    system.serve()
print("served", flush=True)
"""


@pytest.mark.parametrize(("sig", "mode"), [("SIGINT", "sync"), ("SIGTERM", "async"), ("SIGINT", "async")])
def test_serve_and_serve_async_stop_cleanly_on_sigterm_and_sigint(tmp_path, sig, mode):

    path = str(tmp_path / "s.db")
    proc, lines, errors = _serving(SERVE_SIMPLE, path, mode)
    try:
        seen: list[str] = []
        while not any("system_serving" in x for x in seen):
            seen.append(_next_line(proc, lines, errors, seen))
        proc.send_signal(getattr(os_signal, sig))
        assert _exit_code(proc, errors) == 0, "".join(errors)
    finally:
        if proc.poll() is None:
            proc.kill()
    rest = []
    while not lines.empty():
        rest.append(lines.get_nowait())
    assert any("served" in x for x in rest), rest  # print() and log lines may run into one
    with ActorSystem(path) as s:  # the file was released, and its workflow goes on
        assert s.get("t").ask("withdraw", 3, timeout=T) == 7


@workflow
async def fails_after_a_signal() -> None:
    await signal("go")
    raise LookupError("nothing here")


def test_history_ends_with_how_the_workflow_ended_cancelled_or_failed(system):
    c = system.start(counter, 3, id="c")
    f = system.start(fails_after_a_signal, id="f")
    system.idle(timeout=T)
    c.cancel("enough")
    f.signal("go")
    system.idle(timeout=T)
    last = c.history()[-1]
    assert last.event == "cancelled" and "enough" in json.dumps(last.detail)
    last = f.history()[-1]
    assert last.event == "failed" and "LookupError" in json.dumps(last.detail)
    assert "nothing here" in json.dumps(last.detail)
    assert [h.event for h in f.history()][-2] == "signal"  # what woke the step that failed


@workflow
async def scheduled_parent() -> tuple[float | None, float | None, float | None]:
    from workflows import spawn

    mine = info().scheduled_at
    child = await spawn(when_scheduled)
    inline = await when_scheduled()
    return mine, child, inline


def test_scheduled_at_is_the_run_s_tick_and_none_in_a_child_it_spawns(system, clock):
    system.schedule("p", scheduled_parent, every=60)
    clock.advance(40)
    system.idle(timeout=T)
    [run] = system.workflows(type=scheduled_parent)
    mine, child, inline = system.get(run.id).result(timeout=T)
    assert mine == 1_700_000_040.0 == inline  # awaited inline: the caller's own info()
    assert child is None  # a child is no tick's run


@workflow
async def replies_later() -> str:
    req = await request("slow")
    await timer("think", after=10)
    reply(req, f"thought about {req.payload}")
    return "done"


def test_a_request_held_across_a_restart_is_replied_to_after_it(db):
    clock = VirtualClock()
    with ActorSystem(db, clock=clock) as s:
        ref = s.start(replies_later, id="r")
        s.idle(timeout=T)
        with pytest.raises(TimeoutError):
            ref.ask("slow", "x", timeout=0.05, ask_id="held")
        s.idle(timeout=T)
        assert "think" in (ref.info().waiting_on or "")
    clock.advance(10)
    with ActorSystem(db, clock=clock) as s:
        ref = s.get("r")
        assert ref.ask("slow", "x", timeout=T, ask_id="held") == "thought about x"
        assert ref.result(timeout=T) == "done"
        assert [h.event for h in ref.history()].count("request") == 1  # asked once


def test_concurrent_asks_are_each_answered_once_in_some_order(system):
    ref = system.start(teller, 100, id="t")
    system.idle(timeout=T)
    got: list[object] = []
    lock = threading.Lock()

    def ask() -> None:
        v = ref.ask("withdraw", 1, timeout=T)
        with lock:
            got.append(v)

    askers = [threading.Thread(target=ask) for _ in range(20)]
    for a in askers:
        a.start()
    for a in askers:
        a.join(T)
    assert sorted(got) == list(range(80, 100))  # type: ignore[type-var]
    assert ref.published("balance") == 80
