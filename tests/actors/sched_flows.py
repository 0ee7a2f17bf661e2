"""Workflows the schedule tests start."""

from __future__ import annotations

from workflows import reducer, timer, workflow, workflow_id


@reducer
def record_run(db, wid: str, name: str) -> None:  # type: ignore[no-untyped-def]
    db["sched_runs"].insert({"workflow_id": wid, "name": name}, pk="workflow_id")


@workflow
async def report(name: str) -> str:
    """A scheduled run: records itself once (a reducer: exactly once) and ends."""
    reducer(record_run, workflow_id(), name)
    return name


@workflow
async def slow_report(hours: float) -> str:
    """A scheduled run that takes ``hours`` of (virtual) time."""
    await timer("work", hours * 3600)
    return "done"


@workflow
async def tick_seen(name: str) -> tuple[float | None, float | None]:
    """What ``info().scheduled_at`` says before an await and after it (across a restart)."""
    from workflows import info, signal

    before = info().scheduled_at
    await signal("go")
    return before, info().scheduled_at


def made_when_called() -> object:
    """A workflow defined inside a function that no module code calls: only a process that
    called it knows it."""

    @workflow
    async def nested_report(name: str) -> str:
        return name

    return nested_report


def made_with_module() -> object:
    """A workflow defined inside a function that this module's code calls (below): importing
    the module defines it, so a restarted process finds it."""

    @workflow
    async def nested_report(name: str) -> str:
        return name

    return nested_report


NESTED_REPORT = made_with_module()
