"""Errors of the runtime."""

from __future__ import annotations

from persistence._errors import rebuilt_error
from workflows import Status

from ._info import utc_text


def span(seconds: float) -> str:
    """A duration as a person reads it: 7d, 1h, 90m, 45s."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


class BadTimeoutType(TypeError, ValueError):
    """A timeout that is not a number at all: a ``TypeError``, as Python raises for a wrong type,
    and the ``ValueError`` of a bad timeout, which it has always been."""


def check_timeout(timeout: float | None, what: str, *, nothing_sent: bool = False) -> None:
    """A timeout is seconds to wait, 0 or more, or None (no bound); else a ValueError naming
    ``what`` (and saying that nothing was sent, for a call checked before it sends), that is a
    TypeError too when the timeout is no number."""
    if timeout is None:
        return
    wrong_type = isinstance(timeout, bool) or not isinstance(timeout, int | float)
    if wrong_type or not timeout >= 0:
        raise (BadTimeoutType if wrong_type else ValueError)(
            f"{what}() timeout must be a number of seconds, 0 or more (or None: no bound), got "
            f"{timeout!r}" + ("; nothing was sent" if nothing_sent else "")
        )


class ActorSystemError(Exception):
    """Root of the errors of the ``actors`` package."""

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled and copied as they are (to another process, by copy.copy): their __init__
        # takes other parameters than their args, which the default way passes it again.
        return (rebuilt_error, (type(self), self.args, dict(self.__dict__)))


class UnknownWorkflow(ActorSystemError, KeyError):
    """No workflow has this id in the database: it never existed, or it finished and was pruned.

    ``pruned`` is how many finished workflows were ever pruned from the database (None: unknown), and
    ``retention`` the system's retention in seconds (None: kept until pruned by hand). Where the
    workflow's tombstone says it was pruned, ``workflow_type``, ``status`` (how it ended) and
    ``ended_at`` say what it was (else None): a caller whose workflow was pruned while it waited
    for it (``result()`` after ``start()`` of an id that finished long ago) can tell that it
    completed.
    """

    def __init__(
        self,
        workflow_id: str,
        where: str = "",
        *,
        pruned: int | None = None,
        retention: float | None = None,
        ended: tuple[str, str, float, float] | None = None,
    ) -> None:
        self.workflow_id = workflow_id
        self.pruned = pruned
        self.workflow_type: str | None = None
        # A ``Status``, as ``WorkflowNotRunning.status`` (a str enum: it equals its text too).
        self.status: Status | str | None = None
        self.ended_at: float | None = None
        msg = f"no workflow with id {workflow_id!r}" + (f" in {where}" if where else "")
        if ended is not None:  # its tombstone: (type, status, ended_at, pruned_at)
            wtype, status, ended_at, pruned_at = ended
            self.workflow_type, self.status, self.ended_at = wtype, _status(status), ended_at
            msg += (
                f": it ({wtype}) ended {status} at {_utc(ended_at)} and was pruned at "
                f"{_utc(pruned_at)}, with its result and history"
            )
        elif pruned == 0:
            msg += ": it never existed (no finished workflow was ever pruned from this database); check the id"
        else:
            kept = (
                f"this system keeps finished workflows for {span(retention)}"
                if retention is not None
                else "this system keeps finished workflows until pruned: retention=None"
            )
            count = f"; {pruned:,} finished workflows pruned from this database so far" if pruned else ""
            msg += f": it never existed, or it finished and was pruned after its retention ({kept}{count})"
        msg += ". List them with `wf list` or system.workflows()"
        super().__init__(msg)

    def __str__(self) -> str:
        return str(self.args[0])


def _status(text: str) -> Status | str:
    """``text`` as a ``Status`` (a str enum: it equals its text too); other text as it is."""
    return Status(text) if text in Status._value2member_map_ else text


class WorkflowNotRunning(ActorSystemError):
    """A signal, cancel or timer was sent to a workflow that has already finished."""

    def __init__(self, workflow_id: str, status: str, what: str) -> None:
        self.workflow_id = workflow_id
        # A ``Status`` (a str enum: it equals its text too).
        self.status: Status | str = _status(status)
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
    """The ActorSystem was shut down.

    ``ask_id`` names the ask a caller's ``ask()`` waited for when the shutdown ended its wait
    (the request stays stored: asked again with that ``ask_id``, it gets the reply); else None.
    """

    ask_id: str | None = None


class NothingPublished(TimeoutError, KeyError):
    """``published(key, timeout=...)`` waited its timeout and the workflow published nothing
    under ``key``: a ``TimeoutError`` (the wait ran out) that is also the ``KeyError`` a read
    without a wait raises, so ``except KeyError`` catches "nothing published" either way."""


class AskFailed(ActorSystemError):
    """The workflow answered an ask with ``reply(req, error=exc)``.

    ``error`` is the exception it replied (None if it could not be stored or loaded here),
    ``error_type`` and ``error_message`` its type's name and message as stored.
    """

    def __init__(self, workflow_id: str, name: str, ask_id: str, error_type: str | None,
                 error_message: str | None, error: BaseException | None = None) -> None:
        self.workflow_id = workflow_id
        self.name = name
        self.ask_id = ask_id
        # Always stored with a reply's error (typed so); "" where a row had none.
        self.error_type: str = error_type or ""
        self.error_message: str = error_message or ""
        self.error = error
        super().__init__(
            f"ask {name!r} (id {ask_id!r}) to workflow {workflow_id!r} was refused: "
            f"{error_type}: {error_message}"
        )


def _utc(t: float) -> str:
    return utc_text(t)


class WorkflowPruned(UnknownWorkflow):
    """``start`` with the id of a finished workflow that was pruned: the id stays taken for the
    system's ``id_retention`` (its tombstone), so that "start it by id on every run" never runs a
    finished workflow twice. ``start(..., reuse_id=True)`` starts a new one under the id."""

    # Always known here (its tombstone said them), where the base's may be None.
    workflow_type: str
    status: Status | str
    ended_at: float

    def __init__(self, workflow_id: str, workflow_type: str, status: str, ended_at: float) -> None:
        self.workflow_type = workflow_type
        self.status = _status(status)
        self.ended_at = ended_at
        when = utc_text(ended_at, "%Y-%m-%d %H:%M:%S")
        KeyError.__init__(
            self,
            f"workflow {workflow_id!r} ({workflow_type}) ended {status} at {when}Z and was pruned; "
            f"its id stays taken for the system's id_retention. Start it with reuse_id=True to "
            f"run a new workflow under this id, or choose another id",
        )
        self.workflow_id = workflow_id
        self.pruned = None
