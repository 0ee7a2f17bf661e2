"""The engine's threads and actors: idle, passivation, commits a step waits for, shutdown.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import threading
import time

import pytest

from actors import ActorSystem

from . import flows
from .runtime_support import (
    Inside,
    T,
    _wait_until,
    record,
    ref_inbox,
)

pytestmark = pytest.mark.usefixtures("fresh_flows")


def test_idle_times_out_while_work_remains(system):
    """idle(timeout) raises TimeoutError while a procedure is still running, naming that
    procedure and its workflow (it gave only a count), and returns after."""
    flows.GATE.clear()
    ref = system.start(flows.waits_on_blocker)
    with pytest.raises(TimeoutError, match="in flight") as timed_out:
        system.idle(timeout=0.3)
    assert (
        f"procedures running now: tests.actors.flows:blocker for workflow {ref.id!r} (key {ref.id}#"
        in str(timed_out.value)
    )
    assert "give the procedure a timeout= or let it return first" in str(timed_out.value)
    flows.GATE.set()
    system.idle(timeout=T)
    assert ref.result(timeout=T) == "released"



def test_idle_counts_a_write_until_the_workflows_it_woke_have_their_messages(system, monkeypatch):
    """The writer answers a caller before it runs the commit's callbacks, which hand the new
    rows to the workflows: a broadcast, a start and a signal count as work until those ran, so
    ``idle()`` right after one never returns with a woken workflow not yet told."""
    from actors._runtime import Runtime

    seen: list[tuple[str, bool]] = []
    real_wake, real_deliver = Runtime.wake, type(system._rt.activator).deliver

    def wake(self, delivered):  # type: ignore[no-untyped-def]
        seen.append(("wake", system._idle_now()))
        real_wake(self, delivered)

    ref = system.start(flows.subscriber, "g")
    system.idle(T)
    monkeypatch.setattr(Runtime, "wake", wake)
    assert system.broadcast("go", "g", 7) == 1
    system.idle(T)
    assert ref.result(timeout=T) == 7
    assert seen and not any(idle for _, idle in seen), seen  # the broadcast's wake-up first

    def deliver(self, wid, msg):  # type: ignore[no-untyped-def]
        seen.append((type(msg).__name__, system._idle_now()))
        real_deliver(self, wid, msg)

    seen.clear()
    monkeypatch.setattr(type(system._rt.activator), "deliver", deliver)
    system.start_many(flows.sleeper, [(0,), (0,)])
    system.idle(T)
    assert [s for s in seen if s[0] == "Kick"] == [("Kick", False), ("Kick", False)]

def test_live_actors_stay_under_max_live(db, clock):
    """With max_live=5, 60 workflows all complete and no more than 5 actors are ever live."""
    seen = []
    with ActorSystem(db, clock=clock, max_live=5) as s:
        refs = [s.start(flows.waits_once, id=f"w{i}") for i in range(60)]
        s.idle(timeout=T)
        seen.append(s.live_actors())
        for i, r in enumerate(refs):
            r.signal("go", i)
            seen.append(s.live_actors())
        s.idle(timeout=T)
        assert [r.result(timeout=T) for r in refs] == list(range(60))
    assert max(seen) <= 5


def test_passivated_actors_are_freed_without_the_cycle_collector(db, clock):
    """An actor, once stopped, holds no reference cycle: reference counting frees it (and its
    workflow's state) at once, so passivation never piles work up for the cycle collector."""
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        with ActorSystem(db, clock=clock) as s:
            refs = [s.start(flows.waits_once) for _ in range(5)]
            s.idle(timeout=T)
            inside = Inside(s)
            live = inside.live_actor_objects()
            stopped = [a.actor_stopped for a in live]
            actors = [weakref.ref(a) for a in live]
            del live
            assert len(actors) == 5 and s.live_actors() == 5
            assert inside.passivate_idle(0) == 5
            assert s.live_actors() == 0
            assert all(e.wait(T) for e in stopped)
            # The stop is handled on a dispatcher thread, which lets go of the actor right after.
            deadline = time.monotonic() + T
            while any(a() is not None for a in actors) and time.monotonic() < deadline:
                time.sleep(0.001)
            assert [a() for a in actors] == [None] * 5
            for r in refs:
                r.signal("go", 1)
            assert [r.result(timeout=T) for r in refs] == [1] * 5
    finally:
        gc.enable()


def test_a_step_waiting_for_its_commit_frees_its_thread(db, clock, held_commits):
    """On one actor thread, three workflows each reach their first commit before any of them is
    committed: an actor waiting for the writer gives its thread to the others."""
    with ActorSystem(db, clock=clock) as s:
        held = held_commits(s)
        # start_many: the first steps run on the actor thread (start() would run one here).
        refs = s.start_many(flows.waits_once, [()] * 3)
        _wait_until(lambda: len(held) == 3, "each workflow's first step reached the writer")
        assert sorted(sw.workflow_id for sw, _, _ in held) == sorted(r.id for r in refs)
        held_commits.let_go(s)
        s.idle(timeout=T)
        for i, r in enumerate(refs):
            r.signal("go", i)
        assert [r.result(timeout=T) for r in refs] == [0, 1, 2]


def test_messages_to_an_actor_waiting_for_its_commit_are_handled_after_it_in_order(
    db, clock, held_commits
):

    with ActorSystem(db, clock=clock) as s:
        held = held_commits(s)
        (ref,) = s.start_many(flows.collect, [(3,)])  # its first step on the actor thread
        _wait_until(lambda: len(held) == 1, "the first step reached the writer")
        senders = []
        for i in range(3):
            t = threading.Thread(target=ref.signal, args=("item", i))
            t.start()
            senders.append(t)
            # Each signal is queued (durably appended or not) in the order sent.
            _wait_until(lambda i=i: len(ref_inbox(s, ref.id)) == i + 1, f"signal {i} queued")
        assert len(held) == 1, "nothing else ran for this workflow while its step was uncommitted"
        held_commits.let_go(s)
        for t in senders:
            t.join(T)
        assert ref.result(timeout=T) == [0, 1, 2]


def test_shutdown_lets_an_actor_waiting_for_its_commit_finish_its_messages(db, clock, held_commits):
    """The system shuts down while a step waits for the writer and a signal is queued behind it:
    the step commits, the signal's step runs and its sender is answered, then the threads stop."""

    s = ActorSystem(db, clock=clock)
    held = held_commits(s)
    (ref,) = s.start_many(flows.collect, [(1,)])  # its first step on the actor thread
    _wait_until(lambda: len(held) == 1, "the first step reached the writer")
    answered: list = []
    sender = threading.Thread(target=lambda: answered.append(ref.signal("item", "x")))
    sender.start()
    _wait_until(lambda: len(ref_inbox(s, ref.id)) == 1, "the signal queued behind the paused step")
    closer = threading.Thread(target=s.shutdown)
    closer.start()
    _wait_until(Inside(s).actors_closing, "shutdown reached the actors")
    held_commits.let_go(s)
    closer.join(T)
    sender.join(T)
    assert not closer.is_alive() and answered == [None]
    with ActorSystem(db, clock=clock) as again:
        assert again.get(ref.id).result(timeout=T) == ["x"]


def test_outcomes_queued_together_are_resolved_and_committed_together(db, clock, held_commits):
    """Children's outcomes that queue up behind a busy parent are taken in one pass: one commit
    for three of them, in the gather's order, and no read-back of the inbox per wake-up."""
    with ActorSystem(db, clock=clock) as s:
        ref = s.start(flows.gather_staggered)
        s.idle(timeout=T)
        reads: list = []
        inside = Inside(s)
        real_inbox = inside.store_method("inbox")
        inside.patch_store("inbox", lambda wid: reads.append(wid) or real_inbox(wid))
        held = held_commits(s, only=ref.id)
        clock.advance(1)
        _wait_until(lambda: len(held) == 1, "the parent committing child 1's outcome")
        clock.advance(1)
        _wait_until(lambda: len(ref_inbox(s, ref.id)) == 3, "three outcomes queued behind it")
        held_commits.let_go(s)
        assert ref.result(timeout=T) == [10, 20, 30, 40]
        # spawn, child 1's outcome, the other three with the end of the workflow
        assert record(db, ref.id).step_seq == 3
        assert reads == []


def test_events_queued_before_a_stop_are_resolved_before_it(db, clock, held_commits):
    """Events queued behind a paused parent, then the stop of shutdown: the events are resolved
    and committed before the actor stops, not left for the next start to find."""

    s = ActorSystem(db, clock=clock)
    ref = s.start(flows.gather_staggered)
    s.idle(timeout=T)
    held = held_commits(s, only=ref.id)
    clock.advance(1)
    _wait_until(lambda: len(held) == 1, "the parent committing child 1's outcome")
    clock.advance(1)
    _wait_until(lambda: len(ref_inbox(s, ref.id)) == 3, "three outcomes queued behind it")
    mailbox = Inside(s).mailbox(ref.id)  # the queue itself: shutdown forgets the actor
    closer = threading.Thread(target=s.shutdown)
    closer.start()
    _wait_until(lambda: len(mailbox) == 4, "the stop queued behind them")
    held_commits.let_go(s)
    closer.join(T)
    assert not closer.is_alive()
    rec = record(db, ref.id)  # as the shutdown left it: no system has opened it since
    assert (rec.status, rec.step_seq) == ("completed", 3)


def test_a_message_waiting_for_a_slot_takes_the_only_idle_actors_once_its_message_is_done():
    """max_live=1: a message for ``b`` waits while ``a``'s actor is busy. When ``a``'s message is
    done, ``a``'s actor, now the only idle one, is stopped (by a stop message it takes after)
    and ``b``'s starts with the waiting message. Sparing the actor that just finished left the
    message waiting for good: an ask to ``b`` was never answered."""
    from actors._activator import Activator
    from actors._work import WorkCounter

    told: list[tuple[str, str]] = []
    stopped: list[str] = []

    class Ref:
        def __init__(self, wid: str) -> None:
            self.wid = wid

        def tell(self, message: str) -> None:
            told.append((self.wid, message))

        def stop(self, block: bool = True) -> None:
            stopped.append(self.wid)

    work = WorkCounter()
    act = Activator(Ref, 1, work)  # type: ignore[arg-type]
    act.deliver("a", "ask a")
    act.deliver("b", "ask b")
    assert told == [("a", "ask a")] and act.queued() == 2
    act.done("a")
    assert stopped == ["a"] and told == [("a", "ask a"), ("b", "ask b")]
    assert act.live_count() == 1 and not act.has_waiting()
    act.done("b")
    assert work.count == 0
