"""The asyncio side of the client API: awaiting the engine without blocking the event loop.

Two kinds of call. One that only waits for the engine (``result_async``: a workflow to finish)
awaits an asyncio future that the engine completes through ``loop.call_soon_threadsafe``; no
thread waits for it, so thousands may be pending at once. One that must run on a thread (a start
runs the workflow's first step and waits for its commit; a signal, a cancel or a broadcast waits
for its write to be durable; reading a workflow's row) runs on the system's own small executor,
never on the loop's default one, so the loop stays free and the number of threads stays bounded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

ASYNC_WORKERS = 8  # threads of a system's executor for the async calls that must block one
# A read takes milliseconds: a caller's deadline closer than this still gives it this long.
READ_WAIT_MIN = 0.25


class AsyncBridge:
    """Per system: the bounded executor of the async calls, and the waits to wake at shutdown."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None  # made at the first async call
        self._closed = False
        self._waits: dict[asyncio.Future[None], asyncio.AbstractEventLoop] = {}

    async def run(self, closed: Callable[[], BaseException], fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` on the system's executor; ``closed()`` is raised once shut down.

        Cancelling the awaiting task does not stop ``fn`` once it runs (a start, say, still
        commits); it stops only the wait for its outcome.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise closed()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(ASYNC_WORKERS, thread_name_prefix="actorflow-async")
            # In the caller's context: its events name the node whose async call this is.
            future = self._pool.submit(contextvars.copy_context().run, functools.partial(fn, *args, **kwargs))
        return await asyncio.wrap_future(future, loop=loop)

    def submit(self, closed: Callable[[], BaseException], fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """``fn()`` on the system's executor, for a blocking caller that waits for it with a time
        limit (``read_within``); ``closed()`` is raised once shut down."""
        with self._lock:
            if self._closed:
                raise closed()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(ASYNC_WORKERS, thread_name_prefix="actorflow-async")
            return self._pool.submit(contextvars.copy_context().run, fn)

    async def run_within(self, closed: Callable[[], BaseException], wait: float | None,
                         late: Callable[[float], BaseException], fn: Callable[P, T],
                         *args: P.args, **kwargs: P.kwargs) -> T:
        """``run``, waited for up to ``wait`` seconds (None: as long as it takes); past that,
        ``late(wait)`` is raised (the call goes on, and its outcome is dropped)."""
        if wait is None:
            return await self.run(closed, fn, *args, **kwargs)
        task = asyncio.ensure_future(self.run(closed, fn, *args, **kwargs))
        done, _ = await asyncio.wait({task}, timeout=wait)
        if not done:
            task.cancel()
            raise late(wait)
        return task.result()

    async def run_alone(self, fn: Callable[[], None], name: str) -> None:
        """``fn()`` on a thread of its own (not the executor, which ``fn`` may close: a shutdown),
        awaited without blocking the loop. Cancelling the awaiting task stops only the wait."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def run() -> None:
            try:
                fn()
            except BaseException as e:  # handed to the awaiting task, as a call of its own
                error = e
                with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                    loop.call_soon_threadsafe(_fail, future, error)
            else:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_complete, future)

        threading.Thread(target=run, name=name).start()
        await asyncio.shield(future)

    def waiter(self) -> tuple[asyncio.Future[None], Callable[[object], None]]:
        """A future on the running loop and a callback that completes it from any thread.

        The callback is for an engine's done-callback: it never blocks, and does nothing if the
        future is done already or its loop has closed. ``shutdown`` completes every such future
        still pending, so a waiter sees the system close at once.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def wake(_: object = None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
                loop.call_soon_threadsafe(_complete, future)

        with self._lock:
            if self._closed:
                future.set_result(None)
            else:
                self._waits[future] = loop
        future.add_done_callback(self._forget)
        return future, wake

    def _forget(self, future: asyncio.Future[None]) -> None:
        with self._lock:
            self._waits.pop(future, None)

    def close(self) -> None:
        """Wake every pending waiter, then let the calls running on the executor finish."""
        with self._lock:
            self._closed = True
            waits, self._waits = self._waits, {}
            pool, self._pool = self._pool, None
        for future, loop in waits.items():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_complete, future)
        if pool is not None:
            pool.shutdown(wait=True)


def _complete(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _fail(future: asyncio.Future[None], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def read_wait(sysm: Any, remaining: float | None) -> float | None:
    """How long a caller with ``remaining`` seconds left waits for a read of the storage: None
    (the read runs on the caller's thread, as long as it takes) without a deadline or where the
    storage is a local file, whose reads do not hang; else ``remaining``, at least
    ``READ_WAIT_MIN``."""
    if remaining is None or not sysm._rt.store.remote_reads():
        return None
    return max(READ_WAIT_MIN, remaining)


def read_late(sysm: Any, what: str) -> Callable[[float], TimeoutError]:
    """The error of a read (for ``what``) that the storage did not answer in time."""

    def late(wait: float) -> TimeoutError:
        where = getattr(sysm._rt.store, "path", "the database")
        return TimeoutError(
            f"{what}: the storage ({where}) did not answer within {wait:g}s (a database server "
            f"that does not respond, or is unreachable without an error); try again once it answers"
        )

    return late


def read_within(sysm: Any, remaining: float | None, what: str, read: Callable[[], T]) -> T:
    """``read()`` for a blocking caller with ``remaining`` seconds left (``what`` it is for): on
    a server, it runs on the system's executor and is waited for ``read_wait``; a server that does
    not answer in that time (frozen, or gone without an error: a read would hang for its
    connection timeout) raises ``TimeoutError`` saying so. Without a deadline, or on a local file,
    it runs here."""
    wait = read_wait(sysm, remaining)
    if wait is None:
        return read()
    future: concurrent.futures.Future[T] = sysm._aio.submit(sysm._closed_error, read)
    try:
        return future.result(wait)
    except concurrent.futures.TimeoutError:
        if future.done():  # the read's own outcome (a TimeoutError of its own, say)
            return future.result(0)
        raise read_late(sysm, what)(wait) from None
