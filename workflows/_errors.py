"""Errors raised by workflow authoring, compiling and stepping.

Every error here pickles and unpickles with its data intact: errors travel inside continuations
(a pending exception while a ``finally`` awaits), across the procedure pool and between parent and
child workflows. That includes what user code added to one it caught: ``__notes__`` from
``add_note`` and any other attribute (``e.extra = 5``).
"""

from __future__ import annotations

from typing import Any


class WorkflowError(Exception):
    """Root of the errors of the ``workflows`` package."""


class CompileError(SyntaxError, WorkflowError):
    """A workflow uses a construct that cannot be compiled; raised at decoration time.

    A ``SyntaxError`` subclass, so Python's own formatter prints file, line and a caret. When a
    workflow has several problems, ``problems`` holds every one and the message counts the rest.
    """

    def __init__(
        self,
        message: str,
        filename: str | None = None,
        lineno: int | None = None,
        offset: int | None = None,
        text: str | None = None,
        end_lineno: int | None = None,
        end_offset: int | None = None,
        problems: list[CompileError] | None = None,
    ) -> None:
        super().__init__(message, (filename, lineno, offset, text, end_lineno, end_offset))
        self.problems: list[CompileError] = problems if problems is not None else [self]

    def __reduce__(self) -> Any:
        args = (
            self.msg,
            self.filename,
            self.lineno,
            self.offset,
            self.text,
            self.end_lineno,
            self.end_offset,
        )
        return _with_added(CompileError, args, self, ("problems",))


class CompileWarning(UserWarning):
    """A workflow compiles, but uses a construct that may fail or surprise after a restart.

    Issued at decoration time and attributed to the workflow's own file and line: a ``with`` whose
    body awaits (its manager is checkpointed, so it must pickle) and writes to ``global`` names
    (module state is not checkpointed).
    """


class _DataError(WorkflowError):
    """Base for errors that carry keyword data; pickles by its fields."""

    _fields: tuple[str, ...] = ()

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        for name in self._fields:
            setattr(self, name, data.get(name))

    def __reduce__(self) -> Any:
        fields = {n: getattr(self, n) for n in self._fields}
        return _with_added(_rebuild, (type(self), self.message, fields), self, ("message", *self._fields))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[_DataError], message: str, data: dict[str, Any]) -> _DataError:
    return cls(message, **data)


def _with_added(func: Any, args: tuple[Any, ...], e: BaseException, own: tuple[str, ...]) -> Any:
    """A reduce value that also carries the attributes user code added (notes, ``e.extra``)."""
    added = {k: v for k, v in e.__dict__.items() if k not in own}
    if added:
        return (func, args, added)  # BaseException.__setstate__ sets them back
    return (func, args)


class WorkflowFailed(_DataError):
    """``result()`` of a workflow whose code raised.

    Carries the original error's type name, message and traceback text (the original object may
    not survive a restart, its text always does).
    """

    _fields = ("workflow_id", "error_type", "error_message", "traceback")
    # Always set by the engine (the typing says so); None only in one built by hand without them.
    workflow_id: str
    error_type: str
    error_message: str
    traceback: str


class ProcedureFailed(_DataError):
    """Raised at ``await procedure(...)`` when the procedure failed after its last attempt."""

    _fields = ("procedure", "attempts", "error_type", "error_message", "traceback")
    procedure: str
    attempts: int
    error_type: str
    error_message: str
    traceback: str


class ChildFailed(_DataError):
    """Raised at ``await spawn(...)`` when the child workflow failed or was cancelled."""

    _fields = ("child_id", "child_type", "error_type", "error_message", "traceback")
    child_id: str
    child_type: str
    error_type: str
    error_message: str
    traceback: str


class VersionMismatch(_DataError):
    """A continuation was made by other code (or another Python) than the one loaded now, and
    cannot be moved onto it; ``reasons`` says, per frame, what did not match."""

    _fields = ("workflow_type", "stored", "loaded", "reasons")
    workflow_type: str | None
    stored: str | None
    loaded: str | None
    reasons: tuple[str, ...] | None


class CheckpointError(_DataError):
    """A workflow's live state cannot be checkpointed (for example an unpicklable local)."""

    _fields = ("variable", "value_type", "location")
    variable: str | None
    value_type: str | None
    location: str | None


class UnknownWorkflowType(_DataError):
    """A stored workflow, procedure or reducer names code that no loaded module registers."""

    _fields = ("key", "kind")
    key: str | None
    kind: str | None


class Cancelled(BaseException):
    """Raised at a workflow's current ``await`` when it is cancelled.

    Derives from ``BaseException`` so that ``except Exception`` does not swallow it; catch it by
    name (``except Cancelled``) or use ``finally`` to clean up.

    ``reason`` is what ``cancel(reason)`` gave (None: nothing). ``workflow_id`` names the
    cancelled workflow in the one ``result()`` raises, as other errors of ``result()`` do; it is
    None in the one raised at a workflow's own await (its code knows its ``workflow_id()``).
    """

    def __init__(self, reason: str | None = None, workflow_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.workflow_id = workflow_id

    def __reduce__(self) -> Any:
        return _with_added(Cancelled, (self.reason, self.workflow_id), self, ("reason", "workflow_id"))

    def __str__(self) -> str:
        return self.reason or "cancelled"


def check_text(value: str, what: str) -> str:
    """Return ``value`` if it can be stored as text (UTF-8); raise ValueError naming ``what``.

    A lone surrogate (a half of a UTF-16 pair, as ``os.fsdecode`` or ``errors="surrogateescape"``
    leave in a string) cannot be encoded, so a name or an id holding one failed deep in the store
    with a raw ``UnicodeEncodeError``.
    """
    if value.isascii():
        if len(value) > MAX_TEXT_BYTES:
            _too_long(value, len(value), what)
        return value
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise ValueError(
            f"{what} {value!r} holds a lone surrogate {value[e.start]!r} at index {e.start}, which "
            f"cannot be stored (names and ids are kept as UTF-8 text); pass valid Unicode text "
            f"(bytes decoded with errors='replace', say, not 'surrogateescape')"
        ) from None
    if size > MAX_TEXT_BYTES:
        _too_long(value, size, what)
    return value


# The longest name or id (in UTF-8 bytes), on every backend: PostgreSQL's indexes take a few
# kilobytes per entry (a workflow's id and a published key together, say), and a longer one failed
# there at the commit, after the call had returned, where SQLite took it.
MAX_TEXT_BYTES = 1000


def _too_long(value: str, size: int, what: str) -> None:
    raise ValueError(
        f"{what} {value[:40]!r}... is {size:,} bytes long (UTF-8): names and ids are kept to "
        f"{MAX_TEXT_BYTES:,} bytes, on every backend; use a shorter one (a digest of a long text, say)"
    )


def check_printable(value: str, what: str) -> str:
    """``check_text``, and no control character (a newline, an escape sequence): the rules of
    an id that is shown and typed back but is no part of an address (an ask's id)."""
    check_text(value, what)
    for i, c in enumerate(value):
        if c < " " or "\x7f" <= c <= "\x9f":
            raise ValueError(
                f"{what} {value!r} holds the control character {c!r} at index {i}: an id is shown "
                f"on one line and typed back into a shell; use printable text"
            )
    return value


def check_id(value: str, what: str) -> str:
    """``check_text``, and no control character (a newline, an escape sequence): an id is shown
    on one line by ``wf``, in terminals, and typed back into a shell; and no ``.`` or ``..``
    path segment, which browsers remove from the web view's addresses."""
    check_printable(value, what)
    if value in (".", "..") or any(part in (".", "..") for part in value.split("/")):
        raise ValueError(
            f"{what} {value!r} is or holds a '.' or '..' path segment: an id is a part of the "
            f"web view's addresses, where browsers remove such segments (the workflow's page "
            f"could not be opened); use another id"
        )
    return value


_SCALARS = (str, int, float, bool, type(None), bytes)


def stored_copy(values: tuple[Any, ...], what: str | None) -> tuple[Any, ...]:
    """``values`` as the step will store them: a copy made now, at the call, so that a change the
    workflow makes to them afterwards (a dict filled again in a loop) does not reach what the call
    sends, publishes, replies, passes or writes when the step commits.

    With ``what``, values that cannot be pickled are a ``TypeError`` naming it, at the call, where
    the workflow can catch it and the traceback names its line, not when its step commits;
    without (a reducer's or a child's arguments), they are kept as they are."""
    if all(type(v) in _SCALARS for v in values):
        return values
    import pickle

    try:
        copied: tuple[Any, ...] = pickle.loads(pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL))
        return copied
    except Exception:
        pass  # the standard pickler misses what cloudpickle takes (lambdas, local classes)
    import cloudpickle  # type: ignore[import-untyped]  # ships no type information

    try:
        copied = pickle.loads(cloudpickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL))
        return copied
    except Exception as e:
        if what is None:
            return values
        raise TypeError(
            f"{what} cannot be stored: {type(e).__name__}: {e}; pass plain picklable data (an id, "
            f"a dataclass of values), and open files, locks or connections inside a procedure"
        ) from None


def check_json(value: Any, what: str) -> None:
    """Raise ``TypeError`` naming ``what`` unless ``value`` is a JSON value (a filter value)."""
    if type(value) in _SCALARS and type(value) is not bytes:
        return
    import json

    try:
        json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        raise TypeError(
            f"{what} must be a JSON value (str, int, float, bool, None, lists, dicts), got {value!r}"
        ) from None
