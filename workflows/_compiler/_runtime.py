"""The runtime of compiled workflows: frames, the block driver, checkpoints.

Generated block functions receive this module as ``_af_rt`` and call the helpers below. A block
returns an ``int`` (jump to that block), a ``Suspend`` (await a command), a ``Done`` (the frame
returned) or a ``Reraise`` (propagate a pending exception without adding traceback entries).
"""

from __future__ import annotations

import builtins
import gc
import json
import operator
import os
import pickle
import struct
import sys
import warnings
from collections import Counter
from collections.abc import Generator
from operator import (  # noqa: F401  (augmented assignment across an await: _af_rt.iadd, ...)
    iadd,
    iand,
    ifloordiv,
    ilshift,
    imatmul,
    imod,
    imul,
    ior,
    ipow,
    irshift,
    isub,
    itruediv,
    ixor,
)
from types import TracebackType
from typing import Any, Generic, TypeVar

from .._commands import Command
from .._errors import CheckpointError, UnknownWorkflowType, VersionMismatch, WorkflowError
from .._registry import resolve
from .._step import Finished, Raised, StepResult, Suspended
from . import _settable
from ._lower import Exit, Handler
from ._pickler import (
    LiveIter,
    ModuleData,
    ModulePathBroken,
    ModuleTooLarge,
    ResourceRefused,
    SetNotRestorable,
    aliased,
    dumps,
    live_iter,
    loads,
    never_shared,
    number_ids,
)
from ._scope import FRAME, LOCAL, RT, SYNTH, user_name, variable_of
from ._upgrade import FramePlan, Point, Upgrade, apply_frame, plan_frame

R = TypeVar("R")  # a sub-workflow call's return type (SubCall)

# Builtins used by generated code through ``_af_rt`` (user code may shadow the real names).
# A for-loop's iterator over a dict, dict view or set checkpoints as the container and a position.
iter = live_iter
next = builtins.next
newset = builtins.set
NameError = builtins.NameError
BaseException = builtins.BaseException
AssertionError = builtins.AssertionError
builtin_iter = builtins.iter
SENTINEL = object()
FORMAT = 1
MAGIC = b"AFWF"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"

_HERE = os.path.dirname(os.path.abspath(__file__))


class Frame:
    """One activation of a compiled workflow: its locals, pc and pending state, all attributes.

    The compiled code is held in a slot (never pickled); pickling records the workflow key and
    restores the code through the registry.
    """

    __slots__ = ("_af_code", "__dict__")
    _af_code: Any  # the CompiledCode (of _code)
    # Set by the generated code (in __dict__, so they pickle with the locals).
    _af_pc: int
    _af_sent: Any

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes that are missing: an unbound local, as in native code.
        if not name.startswith(LOCAL):
            raise AttributeError(name)
        user = name[len(LOCAL) :]
        code = sys._getframe(1).f_code
        if code.co_argcount == 2 and code.co_varnames[:2] == (FRAME, RT):
            # Read by a block function: the workflow's own scope.
            raise UnboundLocalError(
                f"cannot access local variable {user!r} where it is not associated with a value"
            )
        # Read by a nested function, lambda, class body or (before 3.12) comprehension: a free
        # variable of that scope, natively.
        raise NameError(
            f"cannot access free variable {user!r} where it is not associated with a value in "
            "enclosing scope"
        )

    def __reduce__(self) -> Any:
        return (_blank_frame, (self._af_code.key,), self.__dict__)

    def __repr__(self) -> str:
        return f"<workflow frame {self._af_code.key} pc={self.__dict__.get('_af_pc')}>"


def _blank_frame(key: str) -> Frame:
    f = Frame.__new__(Frame)
    f._af_code = resolve("workflow", key)._code
    return f


never_shared(Frame, _blank_frame)


class Cells:
    """The variables of one run of a lowered comprehension that a lambda or generator
    expression made in it reads (natively, cells of the comprehension's scope)."""

    def __getattr__(self, name: str) -> Any:
        # Only reached for a variable not bound yet (or a dunder lookup by pickle and copy).
        if name.startswith("__"):
            raise AttributeError(name)
        raise NameError(
            f"cannot access free variable {name!r} where it is not associated with a value in "
            "enclosing scope"
        )


never_shared(Cells)


class Suspend:
    """Block result: await ``value`` and resume at block ``resume``."""

    __slots__ = ("value", "resume")

    def __init__(self, value: Any, resume: int) -> None:
        self.value = value
        self.resume = resume


class Done:
    """Block result: the frame returned ``value``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Reraise:
    """Block result: propagate ``exc`` from the current block's region."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


# The life of an inline call, as a native coroutine's: made, its frame running (on the stack),
# and done (returned, raised or closed).
CALL_NEW, CALL_RUNNING, CALL_DONE = 0, 1, 2


class SubCall(Generic[R]):
    """``wf(*args)`` of a ``@workflow``: awaited in a workflow, it runs ``wf`` inline (giving its ``R``).

    It behaves as the coroutine a native call makes: the arguments are bound at the call (a
    binding error is raised there), nothing of ``wf`` runs until it is awaited, it can be awaited
    once (again: ``RuntimeError: cannot reuse already awaited coroutine``; while it runs:
    ``ValueError: coroutine already executing``), ``close()`` before that means it never runs, and
    one dropped without being awaited or closed warns ``coroutine '...' was never awaited``.
    """

    __slots__ = ("wf", "args", "kwargs", "bound", "state", "saved")

    def __init__(
        self, wf: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
        bound: dict[str, Any] | None = None, state: int = CALL_NEW,
    ) -> None:
        # ``bound`` None: bound at the first await (a call saved by a checkpoint of an earlier
        # release, whose calls were bound there).
        self.wf = wf
        self.args: tuple[Any, ...] | None = args
        self.kwargs: dict[str, Any] | None = kwargs
        self.bound = bound  # the arguments bound to the parameters (None once its frame exists)
        self.state = state
        self.saved = False  # checkpointed: the restored copy is the one that may still run

    def __await__(self) -> Generator[Any, Any, R]:
        # Native execution (the differential tests, plain asyncio use): delegate to the coroutine.
        if self.state != CALL_NEW:
            raise _reuse_error(self.state)
        self.state = CALL_RUNNING
        args, kwargs = self.args or (), self.kwargs or {}
        self.args = self.kwargs = self.bound = None
        try:
            result: R = yield from self.wf.__wrapped__(*args, **kwargs).__await__()
        finally:
            self.state = CALL_DONE
        return result

    def close(self) -> None:
        """As ``coroutine.close()``: a call not awaited yet will never run (awaiting it raises)."""
        if self.state == CALL_RUNNING:
            raise ValueError("coroutine already executing")
        self.state = CALL_DONE
        self.args = self.kwargs = self.bound = None

    def _start(self) -> Frame:
        """The frame of the call's first await (its state is checked by the driver).

        The compiled machine marks the call done at once: its frame does not point back to it,
        so that a frame holds only its own state; only a call awaited again while it runs (by
        itself) tells the difference, with the RuntimeError of a finished call instead of the
        ValueError of a running one.
        """
        bound = self.bound
        if bound is None:
            bound = self.wf._binder(*(self.args or ()), **(self.kwargs or {}))
        self.state = CALL_DONE
        self.args = self.kwargs = self.bound = None
        frame: Frame = self.wf._frame_of(bound)
        return frame

    def __del__(self) -> None:
        if self.state == CALL_NEW and not self.saved:
            try:
                warnings.warn(
                    f"coroutine '{self.wf.__qualname__}' was never awaited",
                    RuntimeWarning,
                    stacklevel=2,
                    source=self,
                )
            except Exception:  # noqa: S110  (interpreter shutdown: nothing left to warn with)
                pass

    def __reduce__(self) -> Any:
        self.saved = True
        return (_subcall, (self.wf, self.args, self.kwargs, self.bound, self.state))

    def __repr__(self) -> str:
        return f"<call of workflow {self.wf.__workflow_key__}>"


def _subcall(
    wf: Any, args: tuple[Any, ...] | None, kwargs: dict[str, Any] | None,
    bound: dict[str, Any] | None, state: int,
) -> SubCall[Any]:
    call: SubCall[Any] = SubCall.__new__(SubCall)
    call.wf, call.args, call.kwargs, call.bound, call.state = wf, args, kwargs, bound, state
    call.saved = False
    return call


def _reuse_error(state: int) -> BaseException:
    """The native error for awaiting a coroutine that is running (``state`` 1) or done."""
    if state == CALL_RUNNING:
        return ValueError("coroutine already executing")
    return RuntimeError("cannot reuse already awaited coroutine")


# --------------------------------------------------------------------------------------------
# Helpers called by generated code


def suspend(f: Frame, value: Any, resume: int) -> Suspend:
    """Await ``value`` (a command or a sub-workflow call); anything else is a WorkflowError."""
    if isinstance(value, (Command, SubCall)):
        return Suspend(value, resume)
    raise WorkflowError(
        "workflows can only await workflow commands or @workflow functions: got "
        f"{_describe(value)} at {f._af_code.where(resume)}"
    )


def _describe(value: Any) -> str:
    code = getattr(value, "cr_code", None)
    if code is not None:
        mod = ""
        frame = getattr(value, "cr_frame", None)
        if frame is not None:
            mod = frame.f_globals.get("__name__", "")
            if mod.startswith("asyncio."):
                mod = "asyncio"
        try:
            value.close()  # silence "coroutine was never awaited"
        except Exception:
            pass
        name = getattr(code, "co_qualname", code.co_name)
        return f"coroutine {mod + '.' if mod else ''}{name}"
    r = repr(value)
    if len(r) > 80:
        r = r[:77] + "..."
    return f"{type(value).__qualname__} {r}"


def take(f: Frame, name: str) -> Any:
    """Read and clear a cross-suspension temporary."""
    return f.__dict__.pop(name)


def setlocal(f: Frame, name: str, value: Any) -> Any:
    """``(name := value)`` for a frame local."""
    f.__dict__[name] = value
    return value


def delete(f: Frame, name: str) -> None:
    """``del name`` for a frame local, with the native error when it is unbound."""
    try:
        del f.__dict__[name]
    except KeyError:
        raise UnboundLocalError(
            f"cannot access local variable {user_name(name)!r} where it is not associated with a "
            "value"
        ) from None


def delete_free(f: Frame, name: str) -> None:
    """``del name`` of a workflow local from a nested function (``nonlocal name``), with the
    native error of a free variable when it is unbound. (Not a ``__delattr__`` on Frame: one
    would route every attribute store of a frame through a Python-level slot.)"""
    d = f.__dict__
    if name in d:
        del d[name]
        return
    raise NameError(
        f"cannot access free variable {user_name(name)!r} where it is not associated with a "
        "value in enclosing scope"
    )


def unbind(f: Frame, name: str) -> None:
    """Remove a frame local if bound (the implicit ``del e`` after ``except ... as e``)."""
    f.__dict__.pop(name, None)


def bind(f: Frame, names: tuple[str, ...], values: tuple[Any, ...]) -> bool:
    """Copy match captures to the frame; always true (used in a case guard)."""
    d = f.__dict__
    for n, v in zip(names, values, strict=True):
        d[n] = v
    return True


def matches(exc: BaseException, spec: Any) -> bool:
    """Whether ``except spec`` catches ``exc`` (with the native error for a bad spec)."""
    if isinstance(spec, tuple):
        for s in spec:
            _check_catchable(s)
    else:
        _check_catchable(spec)
    return isinstance(exc, spec)


def _check_catchable(s: Any) -> None:
    if not (isinstance(s, type) and issubclass(s, BaseException)):
        raise TypeError("catching classes that do not inherit from BaseException is not allowed")


def reraise(exc: BaseException) -> Reraise:
    """Propagate ``exc`` (no handler clause matched)."""
    return Reraise(exc)


def route(f: Frame, items: tuple[tuple[Any, ...], ...], kind: str, payload: Any) -> Any:
    """Leave regions along a static route: clear slots, run the next ``finally`` or arrive.

    ``items``: the steps of the route (``_lower.Exit``): ``(RESET, slot)`` set to None,
    ``(UNBIND, name)`` unbind, ``(UNBIND_GLOBAL, name)`` unbind a module global,
    ``(RUN_FINALLY, slot, pc)`` run that finally with the completion stored in ``slot``. ``kind``
    is ``"ret"`` (payload: value) or ``"jump"`` (payload: target block).
    """
    d = f.__dict__
    for i, it in enumerate(items):
        op = it[0]
        if op == Exit.RUN_FINALLY:
            d[it[1]] = (kind, payload, items[i + 1 :])
            return it[2]
        _clear(f, d, op, it[1])
    if kind == "ret":
        return Done(payload)
    return payload


def _clear(f: Frame, d: dict[str, Any], op: int, name: str) -> None:
    """One clear of a region being left (``_lower.Exit``)."""
    if op == Exit.RESET:
        d[name] = None
    elif op == Exit.UNBIND:
        d.pop(name, None)
    else:  # UNBIND_GLOBAL: an ``except ... as name`` of a name declared global
        f._af_code.globals.pop(name, None)


class Leap:
    """Block result: leave regions along a static route (see ``route``).

    Routed by the driver after the block returned, so native ``finally``/``with`` exits inside
    the block run before exploded regions are cleared, as in native code.
    """

    __slots__ = ("kind", "payload", "items")

    def __init__(self, kind: str, payload: Any, items: tuple[tuple[Any, ...], ...]) -> None:
        self.kind = kind
        self.payload = payload
        self.items = items


def ret(f: Frame, value: Any, items: tuple[tuple[Any, ...], ...]) -> Leap:
    """``return value`` through the regions in ``items``."""
    return Leap("ret", value, items)


def jump(f: Frame, target: int, items: tuple[tuple[Any, ...], ...]) -> Leap:
    """``break``/``continue`` to block ``target`` through the regions in ``items``."""
    return Leap("jump", target, items)


def fin_end(f: Frame, slot: str, after: int) -> Any:
    """The end of a ``finally``: resume the completion that entered it."""
    c = f.__dict__.pop(slot, None)
    if c is None:
        return after
    if c[0] == "exc":
        return Reraise(c[1])
    return route(f, c[2], c[0], c[1])


def with_enter(m: Any) -> Any:
    """``__enter__`` of a ``with`` whose body awaits (``__exit__`` is looked up first-class)."""
    cls = type(m)
    if not hasattr(cls, "__enter__") or not hasattr(cls, "__exit__"):
        with m:  # raises the interpreter's own error for a non-context-manager
            pass
    return cls.__enter__(m)


def with_exit(m: Any) -> Any:
    """``__exit__`` with the exception being handled; its result says whether to swallow it."""
    e = sys.exc_info()[1]
    return type(m).__exit__(m, type(e), e, e.__traceback__ if e is not None else None)


def with_exit_ok(m: Any) -> None:
    """``__exit__(None, None, None)`` on a normal or leaping exit."""
    type(m).__exit__(m, None, None, None)


def star_list(v: Any) -> list[Any]:
    """``*v`` in a list or tuple display, unpacked where it stands."""
    return [*v]


def star_set(v: Any) -> list[Any]:
    """``*v`` in a set display, unpacked where it stands (in order; hashed when the set is
    built)."""
    return list(v)


def dstar(v: Any) -> dict[Any, Any]:
    """``**v`` in a dict display, merged where it stands."""
    return {**v}


def kw_merge(func: Any, acc: dict[Any, Any], v: Any) -> None:
    """``**v`` (or a run of plain keywords) of a call, merged into ``acc`` where it stands."""
    if not hasattr(v, "keys"):
        func(**v)  # the interpreter's own TypeError ("argument after ** must be a mapping")
    plain = isinstance(v, dict) and type(v).__iter__ is dict.__iter__
    for k in list(dict.keys(v)) if plain else v.keys():
        if k in acc:
            func(**{k: None}, **{k: None})  # the interpreter's "got multiple values" TypeError
        acc[k] = dict.__getitem__(v, k) if plain else v[k]


def dict_put(d: dict[Any, Any], k: Any, v: Any) -> None:
    """One item of a lowered dict comprehension (key evaluated before value)."""
    d[k] = v


# --------------------------------------------------------------------------------------------
# The driver


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


_RT = sys.modules[__name__]


# --------------------------------------------------------------------------------------------
# Checkpoints


def checkpoint(cont: Continuation) -> bytes:
    """Serialise ``cont``: a header (format, keys and fingerprints, Python minor) + cloudpickle.

    Raises:
        CheckpointError: a live local cannot be pickled; the message names it, its type and the
            await it is live at.
    """
    if not isinstance(cont, Continuation):
        raise TypeError(f"checkpoint() takes a Continuation, got {cont!r}")
    if cont._state == 2:
        raise CheckpointError(
            f"workflow {cont._key} has finished; there is nothing to checkpoint",
            variable=None,
            value_type=None,
            location=None,
        )
    frames = cont._frames
    hkey = (cont._key, cont._fingerprint, cont._state, *map(_POINT, frames))
    cached = _HEADERS.get(hkey)
    if cached is None:
        started = cont._state != 0
        header = {
            "format": FORMAT,
            "key": cont._key,
            "fingerprint": cont._fingerprint,
            "state": cont._state,
            # Per frame: its code, and the point it is suspended at (identity, enclosing
            # constructs, live locals), so that newer code can tell whether it may move there.
            "frames": [
                [f._af_code.key, f._af_code.fingerprint,
                 f._af_code.table.record(f.__dict__.get("_af_pc"), started)
                 if f._af_code.table is not None else None]
                for f in frames
            ],
            "python": PY,
        }
        hb = json.dumps(header, separators=(",", ":")).encode()
        cached = (MAGIC + struct.pack(">I", len(hb)) + hb, _spaces(frames))
        if len(_HEADERS) >= 4096:
            _HEADERS.clear()
        _HEADERS[hkey] = cached
    prefix, spaces = cached
    data = ModuleData(spaces, frames)  # the module data, looked into only if needed
    if _plain_frames(frames, data):
        # Plain locals: the C pickler writes exactly what cloudpickle would, several times faster.
        return prefix + pickle.dumps(aliased(frames, data.aliases), protocol=pickle.HIGHEST_PROTOCOL)
    try:
        payload = dumps(frames, spaces, data)
    except Exception as e:
        raise _explain_pickle_failure(cont, e) from e
    return prefix + payload


# Checkpoint header bytes and the frames' namespaces by (workflow, state, code and point of each
# frame): the same few for every step.
_HEADERS: dict[tuple[Any, ...], tuple[bytes, dict[int, tuple[str, dict[str, Any]]]]] = {}
_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes})
_SEQUENCES = frozenset({list, tuple, set, frozenset})
_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})
_BuiltinMethod: type = type([].append)
# Iterators over a range hold no object (a range and a position: what cloudpickle writes too,
# as they are never module data).
_RANGE_ITERS = frozenset({type(builtin_iter(range(0))), type(builtin_iter(range(1 << 64)))})
_LEAVES = _SCALARS | _RANGE_ITERS  # nothing in them to walk
_PLAIN_KINDS = _LEAVES | _SEQUENCES | {dict, _BuiltinMethod}  # what _plain_frames looks into
_POINT = operator.attrgetter("_af_code", "_af_pc")  # a frame's code and where it is
_PLAIN_BUDGET = 2_000  # values walked before leaving a big continuation to cloudpickle


def _plain_frames(frames: list[Frame], data: ModuleData | None = None) -> bool:
    """True if every frame holds only plain data (scalars, iterators over ranges, builtin
    containers of them) that the C pickler writes as the checkpoint pickler would: no set whose table a plain rebuild would not
    give, no frozenset of several elements (their tables are kept by the checkpoint pickler), no
    module-level list, dict or set (kept by name) and none reached through module data (kept by
    its path); a float or big int held twice only by locals (the restore makes them one object
    again: ``data.aliases``). Sets ``data.shared_numbers`` where such a number is held twice
    otherwise."""
    values: list[Any] = []
    for f in frames:
        if type(f) is not Frame:
            return False
        values.extend(f.__dict__.values())
    if not _PLAIN_KINDS.issuperset(map(type, values)):
        return False  # a local of another kind (an iterator, a function, an instance, ...)
    if data is None:
        data = ModuleData(_spaces(frames), frames)
    budget = _PLAIN_BUDGET
    # The items of each container met are appended to ``values``, which the loop reaches in
    # turn: once walked, it holds every value at each of its occurrences.
    for o in values:
        t = type(o)
        if t in _LEAVES:
            continue
        budget -= 1
        if budget < 0:
            return False
        if t in _SEQUENCES:
            if t is set:
                if not (_settable.SUPPORTED and _settable.plain(o)):  # a table a plain rebuild would not give
                    return False
            elif t is frozenset and len(o) > 1:
                return False
            if t is not tuple and _shared(o, data):
                return False
            values.extend(o)
        elif t is dict:
            if _shared(o, data):
                return False
            values.extend(o.keys())
            values.extend(o.values())
        elif t is _BuiltinMethod and type(o.__self__) in _CONTAINERS:
            # A method of a plain container, held across an await (`xs.append(await ...)`).
            values.append(o.__self__)
        else:
            return False
    ids = number_ids(values)
    repeats = len(ids) - len(set(ids))
    if repeats and repeats > len(data.find_aliases()):
        # A float or big int held twice, not only by locals: the C pickler is asked to write
        # each of those once (all of them are known).
        data.shared_numbers = {i for i, n in Counter(ids).items() if n > 1}
        data.aliases = []
        return False
    return True


def _shared(o: Any, data: ModuleData) -> bool:
    """True if container ``o`` may be module data (then only the checkpoint pickler writes it)."""
    if id(o) in data.containers():
        return True
    if not data.active:
        return False
    return id(o) in data.paths() or data.truncated is not None  # walked first


def _spaces(frames: list[Frame]) -> dict[int, tuple[str, dict[str, Any]]]:
    """The module namespaces the frames' code runs in, by id (for the checkpoint pickler)."""
    out = {}
    for f in frames:
        code = f._af_code
        g = code.globals
        out[id(g)] = (code.key, g)
    return out


def _dumps(obj: Any, spaces: dict[int, tuple[str, dict[str, Any]]] | None = None) -> bytes:
    if spaces is None:
        spaces = _spaces(obj) if isinstance(obj, list) else {}
    return dumps(obj, spaces)


def _explain_pickle_failure(cont: Continuation, err: BaseException) -> CheckpointError:
    spaces = _spaces(cont._frames)
    refused = getattr(err, "value", None)  # the object refused, if the pickler said which
    for f in reversed(cont._frames):
        code = f._af_code
        # The variable that holds the refused object itself first, then those that reach it.
        names = sorted(f.__dict__.items(), key=lambda kv: refused is None or kv[1] is not refused)
        for name, value in names:
            try:
                _dumps(value, spaces)
            except Exception as e:
                where = code.describe_point(f.__dict__.get("_af_pc")) or "its start"
                what = code.describe_slot(name)
                tname = type(value).__qualname__
                mod: str | None = type(value).__module__
                if type(value) is LiveIter:
                    tname, mod = f"{type(value._c).__name__} iterator", None
                if mod not in ("builtins", None):
                    tname = f"{mod}.{tname}"
                if isinstance(e, ModuleTooLarge):
                    hint = "or del the variable before the await"
                elif isinstance(e, DeprecationWarning) or mod == "itertools" or "itertools" in str(e):
                    hint = (
                        "itertools objects cannot be checkpointed reliably (their pickling is "
                        "deprecated and removed in Python 3.14); wrap it in list(...)"
                    )
                elif tname == "typing.TypeAliasType":
                    hint = (
                        "a type alias made by a 'type' statement in a workflow is checkpointed "
                        "with its value, which must evaluate and must not refer back to the "
                        "alias; define the alias at module level, or del it before the await"
                    )
                elif tname in ("generator", "async_generator"):
                    hint = "a generator cannot be checkpointed; wrap it in list(...)"
                elif isinstance(e, RecursionError) or "excessively deep recursion" in str(e):
                    hint = (
                        "it reaches its objects through a chain of references deeper than "
                        "pickle follows (a long linked list: node.next.next...); hold the nodes "
                        "in a list across the await and link them again after it"
                    )
                elif isinstance(e, ResourceRefused):
                    hint = (
                        "close it before the await (a 'with open(...)' block that does not span "
                        "it), or move the I/O into a procedure"
                    )
                elif isinstance(value, BaseException) or "cannot be rebuilt at restore" in str(e):
                    hint = "or del the variable before the await"
                elif "iterates" in str(e) and "changed" in str(e):
                    hint = (
                        "do not add or remove keys of a dict or set that a loop iterates across "
                        "an await; iterate over a copy (for k, v in list(d.items()): ...)"
                    )
                elif tname == "coroutine":
                    hint = (
                        "a coroutine cannot be checkpointed; await it at once (workflows await "
                        "commands and @workflow calls only) instead of keeping it across an await"
                    )
                elif hasattr(type(value), "__enter__") and hasattr(type(value), "__exit__"):
                    hint = (
                        "a context manager open across an await is checkpointed with the "
                        "workflow and must pickle (one made by @contextmanager holds a generator, "
                        "which does not); keep the awaits out of its 'with' body, or write it as "
                        "a class with __enter__/__exit__ whose state pickles"
                    )
                elif "generator" in str(e):
                    hint = (
                        "it holds a generator, which cannot be checkpointed; keep a list(...) "
                        "of the generator's items instead, or del it before the await"
                    )
                else:
                    hint = (
                        "make it picklable, del it before the await, or move the work that "
                        "needs it into a procedure"
                    )
                return CheckpointError(
                    f"cannot checkpoint workflow {code.key}: {what} ({tname}) is live at the "
                    f"await at {where}: {type(e).__name__}: {e}; {hint}",
                    variable=variable_of(name),
                    value_type=tname,
                    location=where,
                )
    return CheckpointError(
        f"cannot checkpoint workflow {cont._key}: {type(err).__name__}: {err}",
        variable=None,
        value_type=None,
        location=cont.location(),
    )


def _read_header(blob: Any) -> tuple[dict[str, Any], bytes]:
    """The header of a checkpoint (never to be modified: headers read are shared, by their
    bytes) and its payload."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"restore() takes the bytes made by checkpoint(), got {type(blob).__name__}")
    blob = bytes(blob)
    try:
        if blob[:4] != MAGIC:
            raise ValueError("it does not start with the checkpoint marker")
        n = int.from_bytes(blob[4:8], "big")
        hb = blob[8 : 8 + n]
        payload = blob[8 + n :]
        header = _READ_HEADERS.get(hb)
        if header is not None:
            return header, payload
        header = json.loads(hb)
        fmt = header["format"]
    except Exception as e:
        raise CheckpointError(
            f"malformed workflow checkpoint ({len(blob)} bytes): {e}",
            variable=None,
            value_type=None,
            location=None,
        ) from None
    if fmt != FORMAT:
        raise CheckpointError(
            f"workflow checkpoint format {fmt} is not supported (this version reads {FORMAT})",
            variable=None,
            value_type=None,
            location=None,
        )
    key = header["key"]
    if header["python"] != PY:
        raise VersionMismatch(
            f"continuation of workflow {key} was made by Python {header['python']}, this is "
            f"Python {PY}; run it on Python {header['python']} (checkpoints hold code objects "
            "that are tied to one Python minor version)",
            workflow_type=key,
            stored=header["python"],
            loaded=PY,
        )
    if len(_READ_HEADERS) >= 4096:
        _READ_HEADERS.clear()
    _READ_HEADERS[hb] = header
    return header, payload


# Headers read, by their bytes: the same few for every step of a workflow.
_READ_HEADERS: dict[bytes, dict[str, Any]] = {}


def _unpickle_frames(key: str, payload: bytes) -> list[Frame]:
    try:
        frames: list[Frame] = loads(payload)
    except (ImportError, AttributeError) as e:
        # A class (or function) its locals hold cannot be found: code missing in this process,
        # as for the workflow's own, not damaged bytes.
        raise UnknownWorkflowType(
            f"workflow {key} cannot be restored in this process: its state refers to code that "
            f"cannot be found ({type(e).__name__}: {e}). Make that module importable (on "
            f"sys.path) in the process that opens the database.",
            key=key,
            kind="workflow",
        ) from e
    except SetNotRestorable as e:
        raise _not_restorable(key, e.frames, e.the_set, "a set", e.reason) from None
    except ModulePathBroken as e:
        raise _not_restorable(key, e.frames, e.stand_in, "an object", e.reason) from None
    except Exception as e:
        raise CheckpointError(
            f"cannot restore workflow {key}: unpickling its state failed: {type(e).__name__}: {e}",
            variable=None,
            value_type=None,
            location=None,
        ) from e
    return frames


def _not_restorable(key: str, frames: Any, target: Any, what: str, reason: str) -> CheckpointError:
    """The restore's error for a value that cannot be given back as it was (a set whose table
    cannot be rebuilt, an object whose path through module data broke), naming the variable
    that holds it (directly, or through containers and objects)."""
    hint = (
        "hold sorted(...) or a dict.fromkeys(...) of its elements across awaits"
        if what == "a set"
        else "keep the module's data as it was when the workflow was checkpointed, or read "
        "it again from the module after the await instead of holding it in a variable"
    )
    for f in reversed(frames if isinstance(frames, list) else []):
        code = getattr(f, "_af_code", None)
        for name, value in getattr(f, "__dict__", {}).items():
            if code is not None and _reaches(value, target):
                return CheckpointError(
                    f"cannot restore workflow {key}: {code.describe_slot(name)} holds {what} "
                    f"that cannot be given back as it was: {reason}; {hint}",
                    variable=variable_of(name),
                    value_type=type(target).__name__ if what == "a set" else None,
                    location=code.describe_point(f.__dict__.get("_af_pc")) or None,
                )
    return CheckpointError(
        f"cannot restore workflow {key}: {what} it holds cannot be given back as it was: "
        f"{reason}; {hint}",
        variable=None,
        value_type=None,
        location=None,
    )


def _reaches(value: Any, target: Any, budget: int = 100_000) -> bool:
    seen: set[int] = set()
    stack = [value]
    while stack and budget > 0:
        o = stack.pop()
        if o is target:
            return True
        if id(o) in seen or type(o) in _SCALARS:
            continue
        seen.add(id(o))
        budget -= 1
        stack.extend(gc.get_referents(o))
    return False


def _plan(header: dict[str, Any], payload: bytes) -> tuple[Upgrade, list[Frame] | None]:
    """How each frame of a checkpoint moves onto the loaded code; the restored frames too if
    some frame's code changed (restored with the loaded code, not yet rewritten)."""
    key = header["key"]
    plans = []
    for entry in header["frames"]:
        fkey, fp, rec = entry
        wf = resolve("workflow", fkey)
        unreadable = None
        try:
            old = Point.from_record(rec) if isinstance(rec, dict) else None
        except (ValueError, KeyError, TypeError) as e:
            old, unreadable = None, str(e) if isinstance(e, ValueError) else f"its point record is damaged ({e!r})"
        plan = FramePlan(fkey, fp, wf.fingerprint, old, how="unchanged" if wf.fingerprint == fp else "held")
        if unreadable is not None and plan.how == "held":
            plan.reasons.append(unreadable)
        plans.append(plan)
    up = Upgrade(key, plans)
    if all(p.how == "unchanged" for p in plans):
        return up, None
    frames = _unpickle_frames(key, payload)
    for p, f in zip(plans, frames, strict=True):
        if p.how == "unchanged" or p.reasons:
            continue
        wf = resolve("workflow", p.key)
        table = wf._code.table
        if table is None:  # pragma: no cover  (every compiled workflow has one)
            p.reasons.append("the loaded code has no table of its points")
            continue
        plan_frame(p, f.__dict__, table, wf.upgrader_for(p.stored))
    return up, frames


def _mismatch(up: Upgrade) -> VersionMismatch:
    held = [p for p in up.frames if p.how == "held"]
    first = held[0]
    why = "; ".join(p.summary() for p in held)
    return VersionMismatch(
        f"continuation of workflow {first.key} was made by code {first.stored[:12]}, loaded code "
        f"is {first.loaded[:12]} (stored fingerprint {first.stored}, loaded {first.loaded}); the "
        f"workflow's code changed since it was checkpointed and it cannot be moved onto the new "
        f"code automatically: {why}. Deploy the old code to finish in-flight instances, register "
        f"an upgrade function (@{first.key.rpartition(':')[2] or first.key}.upgrade(from_version="
        f"\"{first.stored[:8]}\")), or cancel them",
        workflow_type=first.key,
        stored=first.stored,
        loaded=first.loaded,
        reasons=tuple(p.summary() for p in held),
    )


def check_upgrade(blob: bytes) -> Upgrade:
    """Whether (and how) the continuation in ``blob`` would move onto the code loaded now.

    Changes nothing. ``Upgrade.needed`` says if some frame's code changed, ``possible`` if every
    such frame can move; ``frames`` says how each does, or why not.

    Raises:
        VersionMismatch: the checkpoint was made by another Python minor version.
        CheckpointError, UnknownWorkflowType: as ``restore``.
    """
    header, payload = _read_header(blob)
    return _plan(header, payload)[0]


def restore_upgrading(blob: bytes) -> tuple[Continuation, Upgrade | None]:
    """``restore``, moving the continuation onto the loaded code if its code changed and that
    is safe (or an upgrade function says how); the Upgrade done, or None.

    Raises:
        VersionMismatch: some frame cannot move; its ``reasons`` say which point and which
            locals did not match. Nothing is changed: ``blob`` restores as before.
        CheckpointError, UnknownWorkflowType: as ``restore``.
    """
    header, payload = _read_header(blob)
    up, frames = _plan(header, payload)
    if frames is None:
        return restore(blob), None
    if not up.possible:
        raise _mismatch(up)
    for p, f in zip(up.frames, frames, strict=True):
        if p.how != "unchanged":
            apply_frame(p, f, resolve("workflow", p.key)._code)
    return Continuation(frames, header["key"], up.loaded, header["state"]), up


def restore(blob: bytes) -> Continuation:
    """Rebuild a continuation from ``checkpoint`` bytes, resolving its code through the registry.

    Raises:
        VersionMismatch: the loaded code (or Python minor version) differs from the one that made
            the checkpoint; the continuation is never resumed silently.
        CheckpointError: the bytes are not a checkpoint, or cannot be unpickled.
        UnknownWorkflowType: a workflow key is not registered and its module cannot be imported,
            or its state refers to a class or function that cannot be found.
    """
    header, payload = _read_header(blob)
    key = header["key"]
    for fkey, fp, *_ in header["frames"]:
        wf = resolve("workflow", fkey)
        if wf.fingerprint != fp:
            raise VersionMismatch(
                f"continuation of workflow {fkey} was made by code {fp[:12]}, loaded code is "
                f"{wf.fingerprint[:12]} (stored fingerprint {fp}, loaded {wf.fingerprint}); the "
                "workflow's code changed since it was checkpointed, so it is not resumed: "
                "deploy the old code to finish in-flight instances, or cancel them",
                workflow_type=fkey,
                stored=fp,
                loaded=wf.fingerprint,
            )
    frames = _unpickle_frames(key, payload)
    return Continuation(frames, key, header["fingerprint"], header["state"])


def traceback_of(e: BaseException) -> TracebackType | None:
    """The traceback of ``e`` without the driver's own frames."""
    _trim(e)
    return e.__traceback__


__all__ = ["Continuation", "Frame", "SubCall", "check_upgrade", "checkpoint", "restore",
           "restore_upgrading", "step"]
