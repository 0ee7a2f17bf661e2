"""Errors of the runtime."""

from __future__ import annotations


def span(seconds: float) -> str:
    """A duration as a person reads it: 7d, 1h, 90m, 45s."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


class ActorSystemError(Exception):
    """Root of the errors of the ``actors`` package."""


class UnknownWorkflow(ActorSystemError, KeyError):
    """No workflow has this id in the database: it never existed, or it finished and was pruned.

    ``pruned`` is how many finished workflows were ever pruned from the file (None: unknown), and
    ``retention`` the system's retention in seconds (None: kept until pruned by hand).
    """

    def __init__(
        self,
        workflow_id: str,
        where: str = "",
        *,
        pruned: int | None = None,
        retention: float | None = None,
    ) -> None:
        self.workflow_id = workflow_id
        self.pruned = pruned
        msg = f"no workflow with id {workflow_id!r}" + (f" in {where}" if where else "")
        if pruned == 0:
            msg += ": it never existed (no finished workflow was ever pruned from this file); check the id"
        else:
            kept = (
                f"this system keeps finished workflows for {span(retention)}"
                if retention is not None
                else "this system keeps finished workflows until pruned: retention=None"
            )
            count = f"; {pruned:,} finished workflows pruned from this file so far" if pruned else ""
            msg += f": it never existed, or it finished and was pruned after its retention ({kept}{count})"
        msg += ". List them with `wf list` or system.workflows()"
        super().__init__(msg)

    def __str__(self) -> str:
        return str(self.args[0])


class WorkflowNotRunning(ActorSystemError):
    """A signal, cancel or timer was sent to a workflow that has already finished."""

    def __init__(self, workflow_id: str, status: str, what: str) -> None:
        self.workflow_id = workflow_id
        self.status = status
        super().__init__(f"cannot {what}: workflow {workflow_id!r} has already finished ({status})")


class TimerNotArmed(ActorSystemError):
    """``debug_fire_timer`` named a timer the workflow is not waiting on."""

    def __init__(self, workflow_id: str, name: str, armed: list[str]) -> None:
        self.workflow_id = workflow_id
        self.name = name
        self.armed = armed
        listing = ", ".join(repr(a) for a in armed) if armed else "none"
        super().__init__(
            f"workflow {workflow_id!r} has no armed timer named {name!r}; armed timers: {listing}"
        )


class SystemClosed(ActorSystemError):
    """The ActorSystem was shut down."""
