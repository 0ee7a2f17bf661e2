"""Pooled pykka actors: many actors, a fixed number of threads.

pykka's ``ThreadingActor`` gives every actor an OS thread. That is fine for a thousand idle actors,
but starting and stopping one thread per activation costs about a millisecond under the GIL, and
tens of thousands of threads slow every message. ``PooledActor`` plugs into pykka's extension
points instead (``_create_future``, the inbox, ``_start_actor_loop``): an actor is a mailbox plus a
flag, and a shared dispatcher runs it on one of a few threads whenever its mailbox has messages.
Refs, ``tell``, ``ask`` and ``stop`` are pykka's own, and each actor still handles one message at
a time, in order; the actors are not listed in pykka's ``ActorRegistry`` (see ``PooledActor.start``).

An actor can also pause in the middle of a message until a ``Promise`` settles (a step waiting for
its commit): ``pause_until`` gives its thread back to the dispatcher, and the actor, still
scheduled, takes no other message until the promise's callback puts it back on the dispatcher to
run the rest of that message.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, Self

import pykka
from pykka import ThreadingFuture

from persistence._promise import hold_wakeups, let_go, wake
from persistence._writer import on_engine_thread, stage_on_this_thread

logger = logging.getLogger("actorflow.pool")

# Messages one actor handles before yielding its thread to the next scheduled actor.
SLICE = 16
# Writes a drain stages before it commits them, so that one commit's latency stays bounded.
MAX_STAGED = 512

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


class _Engine:
    """One engine thread's own state: the lock it sleeps on (held while it sleeps, released by
    whoever wakes it: to look at the run queue, to take the stepping role handed to it, or to
    end), and whether it holds the stepping role."""

    __slots__ = ("gate", "stepping")

    def __init__(self) -> None:
        self.gate = threading.Lock()
        self.gate.acquire()
        self.stepping = False


# What a slice leaves its actor as (``PooledActor._run_slice``).
_AGAIN = 0  # still scheduled with messages left: it goes back on the run queue
_DONE = 1  # no longer scheduled (its mailbox is empty, or it stopped)
_PAUSED = 2  # still scheduled, waiting for a promise whose callback puts it back on the queue

class _Current(threading.local):
    me: _Engine | None = None  # an engine thread's ``_Engine`` (a default: no failed lookup)


_current = _Current()


class Dispatcher:
    """The engine: a few threads running scheduled actors, one slice of messages at a time, only
    one of them stepping at a time, each drain of the run queue committed as one transaction.

    The thread that steps (holds the *stepping* role) drains the run queue: it runs each actor's
    slice, and a step's write is staged, not committed (the actor pauses until its commit). When
    the queue is empty (or ``MAX_STAGED`` writes are staged) it gives the role up and commits
    everything staged in one transaction (``flush``); the commit answers the callers and puts the
    paused actors back on the queue, and the same thread goes on with them: no thread hand-off
    between a step, its commit and the rest of its message. While it waits for the disk, another
    thread may take the role and step what arrived meanwhile, so that stepping and committing
    overlap; two threads never step at once (they would only fight over the GIL). A slice that
    must wait (a read from a server, a write it needs committed before it goes on) gives the role
    up for that time (``blocking``), as Python code gives the GIL up around I/O, and takes it back
    from the stepper at the end of its slice.

    The threads with nothing to do sleep in a stack, each on its own lock. An actor scheduled by
    another thread (a caller, a procedure, a timer) while nobody steps wakes one of them; one
    scheduled by an engine thread wakes nobody, as that thread looks at the queue before it sleeps.
    (A ``queue.SimpleQueue`` waited on by several idle threads wakes two of them per item.)
    """

    def __init__(
        self,
        threads: int = 4,
        name: str = "actorflow-engine",
        *,
        flush: Callable[[], None] | None = None,
        staged: Callable[[], int] | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError(f"the dispatcher needs at least one thread, got {threads}")
        self._flush = flush if flush is not None else _nothing
        self._staged = staged if staged is not None else _none_staged
        self._lock = threading.Lock()
        self._runq: collections.deque[PooledActor] = collections.deque()
        self._idle: list[_Engine] = []
        self._waking = False  # an idle thread was woken and has not looked at the queue yet
        self._stepping = False  # a thread holds the stepping role
        self._flushing = False  # a thread commits what the drains staged (one at a time)
        # Threads back from a wait (``blocking``) for the stepping role, handed to them in turn.
        self._wanting: collections.deque[_Engine] = collections.deque()
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
            woken = self._queue_locked(actor)
        if woken is not None:
            wake(woken.gate)

    def resume(self, actor: PooledActor) -> None:
        """Run ``actor`` again: the promise its paused message waited for has settled."""
        with self._lock:
            woken = self._queue_locked(actor)
        if woken is not None:
            wake(woken.gate)

    def _queue_locked(self, actor: PooledActor) -> _Engine | None:
        """Queue ``actor``; the idle thread to wake for it (its gate released after the lock), if
        nobody steps, no thread is being woken already, and the caller is no engine thread."""
        self._runq.append(actor)
        if self._stepping or self._waking or not self._idle or on_engine_thread():
            return None
        self._waking = True
        return self._idle.pop()

    def _release_locked(self, me: _Engine) -> _Engine | None:
        """``me`` gives the stepping role up: to a thread back from a wait if one wants it, else
        to nobody (an idle thread is woken for what is queued). The thread to wake, if any."""
        me.stepping = False
        if self._wanting:
            heir = self._wanting.popleft()
            heir.stepping = True  # (the role stays taken)
            return heir
        self._stepping = False
        if self._runq and self._idle and not self._waking:
            self._waking = True
            return self._idle.pop()
        return None

    def blocking(self) -> contextlib.AbstractContextManager[None]:
        """Around a wait inside a slice (a read from a server, a write committed by the writer's
        thread): the stepping role goes to another thread meanwhile, and comes back after. On any
        other thread, or one not stepping, nothing."""
        me = _current.me
        if me is None or not me.stepping:
            return contextlib.nullcontext()
        return _Blocking(self, me)

    def commit_here(self) -> bool:
        """From a slice whose message waits for its step's commit: if this thread steps and
        nothing else is queued, its drain ends with this message, so it commits what the drain
        staged now, on this thread (the stepping role given up meanwhile, as in ``blocking``),
        and the message goes on in the same slice, with no pause and no second slice. False
        (nothing done): the message pauses until the commit at the drain's end."""
        me = _current.me
        if me is None or not me.stepping:
            return False
        with self._lock:
            if self._runq or self._wanting or self._flushing or not self._staged():
                return False
            self._flushing = True
            woken = self._release_locked(me)
        if woken is not None:
            woken.gate.release()
        try:
            self._flush()
        except BaseException:  # the writer settles its writes' promises itself
            logger.exception("actorflow: commit of a drain failed")
        self._take_role_back(me, flushed=True)
        return True

    def _take_role_back(self, me: _Engine, *, flushed: bool = False) -> None:
        """``me``, back from a wait it gave the stepping role up for (and, ``flushed``, from
        the commit it made meanwhile): the role again, at once if nobody took it, else from the
        stepper as its slice ends."""
        with self._lock:
            if flushed:
                self._flushing = False
            if not self._stepping:
                self._stepping = me.stepping = True
                return
            self._wanting.append(me)
        me.gate.acquire()  # the stepper hands the role over as its slice ends

    def shutdown(self, timeout: float = 5.0) -> None:
        # A paused message resumes once its commit is done: let every queued, running and paused
        # message end before the threads stop.
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
            sleeper.gate.release()  # stopping: the thread ends
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout)

    def _work(self) -> None:
        stage_on_this_thread()  # what it writes, it commits at the end of its drain
        me = _current.me = _Engine()
        lock, runq, idle = self._lock, self._runq, self._idle
        staged = self._staged
        actor: PooledActor | None = None
        outcome = _DONE
        flush = False  # this thread commits (its last turn of the loop did)
        # The callers a slice or a commit answers are let go before this thread blocks (a
        # commit, its sleep) or runs the next slice, not while it still holds the GIL for the
        # rest of its work: woken at once, they would only wait for that GIL.
        hold_wakeups()
        while True:
            if actor is not None:
                try:
                    outcome = actor._run_slice()
                except BaseException:  # an engine thread must survive any actor
                    logger.exception("actorflow: actor slice failed")
                    outcome = _DONE
                if runq:
                    let_go()  # (else at the commit, or the sleep, this turn ends with)
            woken: _Engine | None = None
            with lock:
                if actor is not None:
                    if outcome == _AGAIN:
                        runq.append(actor)
                    elif outcome == _DONE:
                        self._in_flight -= 1
                        if not self._in_flight and self._drained is not None:
                            self._drained.set()
                    actor = None
                if flush:
                    self._flushing = flush = False  # this thread's commit is done
                if me.stepping:
                    if runq and not self._wanting and staged() < MAX_STAGED:
                        actor = runq.popleft()
                    else:
                        # The end of this thread's drain: it commits what it staged (unless a
                        # commit is under way: the committing thread takes it next), and a
                        # thread back from a wait, or an idle one, takes the role meanwhile.
                        woken = self._release_locked(me)
                        if staged() and not self._flushing:
                            self._flushing = flush = True
                elif runq and not self._stepping:
                    self._stepping = me.stepping = True
                    actor = runq.popleft()
                elif staged() and not self._flushing and not self._stepping:
                    # What a drain staged while this thread committed: committed now, in one.
                    self._flushing = flush = True
                if actor is None and not flush:
                    if self._stopping and not runq:
                        return
                    idle.append(me)
            if woken is not None:
                woken.gate.release()
            if actor is not None:
                continue
            if flush:
                try:
                    self._flush()
                except BaseException:  # the writer settles its writes' promises itself
                    logger.exception("actorflow: commit of a drain failed")
                continue  # (its callers are let go as the slices it resumed end)
            let_go()
            me.gate.acquire()
            with lock:
                self._waking = False


class _Blocking:
    """``Dispatcher.blocking()`` on a stepping engine thread."""

    __slots__ = ("_d", "_me")

    def __init__(self, dispatcher: Dispatcher, me: _Engine) -> None:
        self._d, self._me = dispatcher, me

    def __enter__(self) -> None:
        d = self._d
        with d._lock:
            woken = d._release_locked(self._me)
        if woken is not None:
            woken.gate.release()
        let_go()  # the callers answered so far go on while this thread waits

    def __exit__(self, *exc: object) -> None:
        self._d._take_role_back(self._me)


def _nothing() -> None:
    return None


def _none_staged() -> int:
    return 0


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

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> pykka.ActorRef[Self]:
        """Start an actor as ``pykka.Actor.start`` does, without listing it in pykka's
        ``ActorRegistry``. The registry is a list: each actor's stop looks it up there and
        removes it, a scan of every live actor (with 50,000 live, 1.7 ms a stop, where a short
        workflow costs 0.3 ms in all). Nothing finds these actors through it: the activator
        holds them by workflow id, and the dispatcher until they stop."""
        obj = cls(*args, **kwargs)
        obj._start_actor_loop()
        return obj.actor_ref

    def _start_actor_loop(self) -> None:
        self._dispatcher.live.add(self)
        with self._sched_lock:
            self._started = True
            if not self.actor_inbox._items and type(self).on_start is pykka.Actor.on_start:
                # Nothing to do before its first message, whose put() schedules it: a slice now
                # would find the mailbox empty (its starter tells it that message next).
                return
            self._scheduled = True
            self._dispatcher.submit(self)

    def retire(self) -> None:
        """From within its own message, on its dispatcher thread, with nothing left in its
        mailbox: stop, as a stop message would, without one (the slice ends it there)."""
        self._stop()

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
            # Only this thread takes messages (put() appends under the lock), so it may look at
            # the mailbox and pop with no lock; whether it is empty as the actor unschedules
            # itself is looked at under the lock, below.
            if not items or handled == SLICE or stopped.is_set():
                break
            envelope = items.popleft()
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
