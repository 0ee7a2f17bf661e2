"""Workflows of the operations tests (shutdown, schedules, limits), importable by their node
processes."""

from __future__ import annotations

from workflows import info, signal, timer, workflow


@workflow
async def gate(tag: str) -> str:
    """Waits for a ``go`` signal, then returns it with its tag."""
    got = await signal("go")
    return f"{tag}:{got}"


@workflow
async def tick_job(name: str) -> float | None:
    """A scheduled run: returns the tick it was started for."""
    return info().scheduled_at


@workflow
async def napper(seconds: float) -> str:
    await timer("nap", seconds)
    return "rested"
