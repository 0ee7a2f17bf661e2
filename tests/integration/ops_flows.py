"""Workflows of the operations tests (shutdown, schedules, limits), importable by their node
processes."""

from __future__ import annotations

from workflows import reducer, signal, workflow, workflow_id


@workflow
async def gate(tag: str) -> str:
    """Waits for a ``go`` signal, then returns it with its tag."""
    got = await signal("go")
    return f"{tag}:{got}"


@reducer
def record_beat(db, wid: str) -> None:  # type: ignore[no-untyped-def]
    db["beats"].insert({"workflow_id": wid, "n": 1})


@workflow
async def beat() -> str:
    """A scheduled run of the SIGKILL test: one row per run, by a reducer (exactly once)."""
    reducer(record_beat, workflow_id())
    return workflow_id()
