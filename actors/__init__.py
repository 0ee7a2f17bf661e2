"""The runtime: ``ActorSystem``, workflow actors, supervision, timers, procedures, the ``wf`` CLI.

Layer rule: this package may import ``workflows``, ``persistence``, pykka and structlog (and rich for
the terminal view). Nothing below it imports it.
"""

from workflows import Status

from ._errors import (
    ActorSystemError,
    AskFailed,
    SystemClosed,
    TimerNotArmed,
    UnknownWorkflow,
    WorkflowNotRunning,
    WorkflowPruned,
)
from ._history import HistoryEntry
from ._info import NodeInfo, WorkflowInfo
from ._refs import WorkflowRef
from ._schedules import ScheduleInfo
from ._system import ActorSystem

__all__ = [
    "ActorSystem",
    "ActorSystemError",
    "AskFailed",
    "HistoryEntry",
    "NodeInfo",
    "ScheduleInfo",
    "Status",
    "SystemClosed",
    "TimerNotArmed",
    "UnknownWorkflow",
    "WorkflowInfo",
    "WorkflowNotRunning",
    "WorkflowPruned",
    "WorkflowRef",
]
