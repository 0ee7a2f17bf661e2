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
import queue
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pykka
from pykka import ThreadingFuture

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


class Dispatcher:
    """A fixed set of threads running scheduled actors, one slice of messages at a time."""

    def __init__(self, threads: int, name: str = "actorflow-actor") -> None:
        if threads < 1:
            raise ValueError(f"the dispatcher needs at least one thread, got {threads}")
        self._queue: queue.SimpleQueue[PooledActor | None] = queue.SimpleQueue()
        # Slices queued or running, plus actors paused until a commit (a paused actor stays
        # counted from its pause to its next slice): shutdown waits for none to be left, so a
        # paused message is finished (answering a signal's sender, say).
        self._in_flight = 0
        self._state = threading.Condition(threading.Lock())
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
        self._count(1)
        self._queue.put(actor)

    def _count(self, n: int) -> None:
        with self._state:
            self._in_flight += n
            if not self._in_flight:
                self._state.notify_all()

    def shutdown(self, timeout: float = 5.0) -> None:
        # A paused message resumes once its commit is done (the writer still runs at this point):
        # let every queued, running and paused message end before the threads stop.
        with self._state:
            self._state.wait_for(lambda: not self._in_flight, timeout)
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout)

    def _work(self) -> None:
        while True:
            actor = self._queue.get()
            if actor is None:
                return
            try:
                actor._run_slice()
            except BaseException:  # a dispatcher thread must survive any actor
                logger.exception("actorflow: actor slice failed")
            finally:
                self._count(-1)
            actor = None  # an idle thread must not keep the last actor it ran alive


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
        self._dispatcher.submit(self)
        self._dispatcher._count(-1)  # the pause's own count, now carried by the slice

    def _run_slice(self) -> None:
        if not self._setup_done:
            self._setup_done = True
            self._actor_loop_setup()
        inbox = self.actor_inbox
        resume, self._resume = self._resume, None
        if resume is not None:
            self._guard(resume)
        for _ in range(SLICE):
            if self._pause_on is not None or self.actor_stopped.is_set():
                break
            with self._sched_lock:
                if inbox.empty():
                    break
                envelope = inbox.get()
            self._handle_envelope(envelope)
        if self._pause_on is not None and not self.actor_stopped.is_set():
            # Still scheduled, so no put() schedules it again: only the promise wakes it, and only
            # after this thread is done with it.
            promise, self._pause_on = self._pause_on, None
            self._dispatcher._count(1)
            promise.add_done_callback(self._wake)
            return
        if self.actor_stopped.is_set():
            self._actor_loop_teardown()
            return
        with self._sched_lock:
            if inbox.empty():
                self._scheduled = False
            else:
                self._dispatcher.submit(self)

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
