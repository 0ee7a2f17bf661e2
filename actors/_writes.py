"""What the runtime writes for a workflow: a new workflow's record, a step's ending, a disarm.

Each is written once here and used by every path that needs it: a workflow's own ending, the
ending of a blocked workflow that is cancelled, the failure after too many restarts.
"""

from __future__ import annotations

import json
from typing import Any

from persistence import (
    CANCEL,
    CANCELLED,
    CHILD,
    COMPLETED,
    FAILED,
    NewWorkflow,
    OutSignal,
    StepWrite,
    dumps,
)
from workflows import Cancelled, WorkflowError
from workflows._instance import Arm

from ._procedures import error_info
from ._wait import pack_step


def new_workflow_record(
    workflow_id: str, workflow_type: str, checkpoint: bytes, fingerprint: str, *, created_at: float,
    parent_id: str | None = None, detached: bool = False, test_mode: bool = False, spread: bool = False,
) -> NewWorkflow:
    """The record of a workflow that has not run yet: its first checkpoint, waiting on nothing."""
    return NewWorkflow(
        id=workflow_id,
        type=workflow_type,
        continuation=pack_step(checkpoint, None),
        fingerprint=fingerprint,
        parent_id=parent_id,
        detached=detached,
        test_mode=bool(test_mode),
        waiting_on=None,
        created_at=created_at,
        spread=spread,
    )


def disarm(sw: StepWrite, losers: list[Arm], reason: str) -> None:
    """Add to ``sw`` what takes back the arms ``losers``: timers deleted, procedure calls
    dropped, children cancelled (unless detached)."""
    for a in losers:
        if a.kind == "timer" and a.timer_id is not None:
            sw.cancel_timers.append(a.timer_id)
        elif a.kind == "procedure" and a.proc_key is not None:
            sw.cancel_procedures.append(a.proc_key)
        elif a.kind == "child" and a.child_id is not None and not a.detached:
            sw.signals.append(OutSignal(a.child_id, "cancel", dumps(reason), CANCEL))


def end(sw: StepWrite, *, workflow_id: str, parent_id: str | None, value: Any = None,
        error: BaseException | None = None, prefix: str | None = None) -> tuple[str, Any]:
    """Make ``sw`` the ending of the workflow: COMPLETED with ``value``, or CANCELLED or FAILED
    by ``error`` (its message after ``prefix``, if given). The parent, if any, is sent the outcome.
    Returns the outcome sent: ``("ok", value)`` or ``("err", info)``."""
    if error is None:
        try:
            sw.result = dumps(value)
        except Exception as e:
            error = WorkflowError(
                f"workflow {workflow_id!r} returned a value that cannot be stored "
                f"({type(value).__name__}: {e}); return plain picklable data"
            )
    outcome: tuple[str, Any]
    if error is None:
        sw.status = COMPLETED
        outcome = ("ok", value)
        sw.history.append(("completed", json.dumps({"result": short(value)})))
    else:
        sw.result = None
        info = error_info(error)
        if prefix is not None:
            info["message"] = f"{prefix}: {info['message']}"
        if isinstance(error, Cancelled):
            sw.status = CANCELLED
            info["cancelled"] = True
            info["reason"] = error.reason  # as given (None: none), which its message does not say
            sw.history.append(("cancelled", json.dumps({"reason": error.reason})))
        else:
            sw.status = FAILED
            sw.history.append(("failed", json.dumps({"type": info["type"], "message": info["message"]})))
        sw.error = json.dumps(info)
        outcome = ("err", info)
    if parent_id is not None:
        sw.signals.append(OutSignal(parent_id, workflow_id, dumps(outcome), CHILD))
    return outcome


def short(value: Any) -> str:
    """``repr(value)``, at most 200 characters; what the value is where its repr fails (an int
    of more digits than Python writes, a ``__repr__`` that raises): the history's text of a
    result never fails the step that stores the result itself."""
    try:
        return clip(repr(value))
    except Exception as e:
        return clip(f"<{type(value).__name__} that cannot be shown: {type(e).__name__}: {e}>")


def text(value: Any) -> str:
    """``value`` as a JSON string for a step's description (None stays null): text as it is,
    anything else as its repr, at most 200 characters."""
    if value is None:
        return "null"
    return json.dumps(clip(value) if isinstance(value, str) else short(value))


def clip(s: str) -> str:
    return s if len(s) <= 200 else s[:197] + "..."
