"""Pooled actors on the shared dispatcher: one message at a time per actor, in order, pauses, and
a shutdown that lets paused messages finish."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import pykka
import pytest

from actors._pool import SLICE, Dispatcher, PooledActor
from persistence._promise import Promise

WAIT = 10.0


class Recorder(PooledActor):
    """Records the messages it handles, and how many of its messages ran at once (at most one)."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        super().__init__(dispatcher)
        self.seen: list[Any] = []
        self.running = 0
        self.most = 0
        self.gates: dict[Any, Promise[None]] = {}  # message -> the promise it pauses on

    def on_receive(self, message: Any) -> Any:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            gate = self.gates.get(message)
            if gate is not None:
                self.pause_until(gate, lambda: self.seen.append(("resumed", message)))
            self.seen.append(message)
            return message
        finally:
            self.running -= 1


@pytest.fixture
def dispatcher():
    d = Dispatcher(4, name="test-pool")
    yield d
    d.shutdown(timeout=WAIT)


def test_each_actor_takes_its_messages_one_at_a_time_in_order_while_the_threads_run_many(dispatcher):
    refs = [Recorder.start(dispatcher) for _ in range(6)]
    actors = [r.actor_inbox._actor for r in refs]
    n = 3 * SLICE + 5  # more than a slice: each actor goes back on the run queue between slices

    def send(i: int) -> None:
        for k in range(n):
            refs[i].tell((i, k))

    senders = [threading.Thread(target=send, args=(i,)) for i in range(len(refs))]
    for t in senders:
        t.start()
    for t in senders:
        t.join(WAIT)
    for i, ref in enumerate(refs):
        assert ref.ask("last", timeout=WAIT) == "last"
        assert actors[i].seen == [(i, k) for k in range(n)] + ["last"]
        assert actors[i].most == 1


def test_a_paused_message_holds_its_actor_until_its_promise_settles_and_shutdown_waits_for_it():
    dispatcher = Dispatcher(2, name="test-pool")
    ref = Recorder.start(dispatcher)
    actor = ref.actor_inbox._actor
    gate: Promise[None] = Promise()
    actor.gates["first"] = gate  # set before any message: the actor reads it on its thread
    ref.tell("first")
    second = ref.ask("second", block=False)
    with pytest.raises(pykka.Timeout):
        second.get(timeout=0.05)  # the actor is paused in "first": it takes nothing else
    stopped = threading.Event()
    closer = threading.Thread(target=lambda: (dispatcher.shutdown(timeout=WAIT), stopped.set()))
    closer.start()
    assert not stopped.wait(0.05)  # shutdown waits for the paused message
    gate.set_result(None)
    assert second.get(timeout=WAIT) == "second"
    assert stopped.wait(WAIT)
    closer.join(WAIT)
    assert actor.seen == ["first", ("resumed", "first"), "second"]
    assert not any(t.is_alive() for t in dispatcher.threads())


def test_a_promise_settled_before_the_pause_goes_on_at_once(dispatcher):
    ref = Recorder.start(dispatcher)
    actor = ref.actor_inbox._actor
    done: Promise[None] = Promise()
    done.set_result(None)
    actor.gates["first"] = done
    ref.tell("first")
    assert ref.ask("second", timeout=WAIT) == "second"
    assert actor.seen == ["first", ("resumed", "first"), "second"]


def test_one_thread_runs_every_actor_queued_behind_the_one_it_runs():
    dispatcher = Dispatcher(1, name="test-pool")
    try:
        release = threading.Event()

        class Blocker(PooledActor):
            def on_receive(self, message: Any) -> Any:
                release.wait(WAIT)
                return message

        held = Blocker.start(dispatcher).ask("held", block=False)
        others = [Recorder.start(dispatcher) for _ in range(3)]
        answers = [r.ask(i, block=False) for i, r in enumerate(others)]
        release.set()
        assert held.get(timeout=WAIT) == "held"
        assert [f.get(timeout=WAIT) for f in answers] == [0, 1, 2]
    finally:
        dispatcher.shutdown(timeout=WAIT)


def test_a_stopped_actor_answers_what_is_left_in_its_mailbox_and_leaves_the_live_set(dispatcher):
    ref = Recorder.start(dispatcher)
    actor = ref.actor_inbox._actor
    assert ref.ask("one", timeout=WAIT) == "one"
    assert actor in dispatcher.live
    ref.stop(timeout=WAIT)
    assert actor not in dispatcher.live
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("late", timeout=WAIT)


def test_a_burst_of_actors_scheduled_on_idle_threads_all_run(dispatcher):
    """Actors scheduled while a woken thread has not started yet wait in the run queue; each
    thread that starts wakes the next, and a thread ending its slice takes what is queued."""
    refs = [Recorder.start(dispatcher) for _ in range(200)]
    answers = [ref.ask(i, block=False) for i, ref in enumerate(refs)]
    assert [a.get(timeout=WAIT) for a in answers] == list(range(200))
    for ref in refs:
        ref.stop(block=False)


class Answering(PooledActor):
    """Answers the promise a message carries, then (for a message with an event) waits for it."""

    def on_receive(self, message: Any) -> Any:
        reply, hold = message
        reply.answer("answered")
        if hold is not None:
            self.locked_while_running = reply._gate.locked()
            assert hold.wait(WAIT)
        return None


def test_a_caller_answered_in_a_slice_is_let_go_as_the_slice_ends(dispatcher):
    ref = Answering.start(dispatcher)
    reply: Promise[str] = Promise()
    hold = threading.Event()
    ref.tell((reply, hold))
    try:
        deadline = time.monotonic() + WAIT
        while not reply.done():
            assert time.monotonic() < deadline, "the message never answered"
            time.sleep(0.001)
        # Set, and still running (waiting for ``hold``): its waiters are not let go yet.
        assert reply._gate.locked()
    finally:
        hold.set()
    assert reply.result(WAIT) == "answered"
    assert ref.actor_inbox._actor.locked_while_running is True


def test_a_caller_answered_by_one_message_is_let_go_before_the_next_message_runs(dispatcher):
    ref = Answering.start(dispatcher)
    first: Promise[str] = Promise()
    second: Promise[str] = Promise()
    start, hold = threading.Event(), threading.Event()
    ref.tell((Promise(), start))  # holds the actor while the next two are queued: one slice
    ref.tell((first, None))
    ref.tell((second, hold))
    start.set()
    try:
        # The third message is still running (waiting for ``hold``): the first caller goes on.
        assert first._gate.acquire(timeout=WAIT), "the first caller was not let go"
        first._gate.release()
        assert first.result(0) == "answered"
        assert not second._gate.acquire(blocking=False)
    finally:
        hold.set()
    assert second.result(WAIT) == "answered"


class Stepper(PooledActor):
    """Counts how many actors run a message at once, across every actor of the dispatcher."""

    running = 0
    most = 0
    lock = threading.Lock()

    def on_receive(self, message: Any) -> Any:
        cls = type(self)
        with cls.lock:
            cls.running += 1
            cls.most = max(cls.most, cls.running)
        try:
            if callable(message):
                return message(self)
            time.sleep(0.0005)  # long enough for another thread to step, if one could
            return message
        finally:
            with cls.lock:
                cls.running -= 1


def test_one_thread_steps_at_a_time_however_many_the_engine_has():
    """The engine's threads take turns: two actors never run a message at the same moment."""
    dispatcher = Dispatcher(4, name="test-pool")
    Stepper.running = Stepper.most = 0
    try:
        refs = [Stepper.start(dispatcher) for _ in range(8)]
        answers = [ref.ask(i, block=False) for _ in range(5) for i, ref in enumerate(refs)]
        assert [a.get(timeout=WAIT) for a in answers] == [i for _ in range(5) for i in range(8)]
        assert Stepper.most == 1
    finally:
        dispatcher.shutdown(timeout=WAIT)


def _stage(staged: list[int], i: int, actor: Any) -> None:
    staged.append(i)


def test_the_writes_a_drain_stages_are_committed_once_as_it_ends():
    """What the actors of one drain stage, the thread that ran it commits in one flush, after the
    last of them and before it sleeps."""
    staged: list[int] = []
    flushes: list[list[int]] = []
    lock = threading.Lock()

    def flush() -> None:
        with lock:
            flushes.append(list(staged))
            staged.clear()

    dispatcher = Dispatcher(2, name="test-pool", flush=flush, staged=lambda: len(staged))
    try:
        release = threading.Event()
        holder = Stepper.start(dispatcher)
        held = holder.ask(lambda actor: release.wait(WAIT), block=False)  # holds the drain open
        refs = [Stepper.start(dispatcher) for _ in range(10)]
        answers = [ref.ask(functools.partial(_stage, staged, i), block=False) for i, ref in enumerate(refs)]
        release.set()
        assert held.get(timeout=WAIT) is True
        for a in answers:
            a.get(timeout=WAIT)
        deadline = time.monotonic() + WAIT
        while not flushes and time.monotonic() < deadline:
            time.sleep(0.001)
        assert flushes == [list(range(10))]
    finally:
        dispatcher.shutdown(timeout=WAIT)


def test_a_slice_that_waits_gives_the_stepping_role_to_another_thread_and_takes_it_back():
    """``blocking()`` around a wait inside a message: another actor's messages run meanwhile (on
    another thread, still one at a time), and the waiting message goes on after."""
    dispatcher = Dispatcher(2, name="test-pool")
    Stepper.running = Stepper.most = 0
    try:
        inside, release = threading.Event(), threading.Event()
        order: list[str] = []

        def wait_outside(actor: Any) -> str:
            with dispatcher.blocking():
                with Stepper.lock:
                    Stepper.running -= 1  # not stepping while it waits
                inside.set()
                assert release.wait(WAIT)
                with Stepper.lock:
                    Stepper.running += 1
            order.append("waiter")
            return "waited"

        waiter = Stepper.start(dispatcher).ask(wait_outside, block=False)
        assert inside.wait(WAIT)
        other = Stepper.start(dispatcher)
        assert other.ask(lambda actor: order.append("other") or "ran", timeout=WAIT) == "ran"
        release.set()
        assert waiter.get(timeout=WAIT) == "waited"
        assert order == ["other", "waiter"]
        assert Stepper.most == 1
    finally:
        dispatcher.shutdown(timeout=WAIT)


def test_blocking_outside_a_stepping_engine_thread_does_nothing():
    dispatcher = Dispatcher(1, name="test-pool")
    try:
        with dispatcher.blocking():
            pass  # a caller's thread: nothing to give up
    finally:
        dispatcher.shutdown(timeout=WAIT)
