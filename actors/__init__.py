"""The runtime: ``ActorSystem``, workflow actors, supervision, timers, procedures, the ``wf`` CLI.

Layer rule: this package may import ``workflows``, ``persistence``, pykka and structlog (and rich for
the terminal view). Nothing below it imports it.
"""

# Errors of the other layers that the runtime's calls raise, importable from here too:
# ``result()`` raises the workflow's ``WorkflowFailed`` or ``Cancelled``, ``start()`` a
# ``CheckpointError`` for arguments that cannot be kept, opening a system ``DatabaseLocked`` or
# ``NodeIdInUse``, a signal ``InboxFull``, and a call while the storage is away
# ``StorageUnavailable`` (all ``PersistenceError``s).
from persistence import (
    DatabaseLocked,
    InboxFull,
    NodeIdInUse,
    PersistenceError,
    StorageUnavailable,
)
from workflows import Cancelled, CheckpointError, Status, WorkflowFailed

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
from ._procedures import AttemptsDied, ProcedureTimeout
from ._refs import WorkflowRef
from ._schedules import ScheduleInfo
from ._system import ActorSystem

__all__ = [
    "ActorSystem",
    "ActorSystemError",
    "AskFailed",
    "AttemptsDied",
    "Cancelled",
    "CheckpointError",
    "DatabaseLocked",
    "HistoryEntry",
    "InboxFull",
    "NodeIdInUse",
    "NodeInfo",
    "PersistenceError",
    "ProcedureTimeout",
    "ScheduleInfo",
    "Status",
    "StorageUnavailable",
    "SystemClosed",
    "TimerNotArmed",
    "UnknownWorkflow",
    "WorkflowFailed",
    "WorkflowInfo",
    "WorkflowNotRunning",
    "WorkflowPruned",
    "WorkflowRef",
]
