"""Workflows the storage-fault tests run, in processes of their own too (module level)."""

from __future__ import annotations

from workflows import signal, timer, workflow


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
