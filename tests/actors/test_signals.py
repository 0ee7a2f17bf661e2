"""Signals, sends and broadcasts between the outside and workflows, and between workflows.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import json
import threading

import pytest
from structlog.testing import capture_logs

from actors import (
    ActorSystem,
    Status,
)

from . import flows
from .runtime_support import (
    Inside,
    T,
    _wait_until,
    connect,
    reader,
)

pytestmark = pytest.mark.usefixtures("fresh_flows")


def test_signals_are_buffered_and_consumed_in_order(system):
    """Signals sent before they are awaited stay buffered and are consumed once, in order."""
    ref = system.start(flows.collect, 3)
    for i in range(3):
        ref.signal("item", i)
    assert ref.result(timeout=T) == [0, 1, 2]


def test_broadcast_reaches_only_matching_subscribers(system):
    """A broadcast reaches the workflows subscribed with an equal filter value only."""
    wolves = system.start(flows.quester, "wolf")
    bears = system.start(flows.quester, "bear")
    system.idle(timeout=T)
    assert system.broadcast("killed", "wolf", 1) == 1
    assert system.broadcast("killed", "wolf", 2) == 1
    assert wolves.result(timeout=T) == [1, 2]
    assert bears.status() is Status.RUNNING


def test_a_payload_that_cannot_be_pickled_is_a_type_error_naming_the_call(system):
    """A broadcast's payload that cannot be pickled is a TypeError naming the broadcast, as a
    signal's is (it was the store's MalformedPayload, naming no call); nothing is delivered."""
    wolves = system.start(flows.quester, "wolf")
    system.idle(timeout=T)
    with pytest.raises(TypeError, match=r"broadcast 'killed': payload cannot be pickled \(.*lock"):
        system.broadcast("killed", "wolf", threading.Lock())
    with pytest.raises(TypeError, match=r"signal 'killed' to .*: payload cannot be pickled"):
        wolves.signal("killed", threading.Lock())
    system.idle(timeout=T)
    assert system.broadcast("killed", "wolf", 1) == 1
    assert system.broadcast("killed", "wolf", 2) == 1
    assert wolves.result(timeout=T) == [1, 2]


def test_a_payload_that_cannot_be_loaded_back_is_refused_at_the_call_and_the_workflow_goes_on(system):
    """A payload that pickles and whose restore raises (a ``__setstate__`` that fails) is refused
    at the signal, broadcast or ask that sends it, naming the call and the code that raised: it
    was accepted, and the workflow it reached failed after its restarts, each restore raising."""
    wolves = system.start(flows.quester, "wolf")
    system.idle(timeout=T)
    bad = flows._Unloadable()
    with pytest.raises(TypeError, match=r"signal 'killed' to .*: payload cannot be loaded back .*__setstate__"):
        wolves.signal("killed", bad)
    with pytest.raises(TypeError, match=r"broadcast 'killed': payload cannot be loaded back .*__setstate__"):
        system.broadcast("killed", "wolf", bad)
    with pytest.raises(TypeError, match=r"ask 'killed' to .*: payload cannot be loaded back .*__setstate__"):
        wolves.ask("killed", bad, timeout=T)
    system.idle(timeout=T)
    assert system.broadcast("killed", "wolf", 1) == 1
    assert system.broadcast("killed", "wolf", 2) == 1
    assert wolves.result(timeout=T) == [1, 2]


def test_a_broadcast_reaches_subscribers_of_an_equal_number(system):
    """A filter is a JSON value, and JSON has one kind of number: 3.0 reaches those subscribed
    with 3 (inside a list too); True is not 1."""
    zone = system.start(flows.quester, 3)
    nested = system.start(flows.quester, [1, {"z": 2}])
    system.idle(timeout=T)
    assert system.broadcast("killed", 3.0, 1) == 1
    assert system.broadcast("killed", [1.0, {"z": 2.0}], 1) == 1
    assert system.broadcast("killed", True, 1) == 0
    assert system.broadcast("killed", 3, 2) == 1
    assert zone.result(timeout=T) == [1, 2]
    assert nested.status() is Status.RUNNING


def test_a_store_owning_a_subset_wakes_only_its_own_workflows(system, db):
    """A row delivered to a workflow the store does not own is its owner's to take: no actor of
    that workflow runs here, and the row waits in its inbox."""
    system.start(flows.quester, "wolf", id="mine")
    system.start(flows.quester, "wolf", id="theirs")
    system.idle(timeout=T)
    Inside(system).disown(lambda wid: wid != "theirs")  # as a cluster's node would
    assert system.broadcast("killed", "wolf", 1) == 2  # both rows are written
    system.idle(timeout=T)
    with reader(db) as r:
        assert [m.name for m in r.inbox("theirs")] == ["killed"]
        assert r.inbox("mine") == []  # taken by its step


def test_send_between_workflows(system):
    """send() from one workflow reaches another's inbox when the step commits."""
    target = system.start(flows.collect, 1, id="target")
    system.start(flows.pinger, "target")
    assert target.result(timeout=T) == ["ping"]


def test_signals_sent_before_the_first_step_are_consumed_once(system):
    """Thousands of signals sent right after start, while the actor loads and steps, are each
    consumed exactly once (a Wake queued behind the step that consumed its row is ignored)."""
    ref = system.start(flows.counter, 3000)
    for _ in range(3000):
        ref.signal("inc", 1)
    assert ref.result(timeout=120) == 3000


def test_a_signal_is_stepped_on_an_engine_thread_never_the_senders(system):
    """signal() hands the signal to the engine and waits: the step that consumes it runs on an
    actor thread of the runtime, whichever thread sent it."""

    ref = system.start(flows.reports_its_thread)
    system.idle(timeout=T)
    ref.signal("go")
    sender = threading.Thread(target=lambda: ref.signal("go"), name="a-sender")
    sender.start()
    sender.join(T)
    names = ref.result(timeout=T)
    assert len(names) == 2 and all(n.startswith("actorflow-engine-") for n in names), names


def test_an_interrupt_in_the_callers_wait_leaves_the_signal_durable_or_unacknowledged(db, clock, held_commits):
    """Ctrl-C while ``signal()`` waits for the commit of the step that takes it: the interrupt
    reaches the caller only; the engine goes on, and the signal is consumed exactly once."""
    import signal as os_signal

    # Python leaves SIGINT ignored when it started so (a background job of a shell script, as CI
    # runs suites side by side): what Ctrl-C does in a terminal, for this test.
    previous = os_signal.signal(os_signal.SIGINT, os_signal.default_int_handler)
    try:
        _interrupt_the_callers_wait(db, clock, held_commits)
    finally:
        os_signal.signal(os_signal.SIGINT, previous)


def _interrupt_the_callers_wait(db, clock, held_commits) -> None:
    import os
    import signal as os_signal

    with ActorSystem(db, clock=clock) as s:
        ref = s.start(flows.collect, 3)
        s.idle(timeout=T)
        ref.signal("item", "a")
        held = held_commits(s, only=ref.id)

        def interrupt() -> None:
            _wait_until(lambda: len(held) == 1, "the step taking the signal reached the writer")
            os.kill(os.getpid(), os_signal.SIGINT)  # what Ctrl-C sends

        t = threading.Thread(target=interrupt)
        t.start()
        with pytest.raises(KeyboardInterrupt):
            ref.signal("item", "b")
        t.join(T)
        held_commits.let_go(s)
        s.idle(timeout=T)
        ref.signal("item", "c")
        assert ref.result(timeout=T) == ["a", "b", "c"]


def test_signals_lost_by_mistake_are_in_the_senders_history(db, clock):
    """send() to an unknown id or a full inbox is shown in the sender's own history (wf show),
    in the step's transaction, besides the log's warning; the buffered ones are delivered."""
    with ActorSystem(db, clock=clock, inbox_limit=2) as system:
        sink = system.start(flows.collect, 2)
        assert system.start(flows.sends_many, sink.id, 3, id="sender").result(timeout=T) == 3
        assert sink.result(timeout=T) == [0, 1]
    con = connect(db)
    rows = con.execute("SELECT event, detail FROM history WHERE workflow_id = 'sender' ORDER BY seq").fetchall()
    con.close()
    lost = [json.loads(d) for e, d in rows if e == "signal_dropped"]
    assert lost == [
        {"to": sink.id, "name": "item", "reason": "inbox full (2 buffered signals)"},
        {"to": "nobody-has-this-id", "name": "item", "reason": "unknown workflow"},
    ]
    assert [e for e, _ in rows][-1] == "completed"


def test_broadcast_to_a_full_inbox_is_logged(db, clock):
    """A subscriber whose inbox is full does not get a broadcast: the count says so, and a
    broadcast_dropped warning names it (it used to be skipped without a word)."""
    with ActorSystem(db, clock=clock, inbox_limit=1) as system:
        full = system.start(flows.subscribed_not_listening, "g", id="full")
        system.start(flows.subscribed_not_listening, "g", id="roomy")
        full.signal("filler")
        with capture_logs() as logs:
            assert system.broadcast("go", "g", 1) == 1
        dropped = [e for e in logs if e["event"] == "broadcast_dropped"]
        assert [(e["workflow_id"], e["log_level"]) for e in dropped] == [("full", "warning")]
        assert "inbox full" in dropped[0]["reason"]


@pytest.mark.parametrize("call", ["signal", "debug_send_signal", "signal_async"])
def test_a_signal_refused_by_a_full_inbox_is_logged_as_a_warning(db, clock, call):
    """A signal the caller is refused because the workflow's inbox is full (InboxFull) is also
    a warning event naming the workflow, its type and the signal (SPEC §8: a full inbox is
    misuse, logged at WARNING), as a broadcast dropped for it is; it was raised without a word."""
    import asyncio

    from actors import InboxFull

    with ActorSystem(db, clock=clock, inbox_limit=1) as system:
        ref = system.start(flows.subscribed_not_listening, "g", id="full")
        system.idle(timeout=T)
        ref.signal("filler")
        with capture_logs() as logs:
            with pytest.raises(InboxFull):
                if call == "signal_async":
                    asyncio.run(ref.signal_async("more", 1))
                else:
                    getattr(ref, call)("more", 1)
        refused = [e for e in logs if e["event"] == "signal_refused"]
        assert [(e["log_level"], e["workflow_id"], e["workflow_type"], e["signal"]) for e in refused] == [
            ("warning", "full", "tests.actors.flows:subscribed_not_listening", "more")
        ]
        assert "inbox full" in refused[0]["reason"]
