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
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

ASYNC_WORKERS = 8  # threads of a system's executor for the async calls that must block one


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
