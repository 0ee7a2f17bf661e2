"""Errors of the runtime."""

from __future__ import annotations


class ActorSystemError(Exception):
    """Root of the errors of the ``actors`` package."""


class UnknownWorkflow(ActorSystemError, KeyError):
    """No workflow has this id in the database."""

    def __init__(self, workflow_id: str, where: str = "") -> None:
        self.workflow_id = workflow_id
        msg = f"no workflow with id {workflow_id!r}" + (f" in {where}" if where else "")
        msg += "; list them with `wf list` or system.workflows()"
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
