"""The block driver: a ``Continuation`` (a workflow's stack of frames) and ``step``, which runs
its blocks until the workflow suspends, returns or raises, with Python's exception semantics
(chaining, ``finally``, PEP 479) across inline sub-workflow calls.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from .._commands import Gather
from .._errors import WorkflowError
from .._step import Finished, Raised, StepResult, Suspended
from . import _runtime
from ._lower import Handler
from ._runtime import (
    _HERE,
    CALL_NEW,
    Done,
    Frame,
    Leap,
    Reraise,
    SubCall,
    Suspend,
    _clear,
    _reuse_error,
    route,
)
from ._scope import SYNTH


class Continuation:
    """A workflow's whole resumable state: a stack of frames (inline sub-workflow calls on top).

    Created by ``WorkflowFunction.start``; advanced by ``step``; serialised by ``checkpoint``.
    """

    __slots__ = ("_frames", "_state", "_key", "_fingerprint")

    def __init__(self, frames: list[Frame], key: str, fingerprint: str, state: int = 0) -> None:
        self._frames = frames
        self._state = state  # 0 not started, 1 suspended, 2 finished
        self._key = key
        self._fingerprint = fingerprint

    @property
    def workflow_key(self) -> str:
        """The registry key of the workflow (``module:qualname`` or its ``name=``)."""
        return self._key

    @property
    def fingerprint(self) -> str:
        """The code fingerprint of the outermost workflow."""
        return self._fingerprint

    @property
    def finished(self) -> bool:
        """Whether the workflow has returned or raised."""
        return self._state == 2

    def location(self) -> str | None:
        """``"file.py:41 await timer('end', 60)"``: where the innermost frame is suspended."""
        if self._state != 1 or not self._frames:
            return None
        f = self._frames[-1]
        where: str | None = f._af_code.describe_point(f.__dict__.get("_af_pc"))
        return where

    def __reduce__(self) -> Any:
        raise TypeError("pickle a Continuation with checkpoint(cont), restore it with restore(blob)")

    def __repr__(self) -> str:
        state = ("not started", "suspended", "finished")[self._state]
        loc = self.location()
        return f"<Continuation {self._key} {state}{' at ' + loc if loc else ''}>"


def _active_exc(f: Frame, hctx: tuple[tuple[str, int], ...]) -> BaseException | None:
    d = f.__dict__
    for slot, is_fin in hctx:
        v = d.get(slot)
        if v is None:
            continue
        if is_fin:
            if v[0] == "exc":
                return v[1]  # type: ignore[no-any-return]
            continue
        return v  # type: ignore[no-any-return]
    return None


def _own_exc(f: Frame) -> BaseException | None:
    """The exception ``f`` itself is handling at its pc (its innermost live handler or finally)."""
    h = f._af_code.hctx[f.__dict__["_af_pc"]]
    return _active_exc(f, h) if h else None


# Which handled exceptions a frame sees follows the interpreter's chain of exception states.
# A step that sends resumes the coroutines through their awaits, one inside the other, so a
# helper sees the exception its callers are handling. A step that throws reaches the innermost
# coroutine by recursion from the outermost, without linking them: every frame on the stack at
# that moment sees only its own handled exception, and an exception leaving one of them for its
# caller gets that caller's handled exception as its new ``__context__``. Frames below index
# ``floor`` are those unlinked frames (``floor`` is 0 in a step that sends).


def _inherited_exc(frames: list[Frame], floor: int) -> BaseException | None:
    """The exception the top frame sees through its callers when it handles none itself."""
    i = len(frames) - 1
    while i >= 1 and i >= floor:
        i -= 1
        active = _own_exc(frames[i])
        if active is not None:
            return active
    return None


def _rechain(exc: BaseException, active: BaseException | None) -> None:
    # The interpreter's implicit chaining when a thrown-into coroutine resumes with ``exc``
    # raised in it: ``__context__`` becomes the handled exception, breaking any cycle.
    if active is None or active is exc:
        return
    o = active
    while True:
        c = o.__context__
        if c is None:
            break
        if c is exc:
            o.__context__ = None
            break
        o = c
    exc.__context__ = active


def _run_handling(f: Frame, blk: Any, exc: BaseException) -> Any:
    # Make ``exc`` the exception being handled while the block runs, as inside a native
    # handler: implicit __context__ chaining, bare ``raise`` and sys.exc_info() then work.
    ctx, tb, sup = exc.__context__, exc.__traceback__, exc.__suppress_context__
    try:
        raise exc
    except BaseException:
        exc.__context__, exc.__traceback__, exc.__suppress_context__ = ctx, tb, sup
        return blk(f, _RT)


def _stop_iteration_error(e: StopIteration) -> RuntimeError:
    # A StopIteration leaving a coroutine becomes this RuntimeError (PEP 479), chained to it.
    try:
        raise RuntimeError("coroutine raised StopIteration") from e
    except RuntimeError as err:
        err.__context__ = e
        return err


def _comprehension_stop(f: Frame, e: StopIteration) -> BaseException:
    """``e`` raised while a lowered comprehension of ``f`` runs (3.11): the RuntimeError it
    becomes where it leaves the innermost one, at that comprehension's line (PEP 479); else ``e``.

    A comprehension's result slot is on the frame exactly while it runs; a nested one's slot has
    the larger number.
    """
    d = f.__dict__
    live = [slot for slot in f._af_code.comp_stops if slot in d]
    if not live:
        return e
    innermost = max(live, key=lambda slot: int(slot[len(SYNTH):-1]))
    err = RuntimeError("coroutine raised StopIteration")
    err.__cause__ = e  # sets __suppress_context__, as ``raise ... from e`` does
    err.__context__ = e
    try:
        f._af_code.comp_stops[innermost](err)
    except RuntimeError:
        pass
    _trim(err)
    return err


def _through_caller(e: BaseException, stub: Any) -> None:
    # Add the caller's ``await helper(...)`` line to the traceback of an error raised by helper.
    if stub is None:
        return
    ctx, sup = e.__context__, e.__suppress_context__
    try:
        stub(e)
    except BaseException:
        pass
    e.__context__, e.__suppress_context__ = ctx, sup
    _trim(e)


def _trim(e: BaseException) -> None:
    # Drop the driver's and the helpers' frames: tracebacks show only the user's own lines.
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_HERE):
        tb = tb.tb_next
    if tb is not e.__traceback__:
        e.__traceback__ = tb
    while tb is not None:
        nxt = tb.tb_next
        while nxt is not None and nxt.tb_frame.f_code.co_filename.startswith(_HERE):
            nxt = nxt.tb_next
        if nxt is not tb.tb_next:
            tb.tb_next = nxt
        tb = nxt


def step(cont: Continuation, send: Any = None, throw: BaseException | None = None) -> StepResult:
    """Run ``cont`` from its resume point to its next suspension.

    Args:
        cont: the continuation (it is advanced in place).
        send: the result of the awaited command (must be None on the first step).
        throw: an exception to raise at the current await instead (``Cancelled(...)`` cancels).

    Returns:
        ``Suspended(command)``, ``Finished(value)`` or ``Raised(exception)``.
    """
    if not isinstance(cont, Continuation):
        raise TypeError(f"step() takes a Continuation (from wf.start(...)), got {cont!r}")
    if cont._state == 2:
        raise WorkflowError(
            f"workflow {cont._key} has already finished; there is no await to resume"
        )
    if throw is not None and not isinstance(throw, BaseException):
        if isinstance(throw, type) and issubclass(throw, BaseException):
            throw = throw()
        else:
            raise TypeError(f"step(throw=...) needs an exception, got {throw!r}")
    if cont._state == 0:
        if throw is not None:
            # Like coroutine.throw() on a coroutine that never started: it ends with the error.
            cont._state = 2
            cont._frames = []
            return Raised(throw)
        if send is not None:
            raise TypeError(
                f"can't send non-None value to a just-started workflow ({cont._key}); "
                "the first step takes no value"
            )
    cont._state = 1
    frames = cont._frames
    f = frames[-1]
    if throw is None:
        f._af_sent = send
    else:
        active = _own_exc(f)
        if isinstance(throw, StopIteration):
            # Natively it is thrown into the awaited command's ``__await__`` generator, which it
            # leaves as this RuntimeError (PEP 479), raised in the frame at its await.
            err = RuntimeError("generator raised StopIteration")
            err.__cause__ = throw
            err.__context__ = active if active is not None else throw
            throw = err
        elif active is not None and active is not throw and throw.__context__ is None:
            throw.__context__ = active
        # Raised at the await, as natively: its traceback starts at the user's await line.
        _through_caller(throw, f._af_code.stubs.get(f._af_pc))
    return _drive(cont, frames, f, throw, len(frames) if throw is not None else 0)


def _drive(
    cont: Continuation, frames: list[Frame], f: Frame, pending: Any, floor: int
) -> StepResult:
    rt = _RT
    code = f._af_code
    blocks = code.blocks
    # What the callers of ``f`` are handling, as ``f`` sees it; recomputed when the top changes.
    inherited = _inherited_exc(frames, floor)
    while True:
        if pending is not None:
            if code.comp_stops and isinstance(pending, StopIteration):
                pending = _comprehension_stop(f, pending)
            target, slot, kind, clears = code.handlers[f._af_pc]
            if target is None:
                if isinstance(pending, StopIteration):
                    pending = _stop_iteration_error(pending)
                frames.pop()
                if not frames:
                    cont._state = 2
                    return Raised(pending)
                f = frames[-1]
                code = f._af_code
                blocks = code.blocks
                if len(frames) < floor:
                    _rechain(pending, _own_exc(f))
                    floor = len(frames)
                inherited = _inherited_exc(frames, floor)
                _through_caller(pending, code.stubs.get(f._af_pc))
                continue
            d = f.__dict__
            for c in clears:
                _clear(f, d, c[0], c[1])
            d[slot] = pending if kind == Handler.EXCEPT else ("exc", pending)
            f._af_pc = target
            pending = None
        pc = f._af_pc
        try:
            h = code.hctx[pc]
            active = _active_exc(f, h) if h else None
            if active is None:
                active = inherited
            if active is not None:
                r = _run_handling(f, blocks[pc], active)
            else:
                r = blocks[pc](f, rt)
        except BaseException as e:
            _trim(e)
            pending = e
            f._af_sent = None
            continue
        tr = type(r)
        if tr is Leap:
            r = route(f, r.items, r.kind, r.payload)
            tr = type(r)
        if tr is int:
            f._af_pc = r
            continue
        f._af_sent = None
        if tr is Suspend:
            f._af_pc = r.resume
            value = r.value
            if type(value) is SubCall:
                seen = _own_exc(f)
                if seen is None:
                    seen = inherited
                if value.state != CALL_NEW:
                    # Raised by the caller's await, while it handles what it handles.
                    err = _reuse_error(value.state)
                    if seen is not None:
                        err.__context__ = seen
                    _through_caller(err, code.stubs.get(f._af_pc))
                    pending = err
                    continue
                try:
                    child = value._start()
                except BaseException as e:  # binding a call saved by an earlier release
                    _trim(e)
                    _through_caller(e, code.stubs.get(f._af_pc))
                    pending = e
                    continue
                inherited = seen
                frames.append(child)
                f = child
                code = f._af_code
                blocks = code.blocks
                continue
            if type(value) is Gather and not value.commands:
                f._af_sent = []  # nothing to wait for: resumed at once, as by asyncio.gather()
                continue
            return Suspended(value)
        if tr is Done:
            frames.pop()
            if not frames:
                cont._state = 2
                return Finished(r.value)
            f = frames[-1]
            code = f._af_code
            blocks = code.blocks
            floor = min(floor, len(frames))
            inherited = _inherited_exc(frames, floor)
            f._af_sent = r.value
            continue
        if tr is Reraise:
            pending = r.exc
            continue
        raise AssertionError(f"block {pc} of {code.key} returned {r!r}")


_RT = _runtime


def traceback_of(e: BaseException) -> TracebackType | None:
    """The traceback of ``e`` without the driver's own frames."""
    _trim(e)
    return e.__traceback__

