"""What compiled workflows run on: frames, and the helpers their block functions call.

Generated block functions receive this module as ``_af_rt`` and call the helpers below. A block
returns an ``int`` (jump to that block), a ``Suspend`` (await a command), a ``Done`` (the frame
returned) or a ``Reraise`` (propagate a pending exception without adding traceback entries).
``_driver`` runs the blocks (``step``); ``_checkpoint`` writes and reads continuations.
"""

from __future__ import annotations

import builtins
import os
import sys
import warnings
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
from typing import Any, Generic, TypeVar

from .._commands import Command
from .._errors import WorkflowError
from .._registry import resolve
from . import _procstate
from ._lower import Exit
from ._pickler import (
    live_iter,
    never_shared,
)
from ._scope import FRAME, LOCAL, RT, user_name

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
        caller = sys._getframe(1)
        code = caller.f_code
        if code.co_argcount == 2 and code.co_varnames[:2] == (FRAME, RT):
            # Read by a block function: the workflow's own scope, unless (3.11) the read is in a
            # lowered comprehension past its first iterable, natively in the comprehension's own
            # scope, where the workflow's variable is a free one (the NameError below).
            spans = self._af_code.comp_spans
            if not spans or not _in_comprehension(spans, code, caller.f_lasti):
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


def _in_comprehension(spans: Any, code: Any, lasti: int) -> bool:
    """Whether the instruction at ``lasti`` of a block function reads a name inside one of the
    lowered comprehensions ``spans`` (pairs of its span and its first iterable's), outside that
    comprehension's first iterable (evaluated in the enclosing scope)."""
    for i, pos in enumerate(code.co_positions()):
        if i == lasti // 2:
            line, end_line, col, end_col = pos
            break
    else:
        return False
    if line is None or end_line is None or col is None or end_col is None:
        return False

    def inside(span: Any) -> bool:
        return bool((span[0], span[1]) <= (line, col) and (end_line, end_col) <= (span[2], span[3]))

    return any(inside(comp) and not inside(first) for comp, first in spans)


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


class WithExit:
    """A ``with``'s context manager and the ``__exit__`` its class had as the ``with`` began:
    the one called at its end, as natively (CPython looks ``__exit__`` up before it calls
    ``__enter__``), also for a manager whose ``__enter__`` changes its class, or whose class
    gets another ``__exit__`` meanwhile. Pickled as the manager alone while its class's
    ``__exit__`` is still that one (what most are: a method of a C type need not pickle)."""

    __slots__ = ("manager", "exit", "changed")

    def __init__(self, manager: Any, exit: Any) -> None:
        self.manager, self.exit = manager, exit
        # What its __enter__ changed of the process's state (``_procstate``): a checkpoint
        # refuses it then.
        self.changed: list[str] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        if self.changed:
            raise _procstate.refusal(self.manager, self.changed, self)
        if _exit_of(type(self.manager)) is self.exit:
            return (_with_exit_of, (self.manager,))
        return (WithExit, (self.manager, self.exit))


def _exit_of(cls: type) -> Any:
    """The ``__exit__`` attribute of ``cls`` as its class dict holds it (not bound)."""
    for k in cls.__mro__:
        if "__exit__" in k.__dict__:
            return k.__dict__["__exit__"]
    return None


def _with_exit_of(manager: Any) -> WithExit:
    return WithExit(manager, _exit_of(type(manager)))


def with_begin(m: Any) -> WithExit:
    """The start of a ``with`` whose body awaits: the protocol checked and ``__exit__`` looked
    up, before ``__enter__`` is called (``with_enter``)."""
    cls = type(m)
    if not hasattr(cls, "__enter__") or not hasattr(cls, "__exit__"):
        with m:  # raises the interpreter's own error for a non-context-manager
            pass
    return WithExit(m, _exit_of(cls))


def with_enter(w: Any) -> Any:
    """``__enter__`` of a ``with`` whose body awaits; what it changes of the process's state
    (the current directory, ``sys.stdout``, the application's module data...) is noted on the
    ``WithExit``, which a checkpoint then refuses (``_procstate``)."""
    if type(w) is not WithExit:  # (a checkpoint of an older compiler: the manager alone)
        return type(w).__enter__(w)
    m = w.manager
    caller = sys._getframe(1).f_globals
    before = _procstate.snapshot(m, caller)
    v = type(m).__enter__(m)
    w.changed = _procstate.changed(m, before, _procstate.snapshot(m, caller)) or None
    return v


def _call_exit(w: Any, *exc: Any) -> Any:
    if type(w) is not WithExit:  # (a checkpoint of an older compiler: the manager alone)
        return type(w).__exit__(w, *exc)
    m, exit = w.manager, w.exit
    bind = getattr(type(exit), "__get__", None)
    return (bind(exit, m, type(m)) if bind is not None else exit)(*exc)


def with_exit(w: Any) -> Any:
    """``__exit__`` with the exception being handled; its result says whether to swallow it."""
    e = sys.exc_info()[1]
    return _call_exit(w, type(e), e, e.__traceback__ if e is not None else None)


def with_exit_ok(w: Any) -> None:
    """``__exit__(None, None, None)`` on a normal or leaping exit."""
    _call_exit(w, None, None, None)


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
