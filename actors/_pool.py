"""Pooled pykka actors: many actors, a fixed number of threads.

pykka's ``ThreadingActor`` gives every actor an OS thread. That is fine for a thousand idle actors,
but starting and stopping one thread per activation costs about a millisecond under the GIL, and
tens of thousands of threads slow every message. ``PooledActor`` plugs into pykka's extension
points instead (``_create_future``, the inbox, ``_start_actor_loop``): an actor is a mailbox plus a
flag, and a shared dispatcher runs it on one of a few threads whenever its mailbox has messages.
Refs, ``tell``, ``ask``, ``stop`` and the registry are pykka's own, and each actor still handles one
message at a time, in order.

An actor can also pause in the middle of a message until a ``Promise`` settles (a step waiting for
its commit): ``pause_until`` gives its thread back to the dispatcher, and the actor, still
scheduled, takes no other message until the promise's callback puts it back on the dispatcher to
run the rest of that message.
"""

from __future__ import annotations

import collections
import itertools
import logging
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pykka
from pykka import ThreadingFuture

from persistence._promise import hold_wakeups, let_go

logger = logging.getLogger("actorflow.pool")

# Messages one actor handles before yielding its thread to the next scheduled actor.
SLICE = 16

class _Inbox:
    """A pykka actor inbox that schedules its actor on the dispatcher when a message arrives."""

    def __init__(self, actor: PooledActor) -> None:
        # A weak reference: actor -> inbox -> actor would be a cycle, and then every passivated
        # actor (and all it holds) would wait for the cyclic garbage collector, whose full
        # collections stall every thread.
        self._actor_ref = weakref.ref(actor)
        self._items: collections.deque[Any] = collections.deque()

    @property
    def _actor(self) -> PooledActor:
        actor = self._actor_ref()
        if actor is None:
            raise pykka.ActorDeadError("the actor of this inbox is gone")
        return actor

    def put(self, envelope: Any, /) -> None:
        actor = self._actor
        with actor._sched_lock:
            self._items.append(envelope)
            if not actor._scheduled and actor._started:
                actor._scheduled = True
                actor._dispatcher.submit(actor)

    def get(self) -> Any:
        return self._items.popleft()

    def peek(self) -> Any:
        """The next message, or None: only the actor's own thread takes messages, so it stays."""
        try:
            return self._items[0].message
        except IndexError:
            return None

    def empty(self) -> bool:
        return not self._items


class _Idle:
    """A dispatcher thread with nothing to run: asleep on a lock of its own until it is given an
    actor (or told to stop, with none). One thread is woken per actor, never several for one."""

    __slots__ = ("gate", "actor")

    def __init__(self) -> None:
        self.gate = threading.Lock()
        self.gate.acquire()  # held while the thread sleeps; released by whoever gives it work
        self.actor: PooledActor | None = None


# What a slice leaves its actor as (``PooledActor._run_slice``).
_AGAIN = 0  # still scheduled with messages left: it goes back on the run queue
_DONE = 1  # no longer scheduled (its mailbox is empty, or it stopped)
_PAUSED = 2  # still scheduled, waiting for a promise whose callback puts it back on the queue


class Dispatcher:
    """A fixed set of threads running scheduled actors, one slice of messages at a time.

    The actors to run wait in a run queue; the threads with nothing to run sleep in a stack, each
    on its own lock. An actor scheduled while a thread is idle is handed to the thread that went
    idle last, and wakes only that one; while every thread is busy it waits in the queue, and the
    first thread to end its slice takes it with no wake-up at all. One woken thread at a time: the
    actors scheduled before it starts wait in the queue, and it wakes the next as it starts. (A ``queue.SimpleQueue`` waited
    on by several idle threads wakes two of them per item: the one that takes it, and another that
    finds nothing and sleeps again.)
    """

    def __init__(self, threads: int, name: str = "actorflow-actor") -> None:
        if threads < 1:
            raise ValueError(f"the dispatcher needs at least one thread, got {threads}")
        self._lock = threading.Lock()
        self._runq: collections.deque[PooledActor] = collections.deque()
        self._idle: list[_Idle] = []
        self._waking = False  # a thread was handed an actor and woken, and has not started yet
        self._stopping = False
        # Actors scheduled: queued, running, or paused until a promise (a commit) settles.
        # Shutdown waits for none to be left, so a paused message is finished (answering a
        # signal's sender, say). Set when the count reaches zero while shutdown waits for that.
        self._in_flight = 0
        self._drained: threading.Event | None = None
        # The started actors not yet stopped. This is what keeps an actor alive (as its own thread
        # does for a pykka ThreadingActor): refs and inboxes only hold it weakly.
        self.live: set[PooledActor] = set()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(threads)
        ]
        for t in self._threads:
            t.start()

    def threads(self) -> list[threading.Thread]:
        return list(self._threads)

    @property
    def size(self) -> int:
        return len(self._threads)

    def submit(self, actor: PooledActor) -> None:
        """Run ``actor``, which has just been scheduled (it was not queued, running or paused)."""
        with self._lock:
            self._in_flight += 1
            woken = self._hand_locked(actor)
        if woken is not None:
            woken.gate.release()

    def resume(self, actor: PooledActor) -> None:
        """Run ``actor`` again: the promise its paused message waited for has settled."""
        with self._lock:
            woken = self._hand_locked(actor)
        if woken is not None:
            woken.gate.release()

    def _hand_locked(self, actor: PooledActor) -> _Idle | None:
        """Give ``actor`` to the thread that went idle last, to be woken (its gate released,
        after the lock), unless a thread woken earlier has not started yet: then it waits in the
        queue, and that thread, as it starts, wakes the next (a burst of actors wakes threads one
        after another, as each gets going, not all at once to fight over the GIL)."""
        if self._idle and not self._waking:
            sleeper = self._idle.pop()
            sleeper.actor = actor
            self._waking = True
            return sleeper
        self._runq.append(actor)
        return None

    def _next_locked(self) -> _Idle | None:
        """With actors queued, an idle thread to wake for the queue's head (None if none)."""
        if self._runq and self._idle and not self._waking:
            sleeper = self._idle.pop()
            sleeper.actor = self._runq.popleft()
            self._waking = True
            return sleeper
        return None

    def shutdown(self, timeout: float = 5.0) -> None:
        # A paused message resumes once its commit is done (the writer still runs at this point):
        # let every queued, running and paused message end before the threads stop.
        with self._lock:
            drained = None
            if self._in_flight:
                drained = self._drained = threading.Event()
        if drained is not None:
            drained.wait(timeout)
        with self._lock:
            self._stopping = True
            idle = list(self._idle)
            self._idle.clear()
        for sleeper in idle:
            sleeper.gate.release()  # with no actor: the thread ends
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout)

    def _work(self) -> None:
        me = _Idle()
        lock, runq, idle = self._lock, self._runq, self._idle
        actor: PooledActor | None = None
        outcome = _DONE
        # The callers a slice answers are let go as it ends (or before its thread blocks).
        hold_wakeups()
        while True:
            if actor is not None:
                try:
                    outcome = actor._run_slice()
                except BaseException:  # a dispatcher thread must survive any actor
                    logger.exception("actorflow: actor slice failed")
                    outcome = _DONE
                let_go()
            # One lock for the end of this slice and the start of the next: the actor goes back
            # on the queue, or is no longer counted, and this thread takes the queue's head.
            with lock:
                if actor is not None:
                    if outcome == _AGAIN:
                        runq.append(actor)
                    elif outcome == _DONE:
                        self._in_flight -= 1
                        if not self._in_flight and self._drained is not None:
                            self._drained.set()
                if runq:
                    actor = runq.popleft()
                    woken = self._next_locked()  # more queued than this thread takes: help
                else:
                    actor = woken = None  # an idle thread keeps no actor it ran alive
                    if self._stopping:
                        return
                    idle.append(me)
            if woken is not None:
                woken.gate.release()
            if actor is not None:
                continue
            me.gate.acquire()
            with lock:
                self._waking = False
                actor, me.actor = me.actor, None
                woken = self._next_locked()  # the rest of a burst: the next thread gets going
            if woken is not None:
                woken.gate.release()
            if actor is None:
                return  # woken by shutdown


_counter = itertools.count()


class PooledActor(pykka.Actor):
    """A pykka actor that runs on a shared ``Dispatcher`` instead of a thread of its own."""

    actor_inbox: _Inbox  # made by _create_actor_inbox

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        self._sched_lock = threading.Lock()
        self._scheduled = False
        self._started = False
        self._setup_done = False
        self._pause_on: Any = None  # the Promise a paused message waits for
        self._resume: Callable[[], None] | None = None
        super().__init__()

    def _create_actor_inbox(self) -> Any:  # type: ignore[override]
        # pykka calls this on the instance in Actor.__init__, before it makes the ref.
        return _Inbox(self)

    @staticmethod
    def _create_future() -> ThreadingFuture[Any]:
        return ThreadingFuture()

    def _start_actor_loop(self) -> None:
        self._dispatcher.live.add(self)
        with self._sched_lock:
            self._started = True
            self._scheduled = True
            self._dispatcher.submit(self)

    def pause_until(self, promise: Any, resume: Callable[[], None]) -> None:
        """From within a message on a dispatcher thread: run ``resume()`` once ``promise`` settles.

        The thread is free for other actors meanwhile; this actor handles nothing else until then.
        """
        self._pause_on, self._resume = promise, resume

    def _wake(self, _promise: Any) -> None:
        self._dispatcher.resume(self)

    def _run_slice(self) -> int:
        """Run up to ``SLICE`` messages (the rest of a paused one first); what it leaves the actor
        as is for the dispatcher (``_AGAIN``, ``_DONE`` or ``_PAUSED``)."""
        if not self._setup_done:
            self._setup_done = True
            self._actor_loop_setup()
        items = self.actor_inbox._items
        stopped = self.actor_stopped
        resume, self._resume = self._resume, None
        if resume is not None:
            self._guard(resume)
        handled = 0
        while True:
            promise = self._pause_on
            if promise is not None:
                if stopped.is_set():
                    break
                self._pause_on = None
                resume, self._resume = self._resume, None
                if promise.done():  # settled already (on this thread, say): go on at once
                    self._guard(resume)  # type: ignore[arg-type]
                    continue
                # Still scheduled, so no put() schedules it again: only the promise wakes it, and
                # only after this thread is done with it (this is the slice's last act).
                self._resume = resume
                promise.add_done_callback(self._wake)
                return _PAUSED
            if handled == SLICE or stopped.is_set():
                break
            # Only this thread takes messages (put() appends under the lock), so the pop needs
            # no lock; whether the mailbox is empty as the actor unschedules itself does.
            try:
                envelope = items.popleft()
            except IndexError:
                break
            handled += 1
            let_go()  # callers the last message answered: the next may take long
            self._handle_envelope(envelope)
            envelope = None
        if stopped.is_set():
            self._actor_loop_teardown()
            return _DONE
        with self._sched_lock:
            if items:
                return _AGAIN
            self._scheduled = False
            return _DONE

    def _handle_envelope(self, envelope: Any) -> None:
        try:
            response = self._handle_receive(envelope.message)
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except Exception:
            if envelope.reply_to is not None:
                envelope.reply_to.set_exception()
            else:
                self._failed()
        except BaseException:
            if envelope.reply_to is not None:
                envelope.reply_to.set_exception()
            # Unlike pykka's threads, one actor's BaseException stops that actor, not all.
            logger.exception("actorflow: %s stopped by a BaseException", self)
            self._stop()

    def _guard(self, fn: Callable[[], None]) -> None:
        """Run the rest of a paused message, with the failure handling of ``_handle_envelope``."""
        try:
            fn()
        except Exception:
            self._failed()
        except BaseException:
            logger.exception("actorflow: %s stopped by a BaseException", self)
            self._stop()

    def _failed(self) -> None:
        """From an ``except`` block: an exception no one waits for, handled as pykka does."""
        self._handle_failure(*sys.exc_info())
        try:
            self.on_failure(*sys.exc_info())
        except Exception:
            self._handle_failure(*sys.exc_info())

    def _actor_loop_teardown(self) -> None:
        self._dispatcher.live.discard(self)
        with self._sched_lock:
            super()._actor_loop_teardown()  # pykka's: answers what is left in the mailbox
