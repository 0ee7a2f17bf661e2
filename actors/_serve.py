"""``system.serve()``: run until the process manager says stop (SIGTERM) or the user does (SIGINT).

Python's default SIGTERM ends the process at once, skipping every ``with`` block and ``finally``:
a cluster node killed that way is taken over as dead, after its heartbeat ttl. ``serve`` turns
both signals into a clean ``shutdown()`` instead (a cluster node hands its shards off first, and
shows as ``left``).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

from actors._log import Log

SIGNALS = (signal.SIGTERM, signal.SIGINT)
# How often the wait looks whether the system was shut down by other means meanwhile.
_POLL = 0.25


def serve(closed: Callable[[], bool], shutdown: Callable[[], None], db: str, log: Log) -> int:
    """Block until SIGTERM or SIGINT, then ``shutdown()``; return the signal's number (0 if the
    system was shut down otherwise meanwhile). The previous handlers are put back after."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "system.serve() must run in the main thread: only it receives SIGTERM and SIGINT. "
            "Call it there, or call system.shutdown() from your own signal handling."
        )
    got: list[int] = []
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        got.append(signum)
        stop.set()

    previous: dict[int, Any] = {s: signal.signal(s, handler) for s in SIGNALS}
    restored = False

    def restore() -> None:
        nonlocal restored
        if not restored:
            restored = True
            for s, h in previous.items():
                signal.signal(s, h)

    try:
        log.info("system_serving", db=db, stops_on="SIGTERM or SIGINT")
        while not stop.wait(_POLL):
            if closed():
                return 0
        log.info(
            "system_stop_signal",
            db=db,
            signal=signal.Signals(got[0]).name,
            then="a second signal stops the process at once",
        )
        # A second signal during the shutdown does what it did before serve(): an impatient
        # operator's second Ctrl-C (or SIGTERM) ends the process without waiting.
        restore()
        shutdown()
        return got[0]
    finally:
        restore()


async def serve_async(
    closed: Callable[[], bool], shutdown: Callable[[], Awaitable[None]], db: str, log: Log
) -> int:
    """``serve`` for asyncio code: await SIGTERM or SIGINT (taken by the running loop, which
    goes on meanwhile), then ``await shutdown()``; return the signal's number (0 if the system
    was shut down otherwise meanwhile). The previous handlers are put back after."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "system.serve_async() must run on an event loop in the main thread: only it receives "
            "SIGTERM and SIGINT. Run it there, or call system.shutdown_async() from your own "
            "signal handling."
        )
    loop = asyncio.get_running_loop()
    got: list[int] = []
    stop = asyncio.Event()

    def handler(signum: int) -> None:
        got.append(signum)
        stop.set()

    previous: dict[int, Any] = {s: signal.getsignal(s) for s in SIGNALS}
    restored = False

    def restore() -> None:
        nonlocal restored
        if not restored:
            restored = True
            for s, h in previous.items():
                loop.remove_signal_handler(s)
                signal.signal(s, h if h is not None else signal.SIG_DFL)

    for s in SIGNALS:
        loop.add_signal_handler(s, handler, s)
    try:
        log.info("system_serving", db=db, stops_on="SIGTERM or SIGINT")
        while not stop.is_set():
            if closed():
                return 0
            try:
                await asyncio.wait_for(stop.wait(), _POLL)
            except TimeoutError:
                pass
        log.info(
            "system_stop_signal",
            db=db,
            signal=signal.Signals(got[0]).name,
            then="a second signal stops the process at once",
        )
        restore()  # a second signal does what it did before, as in ``serve``
        await shutdown()
        return got[0]
    finally:
        restore()
