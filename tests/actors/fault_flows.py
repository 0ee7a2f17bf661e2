"""Workflows the storage-fault tests run, in processes of their own too (module level)."""

from __future__ import annotations

import os
import threading

from workflows import ProcedureFailed, RetryPolicy, procedure, signal, timer, workflow


@workflow
async def ticks(n: int) -> int:
    """Wait for the timer ``tick`` ``n`` times, one after another."""
    for _ in range(n):
        await timer("tick", 3600)
    return n


@workflow
async def takes(name: str) -> object:
    """Return the payload of the first signal ``name``."""
    return await signal(name)


@procedure
def dies(log: str, raises_first: int = 0) -> None:
    """Take the process down in the middle of the attempt (as a crash in native code would),
    after leaving a line in ``log``; the first ``raises_first`` attempts raise instead."""
    with open(log, "a") as f:
        f.write("ran\n")
    with open(log) as f:
        if f.read().count("ran") <= raises_first:
            raise ConnectionError("an attempt that fails in-process")
    os._exit(3)


@workflow
async def calls_dying(log: str, attempts: int = 2, raises_first: int = 0) -> str:
    """Await ``dies`` with ``attempts`` allowed; say how it failed."""
    try:
        await procedure(dies, log, raises_first,
                        retry=RetryPolicy(maximum_attempts=attempts, initial_interval=0.01))
    except ProcedureFailed as e:
        return f"failed: {e} [{e.error_type}]"
    return "returned"


STARTED = threading.Event()
RELEASE = threading.Event()


@procedure
def held(x: int) -> int:
    """Say it started, then wait for the test to let it return."""
    STARTED.set()
    RELEASE.wait(30)
    return 2 * x


@procedure(retry=RetryPolicy(maximum_attempts=2, initial_interval=10.0))
def fails_once(log: str) -> str:
    """Raise at the first attempt, return at the next (counted in ``log``)."""
    with open(log, "a") as f:
        f.write("ran\n")
    with open(log) as f:
        if f.read().count("ran") == 1:
            raise ConnectionError("the first attempt fails")
    return "ok"


@workflow
async def calls_fails_once(log: str) -> str:
    try:
        return await procedure(fails_once, log)
    except ProcedureFailed as e:
        return f"failed: {e}"
