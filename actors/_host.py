"""What a workflow actor needs of the runtime around it: a narrow interface, not the runtime."""

from __future__ import annotations

from typing import Any, Protocol

from actors._log import Log
from persistence import StepAck, StepWrite, TimerRow
from persistence._types import StepStore

from ._clock import Clock
from ._outcomes import Outcome
from ._pool import Dispatcher


class Host(Protocol):
    """The services a ``WorkflowActor`` uses. ``Runtime`` is the one implementation."""

    @property
    def store(self) -> StepStore:
        """The store, as far as an actor uses it: one workflow's steps and the reads around them."""
    clock: Clock
    dispatcher: Dispatcher
    commit_timeout: float
    workflow_log: Log  # the system's ``workflow`` logger, its context bound (``SystemLog``)
    metrics: Any  # an ``actors._metrics.Metrics``, or None when metrics are off

    def carry_out(
        self, workflow_id: str, sw: StepWrite, ack: StepAck, timers: list[TimerRow], test_mode: bool,
        seeds: dict[str, Any] | None = None, workflow_type: str | None = None,
    ) -> None:
        """Do what a committed step asked for: arm and cancel timers, dispatch procedure calls,
        start the children it created, wake the recipients of its messages."""

    def fault(self, workflow_id: str, error: BaseException, workflow_type: str | None = None) -> None:
        """A runtime fault in the workflow's actor: restart it with backoff, or escalate."""

    def finished(self, workflow_id: str, outcome: Outcome) -> None:
        """The workflow has ended (its end committed): wake those waiting for its result."""

    def message_done(self, workflow_id: str, ended: Any = None) -> None:
        """The actor has handled one message (for passivation and ``idle()``). ``ended``: the
        actor, whose workflow has ended: it stops here if no message waits for it."""

    def storage_fault(self, workflow_id: str, error: BaseException, retry: Any) -> None:
        """A write of the workflow failed for a reason of the storage (a full disk, an I/O
        error, a busy database): not a fault of the workflow. ``retry`` is delivered to its actor
        again after a backoff."""

    def fenced(self, workflow_id: str, error: BaseException) -> None:
        """A write of the workflow was refused by a cluster's fence (its shard is another
        node's now): nothing of it was written; the actor stops."""

    def storage_ok(self, workflow_id: str) -> None:
        """A write of the workflow committed: a storage episode, if one was under way, is over."""
