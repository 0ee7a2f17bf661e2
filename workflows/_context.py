"""The step context: what non-suspending calls (reducer, send, now, ...) record into.

A workflow step runs with a ``StepContext`` active (a ``contextvars`` variable, so no threads and no
globals are involved). The calls below append ``Effect`` values to it in call order; whoever runs
the step (the pure harness or the actor runtime) commits them with the step.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any

from ._errors import WorkflowError, check_json, check_text, stored_copy
from ._registry import check_plain, function_key

_current: contextvars.ContextVar[StepContext | None] = contextvars.ContextVar(
    "actorflow_step", default=None
)


@dataclass(frozen=True)
class ReducerCall:
    """``reducer(f, *args)``: run ``f(db, *args)`` in the step's transaction."""

    function: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Subscribe:
    """``subscribe(name, filter_value)``: receive broadcasts of ``name`` matching the filter."""

    name: str
    filter_value: Any = None


@dataclass(frozen=True)
class Unsubscribe:
    """``unsubscribe(name, filter_value)``."""

    name: str
    filter_value: Any = None


@dataclass(frozen=True)
class Send:
    """``send(workflow_id, name, payload)``: a signal to another workflow, on commit."""

    workflow_id: str
    name: str
    payload: Any = None


@dataclass(frozen=True)
class Broadcast:
    """``broadcast(name, filter_value, payload)``: a signal to every matching subscriber."""

    name: str
    filter_value: Any = None
    payload: Any = None


@dataclass(frozen=True)
class Publish:
    """``publish(key, value)``: ``value`` readable by clients under ``key`` once the step commits."""

    key: str
    value: Any = None


@dataclass(frozen=True)
class Reply:
    """``reply(req, value)`` or ``reply(req, error=exc)``: the answer to ask ``ask_id``, stored
    with the step (``error`` set: the asker's ``AskFailed`` carries it)."""

    ask_id: str
    name: str
    value: Any = None
    error: BaseException | None = None


Effect = ReducerCall | Subscribe | Unsubscribe | Send | Broadcast | Publish | Reply


@dataclass(frozen=True)
class WorkflowInfoView:
    """What ``info()`` returns inside a workflow."""

    workflow_id: str
    workflow_type: str
    parent_id: str | None
    test_mode: bool = False
    scheduled_at: float | None = None  # the tick (epoch seconds) of a run a schedule started

    # The names ``WorkflowInfo`` gives them too (``ref.info().id``, ``.type``).
    @property
    def id(self) -> str:
        """The workflow's id (``workflow_id``)."""
        return self.workflow_id

    @property
    def type(self) -> str:
        """The workflow's type, ``module:qualname`` (``workflow_type``)."""
        return self.workflow_type


@dataclass
class StepContext:
    """The context one step runs in: identity, the clock reading, and the effects it records."""

    workflow_id: str = "test"
    workflow_type: str = ""
    parent_id: str | None = None
    now: float = 0.0
    test_mode: bool = False
    effects: list[Effect] = field(default_factory=list)
    scheduled_at: float | None = None

    def active(self) -> _Active:
        """Make this the current step context for the duration of the ``with``."""
        return _Active(self)


class _Active:
    """``with ctx.active():`` (a class, not a generator: it is entered at every step)."""

    __slots__ = ("_ctx", "_token")

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx

    def __enter__(self) -> StepContext:
        self._token = _current.set(self._ctx)
        return self._ctx

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


def current(what: str) -> StepContext:
    """The active step context, or a ``WorkflowError`` naming ``what`` was called outside one."""
    ctx = _current.get()
    if ctx is None:
        raise WorkflowError(
            f"{what}() was called outside a running workflow step; it is only valid inside "
            "@workflow code that an ActorSystem (or a WorkflowHarness) runs"
            + (" (call the function directly if you meant to run it now)" if what == "reducer" else "")
        )
    return ctx


def _check_payload_name(name: Any, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what}() name must be a non-empty string, got {name!r}")
    check_text(name, f"{what}() name")


def reducer(fn: Any, *args: Any, **kwargs: Any) -> None:
    """Record ``fn(db, *args)``; it runs exactly once, in call order, in the step's transaction."""
    if not callable(fn):
        raise TypeError(f"reducer() needs a function, got {fn!r}")
    check_plain(fn, "reducer")
    ctx = current("reducer")
    # Its arguments as they are now: it runs when the step commits, after the rest of the step.
    copied = stored_copy((*args, *kwargs.values()), None)
    args, kwargs = copied[: len(args)], dict(zip(kwargs, copied[len(args):], strict=True))
    ctx.effects.append(ReducerCall(function_key(fn, "reducer"), tuple(args), kwargs))


def subscribe(name: str, filter_value: Any = None) -> None:
    """Receive broadcasts of signal ``name`` whose filter value equals ``filter_value``."""
    _check_payload_name(name, "subscribe")
    check_json(filter_value, f"subscribe({name!r}) filter value")
    current("subscribe").effects.append(Subscribe(name, filter_value))


def unsubscribe(name: str, filter_value: Any = None) -> None:
    """Stop receiving broadcasts of ``name`` with ``filter_value``."""
    _check_payload_name(name, "unsubscribe")
    check_json(filter_value, f"unsubscribe({name!r}) filter value")
    current("unsubscribe").effects.append(Unsubscribe(name, filter_value))


def send(workflow_id: str, name: str, payload: Any = None) -> None:
    """Signal ``name`` to workflow ``workflow_id`` when this step commits."""
    if not isinstance(workflow_id, str) or not workflow_id:
        raise TypeError(f"send() workflow_id must be a non-empty string, got {workflow_id!r}")
    check_text(workflow_id, "send() workflow_id")
    _check_payload_name(name, "send")
    (payload,) = stored_copy((payload,), f"send({workflow_id!r}, {name!r}) payload")
    current("send").effects.append(Send(workflow_id, name, payload))


def broadcast(name: str, filter_value: Any = None, payload: Any = None) -> None:
    """Signal ``name`` to every workflow subscribed with ``filter_value``, when this step commits."""
    _check_payload_name(name, "broadcast")
    check_json(filter_value, f"broadcast({name!r}) filter value")
    (payload,) = stored_copy((payload,), f"broadcast({name!r}) payload")
    current("broadcast").effects.append(Broadcast(name, filter_value, payload))


def now() -> float:
    """The workflow clock's time (epoch seconds) at the start of this step."""
    return current("now").now


def workflow_id() -> str:
    """The id of the running workflow."""
    return current("workflow_id").workflow_id


def info() -> WorkflowInfoView:
    """The running workflow's id, type, parent, test mode and, for a run a schedule started, its
    tick (``scheduled_at``, epoch seconds; None otherwise)."""
    c = current("info")
    return WorkflowInfoView(c.workflow_id, c.workflow_type, c.parent_id, c.test_mode, c.scheduled_at)
