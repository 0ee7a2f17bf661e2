"""Authoring API and the ``@workflow`` compiler.

Layer rule: this package is pure. It imports only the standard library and cloudpickle; it does no
I/O, starts no threads and reads no clock. A workflow can be compiled and stepped in a unit test
with no database and no actors (see ``workflows.testing``).
"""

from ._commands import (
    Command,
    Event,
    Gather,
    Procedure,
    RequestCommand,
    RetryPolicy,
    Select,
    Signal,
    Spawn,
    Timer,
    gather,
    select,
    signal,
    spawn,
    timer,
)
from ._compiler import WorkflowFunction, workflow
from ._context import broadcast, info, now, send, subscribe, unsubscribe, workflow_id
from ._effects import procedure, reducer
from ._errors import (
    Cancelled,
    CheckpointError,
    ChildFailed,
    CompileError,
    CompileWarning,
    ProcedureFailed,
    UnknownWorkflowType,
    VersionMismatch,
    WorkflowError,
    WorkflowFailed,
)
from ._procedure_context import idempotency_key
from ._status import Status
from ._talk import Request, publish, reply, request

__all__ = [
    "Cancelled",
    "CheckpointError",
    "ChildFailed",
    "Command",
    "CompileError",
    "CompileWarning",
    "Event",
    "Gather",
    "Procedure",
    "ProcedureFailed",
    "Request",
    "RequestCommand",
    "RetryPolicy",
    "Select",
    "Signal",
    "Spawn",
    "Status",
    "Timer",
    "UnknownWorkflowType",
    "VersionMismatch",
    "WorkflowError",
    "WorkflowFailed",
    "WorkflowFunction",
    "broadcast",
    "gather",
    "idempotency_key",
    "info",
    "now",
    "procedure",
    "publish",
    "reducer",
    "reply",
    "request",
    "select",
    "send",
    "signal",
    "spawn",
    "subscribe",
    "timer",
    "unsubscribe",
    "workflow",
    "workflow_id",
]
