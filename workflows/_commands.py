"""Workflow commands: the plain, picklable values a workflow awaits or records.

Awaiting a command is the one way a workflow suspends. The compiled state machine hands the command
to whoever drives it; a native coroutine (used by the differential tests) yields it the same way,
because ``Command.__await__`` yields the command itself.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Literal,
    ParamSpec,
    Protocol,
    TypeVar,
    cast,
    overload,
)

from ._context import _current
from ._errors import WorkflowError, check_id, check_text, stored_copy

if TYPE_CHECKING:
    from . import _talk
    from ._compiler._function import WorkflowFunction
from ._registry import check_plain, function_key, lookup_options

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
A1 = TypeVar("A1")
A2 = TypeVar("A2")
A3 = TypeVar("A3")
A4 = TypeVar("A4")
A5 = TypeVar("A5")
A6 = TypeVar("A6")

# Where a child runs on a cluster of nodes: its parent's shard (and node), or its own id's.
Placement = Literal["parent", "spread"]
PLACEMENTS = ("parent", "spread")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how fast a failed procedure is tried again.

    Unlike Temporal's default (retry forever), attempts are bounded by default.
    """

    maximum_attempts: int = 3
    initial_interval: float | _dt.timedelta = 1.0
    backoff_coefficient: float = 2.0
    maximum_interval: float | _dt.timedelta = 60.0
    # Exception types, or their names (plain or ``module.Qualname``), kept as names.
    non_retryable: tuple[str | type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        n = self.maximum_attempts
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"RetryPolicy.maximum_attempts must be an int >= 1, got {n!r}")
        if n < 1:
            raise ValueError(f"RetryPolicy.maximum_attempts must be an int >= 1, got {n}")
        for what in ("initial_interval", "maximum_interval"):
            value = getattr(self, what)
            # (no cap on the wait: an infinite maximum_interval)
            secs = value if what == "maximum_interval" and value == math.inf else _seconds(value, f"RetryPolicy.{what}")
            if secs < 0:
                raise ValueError(f"RetryPolicy.{what} must be >= 0 seconds, got {secs}")
            object.__setattr__(self, what, secs)
        c = self.backoff_coefficient
        if isinstance(c, bool) or not isinstance(c, (int, float)):
            raise TypeError(f"RetryPolicy.backoff_coefficient must be a number >= 1, got {c!r}")
        if not 1 <= c < math.inf:
            raise ValueError(f"RetryPolicy.backoff_coefficient must be a finite number >= 1, got {c}")
        object.__setattr__(self, "non_retryable", _error_names(self.non_retryable))

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        # (both are seconds once made: ``__post_init__`` turns a timedelta into them)
        initial, most = cast(float, self.initial_interval), cast(float, self.maximum_interval)
        return float(min(initial * self.backoff_coefficient ** (attempt - 1), most))

    def retries(self, error: BaseException) -> bool:
        """Whether an attempt that raised ``error`` may be tried again: not if ``non_retryable``
        names its type or one of its base classes (plainly or as ``module.Qualname``)."""
        names = self.non_retryable
        if not names:
            return True
        for t in type(error).__mro__:
            if t.__name__ in names or f"{t.__module__}.{t.__qualname__}" in names:
                return False
        return True


def _error_names(value: Any) -> tuple[str, ...]:
    """``RetryPolicy.non_retryable`` as names, or a TypeError saying what to write."""
    if isinstance(value, (str, type)) or not isinstance(value, (tuple, list, set, frozenset)):
        raise TypeError(
            f"RetryPolicy.non_retryable must be a tuple of exception types or their names, got "
            f"{value!r}; write it as a tuple: non_retryable=({value!r},)")
    names = []
    for item in value:
        if isinstance(item, type) and issubclass(item, BaseException):
            names.append(item.__name__ if item.__module__ == "builtins" else f"{item.__module__}.{item.__qualname__}")
        elif isinstance(item, str) and item:
            names.append(item)
        else:
            raise TypeError(
                f"RetryPolicy.non_retryable holds exception types or their names (non-empty strings), "
                f"got {item!r} in {value!r}")
    return tuple(names)


class Command:
    """Base of every awaitable workflow command."""

    __slots__ = ()
    kind: ClassVar[str] = "command"

    def __await__(self) -> Generator[Command, Any, Any]:
        if _current.get() is None:  # awaited by asyncio or a plain coroutine, not a workflow
            raise WorkflowError(
                f"await {self!r} outside a workflow: a workflow command is awaited only inside "
                "@workflow code that an ActorSystem (or a WorkflowHarness) runs; start the "
                "workflow with system.start(...) instead of awaiting its code directly"
            )
        return (yield self)

    @property
    def arm_name(self) -> str:
        """The name this command has as an arm of ``select`` (``Event.name``)."""
        raise NotImplementedError


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or a timedelta, got {value!r}")
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Timer(Command):
    """Suspend until a named timer fires. Exactly one of ``after`` and ``at`` is set."""

    name: str
    after: float | None = None
    at: float | None = None
    kind: ClassVar[str] = "timer"

    if TYPE_CHECKING:
        def __await__(self) -> Generator[Command, Any, None]: ...

    @property
    def arm_name(self) -> str:
        return self.name

    def due(self, now: float) -> float:
        """The epoch time this timer falls due, armed at ``now``."""
        if self.at is not None:
            return self.at
        assert self.after is not None
        return now + self.after


@dataclass(frozen=True)
class Signal(Command):
    """Suspend until a signal of this name arrives; the result is its payload."""

    name: str
    kind: ClassVar[str] = "signal"

    if TYPE_CHECKING:
        # A signal's payload is whatever its sender passed: Any, for the receiver to check.
        def __await__(self) -> Generator[Command, Any, Any]: ...

    @property
    def arm_name(self) -> str:
        return self.name


@dataclass(frozen=True)
class RequestCommand(Command):
    """Suspend until an ask called ``name`` arrives; the result is its ``Request``."""

    name: str
    kind: ClassVar[str] = "request"

    if TYPE_CHECKING:
        def __await__(self) -> Generator[Command, Any, _talk.Request]: ...

    @property
    def arm_name(self) -> str:
        return self.name


@dataclass(frozen=True)
class Procedure(Command, Generic[R]):
    """Call a procedure (a side effect that returns a value) and suspend until it replies.

    Generic in the procedure's return type ``R``, which ``await`` gives (for type checkers only).
    """

    function: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    retry: RetryPolicy | None = None
    name: str | None = None
    kind: ClassVar[str] = "procedure"

    if TYPE_CHECKING:
        def __await__(self) -> Generator[Command, Any, R]: ...

    @property
    def arm_name(self) -> str:
        return self.name or self.function.rpartition(":")[2].rpartition(".")[2]


@dataclass(frozen=True)
class Spawn(Command, Generic[R]):
    """Start a child workflow and suspend until it returns (``await`` gives the child's ``R``)."""

    workflow: str
    args: tuple[Any, ...] = ()
    id: str | None = None
    detached: bool = False
    name: str | None = None
    placement: str = "parent"
    kind: ClassVar[str] = "child"

    if TYPE_CHECKING:
        def __await__(self) -> Generator[Command, Any, R]: ...

    @property
    def arm_name(self) -> str:
        return self.name or self.workflow.rpartition(":")[2].rpartition(".")[2]


@dataclass(frozen=True)
class Select(Command):
    """Suspend until the first of several commands completes; the result is its ``Event``."""

    commands: tuple[Command, ...]
    kind: ClassVar[str] = "select"

    if TYPE_CHECKING:
        def __await__(self) -> Generator[Command, Any, Event]: ...


@dataclass(frozen=True)
class Gather(Command):
    """Suspend until all commands complete; the result is their results, in order."""

    commands: tuple[Command, ...]
    kind: ClassVar[str] = "gather"

    if TYPE_CHECKING:
        def __await__(self) -> Generator[Command, Any, list[Any]]: ...
    else:
        def __await__(self):
            if not self.commands and _current.get() is not None:
                return []  # nothing to wait for: at once, as asyncio.gather() (no step ends)
            return (yield from Command.__await__(self))


class ProcedureFunction(Protocol[P, R_co]):
    """The type of ``procedure(fn)`` with ``fn`` alone, for a type checker.

    That one call is both the decorator (``@procedure`` gives back ``fn`` itself) and, inside a
    workflow, the command that calls a procedure with no arguments (``await procedure(ping)``).
    So its type is both: callable as ``fn`` is, with ``fn``'s parameters and return type, and
    awaitable, giving ``fn``'s return type. At run time it is ``fn`` (outside a workflow) or a
    ``Procedure`` command (inside one).
    """

    __name__: str
    __qualname__: str
    __module__: str

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def __await__(self) -> Generator[Any, Any, R_co]: ...


_ARM_TYPES = (Timer, Signal, RequestCommand, Procedure, Spawn)


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what} name must be a non-empty string, got {name!r}")
    if name.isascii():  # the common case, checked here: a command is built at every await
        return name
    return check_text(name, f"{what} name")


def timer(name: str, after: float | _dt.timedelta | None = None, *, at: float | _dt.datetime | None = None) -> Timer:
    """A durable timer named ``name`` due ``after`` seconds from now, or at epoch time ``at``
    (seconds, or an aware ``datetime``).

    In a ``select`` the timer is armed when that ``select`` starts; for a deadline that survives
    loop turns use ``at=``.
    """
    _check_name(name, "timer")
    if (after is None) == (at is None):
        raise TypeError(f"timer({name!r}) takes exactly one of after= (seconds) or at= (epoch seconds)")
    if after is not None:
        secs = _seconds(after, f"timer({name!r}) after")
        if secs < 0:
            raise ValueError(f"timer({name!r}) after must be >= 0 seconds, got {secs}")
        return Timer(name, after=secs)
    if isinstance(at, _dt.datetime):
        if at.tzinfo is None or at.utcoffset() is None:
            raise TypeError(
                f"timer({name!r}) at is a naive datetime ({at!r}), which names no instant: give it a "
                f"tzinfo (datetime.now(timezone.utc) + ...) or pass epoch seconds")
        return Timer(name, at=at.timestamp())
    if isinstance(at, _dt.timedelta):
        raise TypeError(
            f"timer({name!r}) at is a point in time (epoch seconds or an aware datetime), got the "
            f"duration {at!r}: for a timer due that long from now, write timer({name!r}, after={at!r}), "
            f"or at=now() + {at.total_seconds():g} for a deadline that stays put")
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        raise TypeError(f"timer({name!r}) at must be epoch seconds or an aware datetime, got {at!r}")
    return Timer(name, at=_seconds(at, f"timer({name!r}) at"))


def signal(name: str) -> Signal:
    """Wait for the next signal called ``name``; ``await`` gives its payload."""
    return Signal(_check_name(name, "signal"))


def procedure(
    fn: Any,
    *args: Any,
    timeout: float | _dt.timedelta | None = None,
    retry: RetryPolicy | None = None,
    name: str | None = None,
    **kwargs: Any,
) -> Procedure[Any]:
    """Call ``fn(*args, **kwargs)`` outside the workflow; ``await`` gives its return value.

    ``fn`` must be importable by ``module:qualname`` (a ``@procedure`` function, or any
    module-level function). Options given here override the ``@procedure`` defaults.
    """
    if not callable(fn):
        raise TypeError(f"procedure() needs a function, got {fn!r}")
    check_plain(fn, "procedure")
    key = function_key(fn, "procedure")
    opts = lookup_options(fn)
    t = timeout if timeout is not None else opts.get("timeout")
    r = retry if retry is not None else opts.get("retry")
    if r is not None and not isinstance(r, RetryPolicy):
        raise TypeError(f"procedure({key}) retry= must be a RetryPolicy, got {r!r}")
    copied = stored_copy((*args, *kwargs.values()), f"procedure({key})'s arguments")
    args, kwargs = copied[: len(args)], dict(zip(kwargs, copied[len(args):], strict=True))
    return Procedure(
        key,
        tuple(args),
        dict(kwargs),
        None if t is None else _timeout(t, f"procedure({key}) timeout"),
        r,
        name,
    )


def _timeout(value: Any, what: str) -> float:
    """A procedure's timeout, per attempt: seconds (or a timedelta) > 0. One of 0 or less would
    abandon each attempt at once, or not, by how fast its thread starts."""
    secs = _seconds(value, what)
    if secs <= 0:
        raise ValueError(f"{what} must be more than 0 seconds (or None: no limit), got {value!r}")
    return secs


# ``spawn`` checks the child's arguments for a type checker, with one overload per arity up to six
# (a ParamSpec cannot be used, because ``id=``/``detached=``/``name=`` follow ``*args``; a
# TypeVarTuple could, but then mypy words its errors worse). Pass more as one dataclass.
@overload
def spawn(
    child: WorkflowFunction[[], R], /, *,
    id: str | None = None, detached: bool = False, name: str | None = None,
    placement: Placement = "parent",
) -> Spawn[R]: ...
@overload
def spawn(
    child: WorkflowFunction[[A1], R], a1: A1, /, *,
    id: str | None = None, detached: bool = False, name: str | None = None,
    placement: Placement = "parent",
) -> Spawn[R]: ...
@overload
def spawn(
    child: WorkflowFunction[[A1, A2], R], a1: A1, a2: A2, /, *,
    id: str | None = None, detached: bool = False, name: str | None = None,
    placement: Placement = "parent",
) -> Spawn[R]: ...
@overload
def spawn(
    child: WorkflowFunction[[A1, A2, A3], R], a1: A1, a2: A2, a3: A3, /, *,
    id: str | None = None, detached: bool = False, name: str | None = None,
    placement: Placement = "parent",
) -> Spawn[R]: ...
@overload
def spawn(
    child: WorkflowFunction[[A1, A2, A3, A4], R], a1: A1, a2: A2, a3: A3, a4: A4, /, *,
    id: str | None = None, detached: bool = False, name: str | None = None,
    placement: Placement = "parent",
) -> Spawn[R]: ...
@overload
def spawn(
    child: WorkflowFunction[[A1, A2, A3, A4, A5], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, /, *,
    id: str | None = None, detached: bool = False, name: str | None = None,
    placement: Placement = "parent",
) -> Spawn[R]: ...
@overload
def spawn(
    child: WorkflowFunction[[A1, A2, A3, A4, A5, A6], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, /, *,
    id: str | None = None, detached: bool = False, name: str | None = None,
    placement: Placement = "parent",
) -> Spawn[R]: ...


def spawn(
    child: Any, *args: Any, id: str | None = None, detached: bool = False, name: str | None = None,
    placement: Placement = "parent",
) -> Spawn[Any]:
    """Start ``child`` (a ``@workflow``) as a child workflow; ``await`` gives its return value.

    A child is cancelled when its parent ends, unless ``detached=True``. On a cluster of nodes a
    child runs on its parent's node (``placement="parent"``, its parent's shard), or wherever its
    own id's shard is (``placement="spread"``: children spread over the nodes).
    """
    if placement not in PLACEMENTS:
        raise ValueError(f"spawn() placement= must be one of {', '.join(map(repr, PLACEMENTS))}, got {placement!r}")
    key = getattr(child, "__workflow_key__", None)
    if key is None:
        raise TypeError(f"spawn() needs a @workflow function, got {child!r}")
    if id is not None and (not isinstance(id, str) or not id):
        raise TypeError(f"spawn() id= must be a non-empty string, got {id!r}")
    if id is not None:
        check_id(id, "spawn() id=")
    # The arguments as they are now (spawns in a loop that fills one dict again are each given
    # theirs); ones that cannot be pickled are left to the start, which names the argument.
    return Spawn(key, stored_copy(tuple(args), None), id, bool(detached), name, placement)


def _check_arms(what: str, commands: tuple[Any, ...]) -> tuple[Command, ...]:
    if not commands and what == "select":
        raise TypeError("select() needs at least one command: with none, nothing could ever win")
    for c in commands:
        if not isinstance(c, _ARM_TYPES):
            raise TypeError(
                f"{what}() takes timer(), signal(), request(), procedure() and spawn() commands, got {c!r}"
            )
    return tuple(commands)


def select(*commands: Command | ProcedureFunction[..., Any]) -> Select:
    """Wait for the first of ``commands``; ``await`` gives an ``Event`` naming the winner.

    The losers are disarmed: timers cancelled, children cancelled, procedure results discarded.
    """
    arms = _check_arms("select", commands)
    seen: dict[tuple[str, str], Command] = {}
    for c in arms:
        k = (c.kind, c.arm_name)
        if k in seen:
            fix = ("give one of them name=..." if c.kind in ("procedure", "child")
                   else f"await two different {c.kind}s, or one of them")
            raise ValueError(f"select() has two {c.kind} arms named {c.arm_name!r}; {fix}, so the Event says which fired")
        seen[k] = c
    return Select(arms)


def gather(*commands: Command | ProcedureFunction[..., Any]) -> Gather:
    """Wait for all ``commands``; ``await`` gives their results in order.

    The first failure is raised and the rest are cancelled.
    """
    return Gather(_check_arms("gather", commands))


@dataclass(frozen=True)
class Event:
    """What ``await select(...)`` returns: which arm fired, and its value.

    ``kind`` is ``"timer"``, ``"signal"``, ``"request"``, ``"procedure"`` or ``"child"``. Match it with
    ``case Event("bid", bid):``.
    """

    name: str
    value: Any = None
    kind: str = "signal"
    __match_args__ = ("name", "value")
