"""Workflows the storage-fault tests run, in processes of their own too (module level)."""

from __future__ import annotations

import os

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
def dies(log: str) -> None:
    """Take the process down in the middle of the attempt (as a crash in native code would),
    after leaving a line in ``log``."""
    with open(log, "a") as f:
        f.write("ran\n")
    os._exit(3)


@workflow
async def calls_dying(log: str) -> str:
    """Await ``dies``; say how it failed."""
    try:
        await procedure(dies, log, retry=RetryPolicy(maximum_attempts=2, initial_interval=0.01))
    except ProcedureFailed as e:
        return f"failed: {e}"
    return "returned"
