"""The checkpoint pickler: what a continuation's state becomes in its bytes, and back.

cloudpickle alone would change the meaning of some live values across a restore. This pickler
keeps them, or refuses them with an error that names what cannot be kept:

* exceptions keep ``__cause__``, ``__context__``, ``__suppress_context__``, every attribute set
  on them (``__notes__``, ``e.extra = 5``) and their traceback (rebuilt from its file, line,
  function and column positions, so it prints the user's own lines); an exception that its own
  reduce cannot rebuild (an ``__init__`` that does not take its ``args``) is refused here, at
  checkpoint, not at the restore;
* dict, dict-view and set iterators checkpoint as the container (pickled with the other locals,
  so shared) and a position, not as a snapshot of the remaining items: values written after the
  restore are seen, and a container that changed size still raises ``RuntimeError`` at the next
  step of the loop; a set's loop goes on from its table slot, or, where the set came back in
  another order (another ``PYTHONHASHSEED``), over the elements it had still to visit;
* a deque iterator, forward or reversed, keeps the deque, the items it has still to yield and
  how many times the deque changed since it was made (``_dequestate``), so that one whose deque
  changed raises ``deque mutated during iteration`` at its next step after a restore too; where
  those fields cannot be read (another interpreter) it is refused;
* a class made inside a workflow keeps its ``__qualname__`` when cloudpickle rebuilds it in
  another process (it would become the bare name);
* functions made inside a workflow keep the workflow module's real namespace as their globals
  (cloudpickle gives them a copy), and objects a local shares with module data are checkpointed
  by reference: a global of the workflow's module by its name (a module-level sentinel such as
  ``_MISSING = object()``, a module-level list, dict or set), an object reached from one, or a
  global of another user module the workflow's module reaches or an object reached from that,
  by its path (``CONFIG["items"]``, ``config.ITEMS[0]``), so a local holding one is the module's
  object after a restore (``ModuleData``);
* a set is rebuilt with the hash table it had, slot by slot: its elements where they were, the
  dummy entries of removed elements, the size and the ``pop`` finger (``_settable``), so that it
  iterates, pops, grows and resizes after a restore as it would have without one; a set whose
  elements hash otherwise in the restoring process (``str`` under another ``PYTHONHASHSEED``)
  fails the restore instead. A frozenset, which cannot be laid out that way, is refused when its
  rebuilt table would differ;
* an open file is refused (cloudpickle would turn one opened for reading into a ``StringIO``).
"""

from __future__ import annotations

import ast
import builtins
import collections
import gc
import importlib
import inspect
import io
import itertools
import operator
import os
import pickle
import site
import sys
import sysconfig
import types
import typing
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import cloudpickle  # type: ignore[import-untyped]  # ships no type information

from .._registry import resolve
from . import _dequestate, _settable

_PY311 = sys.version_info >= (3, 11)
_PY312 = sys.version_info >= (3, 12)

# --------------------------------------------------------------------------------------------
# Type aliases (``type X = ...`` in a workflow, 3.12+)

_TypeAliasType = getattr(typing, "TypeAliasType", None)  # 3.12+


def _rebuild_type_alias(name: str, value: Any, type_params: tuple[Any, ...]) -> Any:
    return _TypeAliasType(name, value, type_params=type_params)  # type: ignore[misc]


def _reduce_type_alias(alias: Any) -> Any:
    # A ``type X = ...`` alias pickles by reference to ``module.X``, which does not exist for
    # one made in a workflow (a workflow local). Checkpoint it by value: its value is evaluated
    # now, so after a restore it no longer follows later rebindings of the names it uses.
    try:
        value = alias.__value__
    except Exception as e:
        raise TypeError(
            f"the value of type alias {alias.__name__} cannot be evaluated "
            f"({type(e).__name__}: {e}), so the alias cannot be checkpointed"
        ) from e
    return (_rebuild_type_alias, (alias.__name__, value, alias.__type_params__))


# --------------------------------------------------------------------------------------------
# Open files


class ResourceRefused(TypeError):
    """A live value that stands for a process resource; raised while checkpointing it."""


def _refuse_file(f: Any) -> Any:
    if f is sys.stdout or f is sys.stderr or f is sys.stdin:
        return (getattr, (sys, _STD_NAMES[id(f)]))
    name = getattr(f, "name", None)
    raise ResourceRefused(
        f"an open file ({name!r}, mode {getattr(f, 'mode', '?')!r}) is a process resource and "
        "cannot be checkpointed"
    )


_STD_NAMES: dict[int, str] = {}
_FILE_TYPES = (io.TextIOWrapper, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.FileIO)


def _refresh_std_names() -> None:
    _STD_NAMES.clear()
    for n in ("stdout", "stderr", "stdin"):
        _STD_NAMES[id(getattr(sys, n))] = n


# --------------------------------------------------------------------------------------------
# Exceptions


def _check_rebuildable(e: BaseException, func: Any, args: Any) -> None:
    """Raise TypeError now if ``func(*args)`` (the exception's own reduce) cannot rebuild ``e``."""
    if not isinstance(func, type) or not isinstance(args, tuple):
        return
    problem = _signature_problem(func, len(args))
    if problem is not None:
        raise TypeError(
            f"{e!r} cannot be rebuilt at restore: its class is called "
            f"with its args {args!r} and {problem}; pass every argument of __init__ on to "
            "super().__init__(...), or give the class a __reduce__"
        )


_SIG_PROBLEMS: dict[tuple[type, int], str | None] = {}


def _signature_problem(cls: type, nargs: int) -> str | None:
    key = (cls, nargs)
    try:
        return _SIG_PROBLEMS[key]
    except KeyError:
        pass
    problem = None
    for meth_name in ("__new__", "__init__"):
        meth = None
        for klass in cls.__mro__:
            if meth_name in klass.__dict__:
                meth = klass.__dict__[meth_name]
                break
        if isinstance(meth, staticmethod):
            meth = meth.__func__
        if not isinstance(meth, types.FunctionType):
            continue  # the builtin exception constructors take any args
        try:
            sig = inspect.signature(meth)
            sig.bind(cls, *range(nargs))
        except TypeError as err:
            problem = f"{cls.__qualname__}.{meth_name} refuses them ({err})"
            break
        except ValueError:
            continue
    if len(_SIG_PROBLEMS) > 1024:
        _SIG_PROBLEMS.clear()
    _SIG_PROBLEMS[key] = problem
    return problem


def _tb_entries(tb: types.TracebackType | None) -> tuple[tuple[Any, ...], ...] | None:
    """A traceback as data: per entry its file, line, function names and column positions."""
    if tb is None:
        return None
    out = []
    while tb is not None:
        code = tb.tb_frame.f_code
        pos: tuple[Any, ...] = (None, None, None, None)
        if _PY311 and tb.tb_lasti >= 0:
            pos = next(itertools.islice(code.co_positions(), tb.tb_lasti // 2, None), pos)
        out.append(
            (
                code.co_filename,
                tb.tb_lineno,
                code.co_name,
                getattr(code, "co_qualname", code.co_name),
                pos,
            )
        )
        tb = tb.tb_next
    return tuple(out)


_TB_FRAMES: dict[tuple[Any, ...], tuple[types.FrameType, int]] = {}


def _tb_frame(entry: tuple[Any, ...]) -> tuple[types.FrameType, int]:
    """A finished frame of a stub in ``entry``'s file and function, raising at its position."""
    try:
        return _TB_FRAMES[entry]
    except KeyError:
        pass
    filename, lineno, name, qualname, pos = entry
    ln = pos[0] if pos[0] is not None else (lineno if lineno is not None else 1)
    eln = pos[1] if pos[1] is not None else ln
    col = pos[2] if pos[2] is not None else -1  # no columns: printed without carets
    ecol = pos[3] if pos[3] is not None else -1
    ident = name if name.isidentifier() else "_af_stub"
    raise_ = ast.Raise(ast.Name("_af_e", ast.Load()), None)
    raise_.lineno, raise_.end_lineno, raise_.col_offset, raise_.end_col_offset = ln, eln, col, ecol
    args = ast.arguments(
        posonlyargs=[], args=[ast.arg("_af_e")], vararg=None, kwonlyargs=[], kw_defaults=[],
        kwarg=None, defaults=[],
    )
    kw: dict[str, Any] = {"type_params": []} if _PY312 else {}
    fdef = ast.FunctionDef(ident, args, [raise_], [], None, None, **kw)
    ast.fix_missing_locations(ast.copy_location(fdef, raise_))
    for n in ast.walk(fdef):
        if isinstance(n, ast.Name):
            n.lineno, n.end_lineno, n.col_offset, n.end_col_offset = ln, eln, col, ecol
    co = compile(ast.Module([fdef], []), filename, "exec", dont_inherit=True)
    fcode = next(c for c in co.co_consts if isinstance(c, types.CodeType))
    fcode = fcode.replace(co_name=name)
    if hasattr(fcode, "co_qualname"):
        fcode = fcode.replace(co_qualname=qualname)
    stub = types.FunctionType(fcode, {"__builtins__": builtins})
    try:
        stub(_Marker())
    except _Marker as m:
        t = m.__traceback__
        assert t is not None and t.tb_next is not None
        frame, lasti = t.tb_next.tb_frame, t.tb_next.tb_lasti
        t = None
    frame.clear()
    if len(_TB_FRAMES) > 4096:
        _TB_FRAMES.clear()
    _TB_FRAMES[entry] = (frame, lasti)
    return frame, lasti


class _Marker(Exception):
    pass


def _rebuild_tb(entries: tuple[tuple[Any, ...], ...] | None) -> types.TracebackType | None:
    tb = None
    if not entries:
        return None
    for entry in reversed(entries):
        frame, lasti = _tb_frame(entry)
        lineno = entry[1] if entry[1] is not None else frame.f_lineno
        tb = types.TracebackType(tb, frame, lasti, lineno)
    return tb


def _set_exc_state(e: BaseException, st: tuple[Any, ...]) -> None:
    state, attrs, cause, context, suppress, tb = st
    if state is not None:
        setstate = getattr(e, "__setstate__", None)
        if setstate is not None:
            setstate(state)
        elif isinstance(state, dict):
            e.__dict__.update(state)
    if attrs:
        e.__dict__.update(attrs)
    e.__cause__ = cause
    e.__context__ = context
    e.__suppress_context__ = suppress
    e.__traceback__ = _rebuild_tb(tb)


def _reduce_exception(e: BaseException, proto: int) -> Any:
    rv = e.__reduce_ex__(proto)
    if isinstance(rv, str):
        return NotImplemented
    func, args = rv[0], rv[1]
    state = rv[2] if len(rv) > 2 else None
    _check_rebuildable(e, func, args)
    d = getattr(e, "__dict__", None)
    attrs = dict(d) if d and d is not state else None
    st = (state, attrs, e.__cause__, e.__context__, e.__suppress_context__, _tb_entries(e.__traceback__))
    listitems = rv[3] if len(rv) > 3 else None
    dictitems = rv[4] if len(rv) > 4 else None
    return (func, args, st, listitems, dictitems, _set_exc_state)


# --------------------------------------------------------------------------------------------
# Dict, dict-view and set iterators


_DictKeyIter: type = type(iter({}))
_DictValueIter: type = type(iter({}.values()))
_DictItemIter: type = type(iter({}.items()))
_DictRevKeyIter: type = type(reversed({}))
_DictRevValueIter: type = type(reversed({}.values()))
_DictRevItemIter: type = type(reversed({}.items()))
_SetIter: type = type(iter(set()))
_ODictIter: type = type(iter(OrderedDict()))
_ODICT_VIEWS = {
    OrderedDict: "keys",
    type(OrderedDict().keys()): "keys",
    type(OrderedDict().values()): "values",
    type(OrderedDict().items()): "items",
}

# iterator type -> (kind, how to make a fresh one from the container)
_DICT_KINDS: dict[type, tuple[str, Any]] = {
    _DictKeyIter: ("keys", lambda c: builtins.iter(dict.keys(c))),
    _DictValueIter: ("values", lambda c: builtins.iter(dict.values(c))),
    _DictItemIter: ("items", lambda c: builtins.iter(dict.items(c))),
    _DictRevKeyIter: ("reversed keys", lambda c: reversed(dict.keys(c))),
    _DictRevValueIter: ("reversed values", lambda c: reversed(dict.values(c))),
    _DictRevItemIter: ("reversed items", lambda c: reversed(dict.items(c))),
}
_FRESH = dict(_DICT_KINDS.values())
_NATIVE_ITERS = frozenset(_DICT_KINDS) | {_SetIter, _ODictIter}
_ODICT_FRESH = {
    "keys": lambda c: builtins.iter(OrderedDict.keys(c)),
    "values": lambda c: builtins.iter(OrderedDict.values(c)),
    "items": lambda c: builtins.iter(OrderedDict.items(c)),
}


def _container_of(it: Any) -> Any:
    """The dict or set a native iterator iterates (None once it is exhausted)."""
    for r in gc.get_referents(it):
        if isinstance(r, (dict, set, frozenset)):
            return r
    return None


def _remaining(it: Any) -> list[Any] | None:
    """What ``it`` yields from here on, without advancing it; None if its container changed."""
    try:
        rv = it.__reduce__()
    except RuntimeError:
        return None
    return list(rv[1][0])


def _advanced(kind: str, c: Any, pos: int) -> tuple[Any, Any]:
    it = (_ODICT_FRESH if isinstance(c, OrderedDict) else _FRESH)[kind](c)
    last = _NONE
    for _ in range(pos):
        last = builtins.next(it)
    if kind in ("items", "reversed items") and last is not _NONE:
        last = last[0]
    return it, last


_NONE: Any = object()


def _exhausted(kind: str) -> Any:
    it = _FRESH[kind]({}) if kind != "set" else builtins.iter(set())
    builtins.next(it, None)
    return it


def _restore_native_dict_iter(kind: str, c: Any, pos: int) -> Any:
    return _advanced(kind, c, pos)[0]


class LiveIter:
    """The iterator of a compiled ``for`` loop over a dict, a dict view or a set.

    While the workflow runs it delegates to the native iterator (native order, native errors).
    It remembers the container's size when the loop started and the last key it yielded, so that
    a checkpoint records the container and a position, even after the container changed size.
    """

    __slots__ = ("_it", "_c", "_kind", "_used", "_last", "_pos", "_rest", "_slot")

    def __init__(self, it: Any, c: Any, kind: str, used: int) -> None:
        self._it = it  # the native iterator; None after a restore until the next step
        self._c = c
        self._kind = kind  # "keys", "values", "items" or "set"
        self._used = used  # the container's size when the loop started (-1: it raised)
        self._last: Any = _NONE  # the last key (or set element) yielded
        self._pos = 0  # after a restore: dict entries to skip when resuming
        self._rest: list[Any] | None = None  # restored from an older checkpoint: the set
        # elements still to come
        # After a restore, a set's: the slot of its table the native iterator was at (-1: it was
        # exhausted). The iteration goes on from that slot, as the native iterator would, over
        # the table as it is then (the restore rebuilt it slot by slot).
        self._slot: int | None = None

    def __iter__(self) -> LiveIter:
        return self

    def __next__(self) -> Any:
        it = self._it
        if it is None:
            if self._slot is not None:
                return self._next_slot()
            it = self._resume()
            if self._rest is not None:  # a restored set: the size is checked at every step
                return self._next_rest()
        x = builtins.next(it)
        kind = self._kind
        if kind == "items":
            self._last = x[0]
        elif kind == "values":
            self._last = x[0]  # values are taken from an items iterator: the key is known
            return x[1]
        else:
            self._last = x
        return x

    def _size_changed(self) -> RuntimeError:
        self._used = -1  # sticky, as the native iterator makes it
        self._it = None
        self._rest = None
        if self._kind == "set" and self._slot is None:
            self._slot = -1
        if self._kind == "set":
            return RuntimeError("Set changed size during iteration")
        if isinstance(self._c, OrderedDict):
            return RuntimeError("OrderedDict mutated during iteration")
        return RuntimeError("dictionary changed size during iteration")

    def _resume(self) -> Any:
        if len(self._c) != self._used:
            raise self._size_changed()
        if self._rest is not None:
            return None
        it, last = _advanced(_internal_kind(self._kind), self._c, self._pos)
        if last is not _NONE:
            self._last = last
        self._it = it
        return it

    def _next_slot(self) -> Any:
        c = self._c
        if len(c) != self._used:
            raise self._size_changed()
        p = self._slot
        assert p is not None
        if p < 0:
            raise StopIteration
        j, k = _settable.next_used(c, p)
        if j < 0:
            self._slot = -1  # exhausted for good, as natively (the iterator lets go of the set)
            raise StopIteration
        x = builtins.next(itertools.islice(c, k, None))  # the element on slot j
        self._slot = j + 1
        self._last = x
        return x

    def _next_rest(self) -> Any:
        rest = self._rest
        assert rest is not None
        c = self._c
        if len(c) != self._used:
            raise self._size_changed()
        while rest:
            x = rest.pop(0)
            if x in c:  # not removed since (as natively, a removed element is not visited)
                self._last = x
                return x
        raise StopIteration

    def set_position(self) -> tuple[Any, int, int | None, list[Any]]:
        """A set loop's position, where the set's table is read: the set, the size it checks,
        the slot it goes on from (-1: exhausted; None: it goes on over the elements instead) and
        the elements it has still to visit, as the table is now."""
        c, used, it = self._c, self._used, self._it
        if it is not None:
            live, used, slot = _settable.iterator_state(it)
            slot = slot if live else -1
        elif self._slot is not None:
            slot = self._slot
        else:  # restored where the set came back in another order: the elements to come
            return (c, used, None, list(self._rest or ()))
        return (c, used, slot, _settable.elements_from(c, slot))

    def state(self) -> tuple[Any, ...]:
        """``(container, kind, size at the start, dict position, set elements to come)``."""
        c, kind, used = self._c, self._kind, self._used
        it = self._it
        if kind == "set" and _settable.SUPPORTED:
            # The native iterator's own state: the size it checks and the slot it is at.
            if it is not None:
                live, used, slot = _settable.iterator_state(it)
                return (c, kind, used, slot if live else -1, None)
            if self._slot is not None:
                return (c, kind, used, self._slot, None)
        if it is None:  # restored and not resumed, a restored set, or already raised
            return (c, kind, used, self._pos, None if self._rest is None else list(self._rest))
        rest = _remaining(it)
        if rest is not None:
            if kind == "set":
                return (c, kind, len(c), 0, rest)
            return (c, kind, len(c), len(c) - len(rest), None)
        if len(c) == used:
            raise RuntimeError(
                f"the {type(c).__name__} a for-loop iterates had its keys changed during the "
                "iteration at an unchanged size (keys removed and others added, or moved, as "
                "OrderedDict.move_to_end does); native code raises RuntimeError later in that "
                "loop, which a restore cannot reproduce"
            )
        # The container changed size: the next step raises, unless it is put back to its size
        # first; then the loop goes on after the last key it yielded.
        last = self._last
        pos = 0
        if last is not _NONE:
            keys = list(c)
            pos = -1
            for i, k in enumerate(keys):
                if k is last:
                    pos = i + 1
                    break
            if pos < 0:
                raise RuntimeError(
                    f"the {type(c).__name__} a for-loop iterates changed size and lost the last "
                    "key the loop visited; the loop's position cannot be checkpointed"
                )
        if kind == "set":
            return (c, kind, used, 0, list(c)[pos:])
        return (c, kind, used, pos, None)


def _internal_kind(kind: str) -> str:
    return "items" if kind == "values" else kind


def _restore_live_iter(c: Any, kind: str, used: int, pos: int, rest: Any) -> LiveIter:
    li = LiveIter(None, c, kind, used)
    li._pos = pos
    li._rest = rest
    if kind == "set" and rest is None:
        li._slot = pos
    if kind != "set" and used == len(c):
        li._resume()  # as native: a live iterator that checks the size it now sees
    return li


def _settle_set_iter(li: LiveIter, slot: int | None, rest: list[Any]) -> None:
    """Once a checkpoint's sets are rebuilt: a restored set loop goes on from its slot if the
    table holds, from there, the elements it had still to visit (so wherever the set was rebuilt
    as it was); else (the set came back in another order: strings under another
    ``PYTHONHASHSEED``) it visits those elements, in their recorded order, each once."""
    if slot is not None:
        now = _settable.elements_from(li._c, slot)
        if len(now) == len(rest) and all(map(operator.is_, now, rest)):
            li._slot = slot
            return
    li._rest = list(rest)


def live_iter(v: Any) -> Any:
    """``iter(v)`` for a compiled ``for`` loop: a dict, dict view or set gets a LiveIter."""
    it = builtins.iter(v)
    t = type(it)
    if t not in _LIVE_TYPES or it is v:
        return it
    c = _container_of(it)
    if c is None or type(c) is frozenset:
        return it
    if t is _ODictIter:
        kind = _ODICT_VIEWS.get(type(v))
        if kind is None:
            return it
    else:
        kind = _LIVE_TYPES[t]
    if kind == "values":
        it = _advanced("items", c, 0)[0]
    return LiveIter(it, c, kind, len(c))


_LIVE_TYPES = {
    _DictKeyIter: "keys",
    _DictValueIter: "values",
    _DictItemIter: "items",
    _SetIter: "set",
    _ODictIter: "",
}


def _reduce_native_iter(it: Any) -> Any:
    t = type(it)
    if t is _ODictIter:
        raise RuntimeError(
            "an OrderedDict iterator held in a variable cannot be checkpointed with its position "
            "(which of keys, values or items it yields is not visible); iterate over "
            "list(od.items()), or loop over the OrderedDict itself"
        )
    c = _container_of(it)
    kind = "set" if t is _SetIter else _DICT_KINDS[t][0]
    if c is None:
        return (_exhausted, (kind,))
    if kind == "set" and _settable.SUPPORTED:
        _live, used, slot = _settable.iterator_state(it)
        return (_restore_live_iter, (c, "set", used, slot, None))
    rest = _remaining(it)
    if rest is None:
        raise RuntimeError(
            f"the {type(c).__name__} it iterates changed size or keys during the iteration (its "
            "next step raises RuntimeError natively); a restore cannot reproduce that from an "
            "iterator held in a variable"
        )
    if kind == "set":
        # A rebuilt set may order its elements otherwise: the elements still to come are kept,
        # with the size the native iterator checks.
        return (_restore_live_iter, (c, "set", len(c), 0, rest))
    return (_restore_native_dict_iter, (kind, c, len(c) - len(rest)))


def _reduce_deque_iter(it: Any) -> Any:
    """A deque iterator (a ``for`` loop's or a variable's): its deque, direction, the items it
    has still to yield and how many times the deque changed since it was made (``_dequestate``),
    so that one whose deque changed raises ``deque mutated during iteration`` again."""
    if not _dequestate.SUPPORTED:
        raise RuntimeError(
            "a deque iterator cannot be checkpointed on this interpreter "
            f"({sys.implementation.name} {sys.version.split()[0]}): whether its deque changed "
            "since it was made (its next step raises RuntimeError natively then) cannot be read "
            "here; iterate over list(the deque), or del the iterator before the await"
        )
    d, mutations, counter = _dequestate.iterator_state(it)
    return (_restore_deque_iter, (type(it) is _dequestate.ITER_TYPES[1], d, mutations, counter))


def _restore_deque_iter(reverse: bool, d: collections.deque[Any], mutations: int, counter: int) -> Any:
    if not _dequestate.SUPPORTED:
        raise RuntimeError(
            "a checkpointed deque iterator cannot be restored on this interpreter "
            f"({sys.implementation.name} {sys.version.split()[0]}): its mutation check cannot be set"
        )
    return _dequestate.restore(_dequestate.ITER_TYPES[reverse], d, mutations, counter)


# --------------------------------------------------------------------------------------------
# Module globals


class _GlobalsRef:
    """Pickles as the real globals of a registered workflow's module."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __reduce__(self) -> Any:
        return (workflow_globals, (self.key,))


def workflow_globals(key: str) -> dict[str, Any]:
    """The module namespace the workflow ``key`` runs in (through the registry)."""
    g: dict[str, Any] = resolve("workflow", key).__wrapped__.__globals__
    return g


def workflow_global(key: str, name: str) -> Any:
    """The value bound to ``name`` in the namespace of the workflow ``key``."""
    g = workflow_globals(key)
    try:
        return g[name]
    except KeyError:
        raise AttributeError(
            f"module {g.get('__name__')!r} of workflow {key} has no global {name!r} (a local held "
            "it when the workflow was checkpointed)"
        ) from None


def _function_setstate(obj: Any, state: Any) -> None:
    # cloudpickle's _function_setstate, except that the globals are left alone: they are the
    # module's real namespace, which must not be overwritten with checkpoint-time values.
    state, slotstate = state
    obj.__dict__.update(state)
    slotstate.pop("__globals__", None)
    closure = slotstate.pop("__closure__", None)
    slotstate.pop("_cloudpickle_submodules", None)
    if closure is not None:
        for i, cell in enumerate(closure):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            obj.__closure__[i].cell_contents = value
    for k, v in slotstate.items():
        setattr(obj, k, v)


# Immutable values are never checkpointed by reference to a module-level name: equal ones are
# shared (small ints, interned strings, ``()``), so a local's value would be mistaken for the name's.
_PLAIN_TYPES = frozenset({type(None), bool, int, float, complex, str, bytes, tuple, frozenset})
# Mutable builtin containers the C pickler writes without asking reducer_override: a module-level
# one held in a local is found by persistent_id instead.
_MUTABLE_CONTAINERS = frozenset({list, dict, set})


# The reducers by type, in one flat dict: ours, then cloudpickle's, then copyreg's (a ChainMap of
# ChainMaps costs a Python call and a KeyError per map for every object the pickler looks up).
# Refreshed when cloudpickle's or copyreg's table grows (registrations only add).
def _reduce_code(code: types.CodeType) -> Any:
    # cloudpickle writes a code object with the file name '<dynamic-code>' (for payloads that do
    # not depend on where a function was defined); a function made in a workflow would come back
    # from a restore with it, and the traceback of an error raised in it would lose the user's
    # file and lines. Its own reducer, with the file name put back.
    make, args = cloudpickle.cloudpickle._code_reduce(code)
    return _code_in_file, (make, args, code.co_filename)


def _code_in_file(make: Any, args: tuple[Any, ...], filename: str) -> types.CodeType:
    code: types.CodeType = make(*args)
    return code.replace(co_filename=filename)


_OWN_REDUCERS: dict[type, Any] = {t: _refuse_file for t in _FILE_TYPES}
_OWN_REDUCERS[types.CodeType] = _reduce_code
if _TypeAliasType is not None:
    _OWN_REDUCERS[_TypeAliasType] = _reduce_type_alias
if sys.version_info >= (3, 12):
    # Their pickling is deprecated (a DeprecationWarning at each) and removed in Python 3.14.
    def _refuse_itertools(it: Any) -> Any:
        raise TypeError(
            f"an itertools.{type(it).__name__} object cannot be checkpointed reliably: itertools "
            "objects' pickling is deprecated and removed in Python 3.14; wrap it in list(...)"
        )

    for _t in vars(itertools).values():
        if isinstance(_t, type) and _t.__module__ == "itertools":
            _OWN_REDUCERS[_t] = _refuse_itertools
_CLOUD_TABLES = tuple(getattr(cloudpickle.CloudPickler.dispatch_table, "maps", ()))
_DISPATCH: dict[type, Any] = {}
_DISPATCH_SIZES: list[int] = []


def _refresh_dispatch() -> None:
    sizes = [len(m) for m in _CLOUD_TABLES]
    if sizes == _DISPATCH_SIZES:
        return
    merged: dict[type, Any] = {}
    for m in reversed(_CLOUD_TABLES):
        merged.update(m)
    if not _CLOUD_TABLES:
        merged.update(cloudpickle.CloudPickler.dispatch_table)
    merged.update(_OWN_REDUCERS)
    _DISPATCH.clear()
    _DISPATCH.update(merged)
    _DISPATCH_SIZES[:] = sizes


# --------------------------------------------------------------------------------------------
# Module data: objects a local shares with a module, kept by name or by path
#
# ``marker = _MISSING``, ``items = CONFIG["items"]``, ``items = config.ITEMS``: natively the local
# and the module share the object. A checkpoint writes such an object as a reference, and the
# restore looks it up in the restoring process, so that the local is the module's object again:
#
# * ("g", workflow key, name): a global of a namespace the frames' code runs in;
# * ("p", workflow key, name, steps, type): an object reached from such a global, through dict
#   values (under str, int, bytes, bool, float or None keys), list and tuple items, and the
#   attributes of instances of the module's own classes;
# * ("m", module, name, steps, type): a global of another user module those namespaces reach (a
#   module bound in them, the module of a function or class bound in them, and so on from that
#   module's namespace), or an object reached from one the same way. Modules of the standard
#   library, of site-packages and of this project are not user modules: their module-level data
#   is not looked into, nor are the modules only they reach.
#
# The globals are indexed once per namespace (``Namespace``, rebuilt when the namespace no longer
# holds exactly the values it was indexed with: one identity comparison of its values at each
# checkpoint that needs it); the paths are walked at most once per checkpoint, and only when the
# state holds an object the walk could find.

# Keys a path may hold (written into the checkpoint and compared again at the restore).
_KEY_TYPES = frozenset({str, int, bytes, bool, float, type(None)})
# Objects walked per checkpoint at most: a checkpoint whose state holds an object the walk did
# not find, after it stopped there, is refused (the object may be module data it did not reach).
_PATH_BUDGET = 200_000
# This project's packages: their module data is not the workflow's.
_OWN_PACKAGES = frozenset({"workflows", "actors", "persistence"})


def _library_dirs() -> tuple[str, ...]:
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.realpath(p))
    try:
        dirs.update(os.path.realpath(p) for p in site.getsitepackages())
        dirs.add(os.path.realpath(site.getusersitepackages()))
    except AttributeError:  # pragma: no cover  (a virtualenv's old site module)
        pass
    return tuple(d.rstrip(os.sep) + os.sep for d in dirs)


_LIBRARY_DIRS = _library_dirs()
_USER_MODULES: dict[str, bool] = {}


def user_module(m: types.ModuleType) -> bool:
    """True for a module of the application: one with a file outside the standard library and
    site-packages, not of this project."""
    name = getattr(m, "__name__", None)
    if not isinstance(name, str):
        return False
    known = _USER_MODULES.get(name)
    if known is not None:
        return known
    top = name.partition(".")[0]
    f = getattr(m, "__file__", None)
    ok = (
        isinstance(f, str)
        and top not in sys.stdlib_module_names
        and top not in _OWN_PACKAGES
        and not os.path.realpath(f).startswith(_LIBRARY_DIRS)
    )
    if len(_USER_MODULES) >= 4096:
        _USER_MODULES.clear()
    _USER_MODULES[name] = ok
    return ok


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


class Namespace:
    """What a checkpoint looks up in one module namespace: per non-plain value, by id, its name;
    which of them are builtin containers (the C pickler writes those without asking
    reducer_override); the names of the values the path walk starts from (lists, dicts, tuples,
    instances of the module's own classes); the other user modules it reaches."""

    __slots__ = ("g", "module", "values", "names", "containers", "roots", "imports", "_refs")

    def __init__(self, g: dict[str, Any]) -> None:
        self.g = g
        self.module = g.get("__name__")
        items = list(g.items())
        self.values = tuple(v for _k, v in items)
        self.names: dict[int, str] = {}
        self.containers: dict[int, str] = {}
        self.roots: list[str] = []
        imports: dict[str, types.ModuleType] = {}
        module = self.module
        for name, v in items:
            if name.startswith("__"):
                continue
            t = type(v)
            # A frozenset of several elements is never shared by accident, as an empty one is.
            if t not in _PLAIN_TYPES or t is frozenset and len(v) > 1:
                self.names.setdefault(id(v), name)
                if t in _MUTABLE_CONTAINERS or t is frozenset:
                    self.containers.setdefault(id(v), name)
            if (t is list or t is dict or t is tuple) and v or _own_instance(v, module):
                self.roots.append(name)
            other = v if t is types.ModuleType else (
                sys.modules.get(getattr(v, "__module__", None) or "")
                if isinstance(v, (type, types.FunctionType)) else None
            )
            if other is not None and getattr(other, "__name__", None) != module and user_module(other):
                imports.setdefault(other.__name__, other)
        self.imports = tuple(imports.values())
        self._refs: dict[str, dict[int, tuple[str, str, dict[str, Any]]]] = {}

    def refs(self, key: str) -> dict[int, tuple[str, str, dict[str, Any]]]:
        """For workflow ``key`` running in this namespace: id -> (key, name, namespace) of every
        global kept by name."""
        r = self._refs.get(key)
        if r is None:
            g = self.g
            r = self._refs[key] = {i: (key, name, g) for i, name in self.names.items()}
        return r


_NAMESPACES: dict[int, Namespace] = {}


def namespace(g: dict[str, Any]) -> Namespace:
    """The index of namespace ``g``, current: rebuilt if ``g`` no longer holds exactly the values
    it was built from (a rebound or added global; a renamed one is caught where its name is
    used)."""
    ns = _NAMESPACES.get(id(g))
    if ns is None or ns.g is not g or len(g) != len(ns.values) or not all(
        map(operator.is_, g.values(), ns.values)
    ):
        if len(_NAMESPACES) >= 256:
            _NAMESPACES.clear()
        ns = _NAMESPACES[id(g)] = Namespace(g)
    return ns


def _own_instance(v: Any, module: Any) -> bool:
    """An instance (not a class, function or module) of a class defined in ``module``."""
    t = type(v)
    return (
        t.__module__ == module
        and not isinstance(v, (type, types.FunctionType, types.ModuleType))
        and isinstance(getattr(v, "__dict__", None), dict)
    )


Ref = tuple[Any, ...]  # ("g", key, name) | ("p", key, name, steps, type) | ("m", module, ...)


class ModuleTooLarge(TypeError):
    """The path walk of one checkpoint stopped at its budget before it could tell whether an
    object the state holds is module data."""


class ModuleData:
    """The module data one checkpoint looks the objects it writes up in (see above): the
    globals of the frames' namespaces and, walked when first asked, the paths."""

    def __init__(self, spaces: dict[int, tuple[str, dict[str, Any]]], own: Any = None) -> None:
        self._spaces = spaces
        self._own = own  # the list being checkpointed: it and its items' __dict__ are its own
        self._ns: list[tuple[str, Namespace]] | None = None
        self._globals: dict[int, tuple[str, str, dict[str, Any]]] | None = None
        self._containers: dict[int, str] = {}
        self._paths: dict[int, Ref] | None = None
        self.active = False  # some namespace has data to walk
        self.truncated: list[str] | None = None  # the modules walked, if the walk stopped early

    def _index(self) -> None:
        ns = self._ns = [(key, namespace(g)) for key, g in self._spaces.values()]
        if len(ns) == 1:
            self._globals, self._containers = ns[0][1].refs(ns[0][0]), ns[0][1].containers
        else:
            self._globals, self._containers = {}, {}
            for key, n in reversed(ns):  # the first frame's namespace wins
                self._globals.update(n.refs(key))
                self._containers.update(n.containers)
        self.active = any(n.roots or n.imports for _key, n in ns)

    def globals(self) -> dict[int, tuple[str, str, dict[str, Any]]]:
        """id -> (workflow key, name, namespace) of the non-plain globals of the frames'
        namespaces."""
        if self._globals is None:
            self._index()
        assert self._globals is not None
        return self._globals

    def containers(self) -> dict[int, str]:
        """id -> name of the module-level list, dict, set and frozenset values."""
        if self._globals is None:
            self._index()
        return self._containers

    def global_ref(self, obj: Any) -> tuple[str, str] | None:
        """(workflow key, name) of the global of the frames' namespaces bound to ``obj``."""
        ref = self.globals().get(id(obj))
        if ref is None:
            return None
        key, name, g = ref
        if g.get(name, _NONE) is not obj:  # renamed since it was indexed: index it again
            _NAMESPACES.pop(id(g), None)
            self._index()
            ref = self.globals().get(id(obj))
            if ref is None:
                return None
            key, name, g = ref
        return key, name

    def paths(self) -> dict[int, Ref]:
        if self._paths is None:
            if self._globals is None:
                self._index()
            self._paths = self._walk() if self.active else {}
        return self._paths

    def path(self, obj: Any) -> Ref | None:
        """The reference of an object reached through module data, or None; ModuleTooLarge if
        the walk stopped before it could tell."""
        ref = self.paths().get(id(obj))
        if ref is None and self.truncated is not None and not self._is_own(obj):
            raise ModuleTooLarge(
                f"the module-level data of {', '.join(self.truncated)} holds more than "
                f"{_PATH_BUDGET:,} objects, which a checkpoint does not walk to tell whether this "
                f"{type(obj).__name__} is part of it (a local that shares an object with a "
                "module must still share it after a restore); keep large data out of "
                "module-level lists, dicts and objects (load it in a procedure, or behind a "
                "function that returns it), or hold only plain values (numbers, strings, "
                "tuples of them) across the await"
            )
        return ref

    def _is_own(self, obj: Any) -> bool:
        own = self._own
        return own is not None and (obj is own or any(obj is getattr(o, "__dict__", None) for o in own))

    def _walk(self) -> dict[int, Ref]:
        assert self._ns is not None
        index: dict[int, Ref] = {}
        seen: set[int] = set()
        queue: collections.deque[tuple[Any, tuple[str, str, str], Any, tuple[tuple[str, Any], ...]]] = (
            collections.deque()
        )
        own = {n.module for _key, n in self._ns}
        walked = []
        for key, n in self._ns:
            seen.update(n.names)  # globals themselves are kept by name
            seen.update(id(n.g[name]) for name in n.roots)
            for name in n.roots:
                queue.append((n.g[name], ("p", key, name), n.module, ()))
            if n.roots:
                walked.append(repr(n.module))
        # The user modules the namespaces reach, and those these reach in turn.
        others: dict[str, types.ModuleType] = {}
        pending = collections.deque(m for _key, n in self._ns for m in n.imports)
        while pending:
            m = pending.popleft()
            if m.__name__ not in own and m.__name__ not in others:
                others[m.__name__] = m
                pending.extend(namespace(vars(m)).imports)
        for mname, m in others.items():
            mns = namespace(vars(m))
            walked.append(repr(mname))
            for name, v in mns.g.items():
                if name.startswith("__"):
                    continue
                tv = type(v)
                if (tv in _PLAIN_TYPES and tv is not tuple) or isinstance(v, _BY_REFERENCE):
                    continue
                i = id(v)
                if i in seen:
                    continue
                seen.add(i)
                if tv is not tuple:
                    index[i] = ("m", mname, name, (), _type_name(tv))
            for name in mns.roots:
                queue.append((mns.g[name], ("m", mname, name), mname, ()))
        budget = _PATH_BUDGET
        while queue:
            if budget <= 0:
                self.truncated = walked
                break
            o, root, module, steps = queue.popleft()
            t = type(o)
            children: Any
            if t is dict:
                children = [(("k", k), v) for k, v in o.items() if type(k) in _KEY_TYPES]
            elif t is list or t is tuple:
                children = [(("i", j), v) for j, v in enumerate(o)]
            elif _own_instance(o, module):
                children = [(("a", k), v) for k, v in vars(o).items() if type(k) is str]
            else:
                continue
            for step, v in children:
                tv = type(v)
                if (tv in _PLAIN_TYPES and tv is not tuple) or tv in _BY_REFERENCE:
                    continue
                i = id(v)
                if i in seen:
                    continue
                seen.add(i)
                budget -= 1
                path = (*steps, step)
                if tv is not tuple:
                    index[i] = (*root, path, _type_name(tv))
                queue.append((v, root, module, path))
        return index


# Written by reference already (by cloudpickle), or with no state of their own to share.
_BY_REFERENCE = (
    type,
    types.FunctionType,
    types.ModuleType,
    types.BuiltinFunctionType,
    types.MethodType,
)


def path_text(name: str, steps: tuple[tuple[str, Any], ...]) -> str:
    """A path as code: ``CONFIG['items'][0].children``."""
    out = [name]
    for kind, k in steps:
        out.append(f".{k}" if kind == "a" else f"[{k!r}]")
    return "".join(out)


def ref_text(pid: Ref) -> str:
    """Where a "p" or "m" reference leads, as code: ``CONFIG['items']``, ``config.ITEMS[0]``."""
    text = path_text(pid[2], pid[3])
    return f"{pid[1]}.{text}" if pid[0] == "m" else text


class ModulePathBroken(Exception):
    """A checkpoint's path to a module-level object leads nowhere, or to another type, in this
    process; ``frames`` is what was unpickled (with a stand-in for the object), to name the
    variable by."""

    def __init__(self, reason: str, stand_in: Any, frames: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.stand_in = stand_in
        self.frames = frames


class _Unresolved:
    """Stands in for an object whose path did not resolve (the restore fails once loaded)."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path


def _resolve_ref(pid: Ref) -> Any:
    """The object a "p" or "m" reference leads to, or ValueError saying where it breaks."""
    tag, root, name, steps, tname = pid
    if tag == "m":
        try:
            g = vars(sys.modules.get(root) or importlib.import_module(root))
        except Exception as e:
            raise ValueError(f"module {root!r} cannot be imported ({type(e).__name__}: {e})") from None
    else:
        g = workflow_globals(root)
    if name not in g:
        raise ValueError(f"module {g.get('__name__')!r} has no global {name!r}")
    o = g[name]
    for n, (kind, k) in enumerate(steps):
        try:
            o = vars(o)[k] if kind == "a" else o[k]
        except (KeyError, IndexError, TypeError):
            what = f"attribute {k}" if kind == "a" else f"item {k!r}"
            where = ref_text((tag, root, name, steps[:n], tname))
            raise ValueError(f"{where} has no {what}") from None
    if _type_name(type(o)) != tname:
        raise ValueError(f"{ref_text(pid)} is a {_type_name(type(o))} now, not a {tname}")
    return o


# --------------------------------------------------------------------------------------------
# Sets of checkpoints written before their tables were recorded (their order and table size
# only), rebuilt in that order; a set of a checkpoint written now is recorded and rebuilt slot by
# slot by _settable.
#
# A set iterates in the order of its hash table's slots. The old record's set is laid out in a
# table (the size it had, or larger) at slots in the order it had: each element goes to the first
# free slot of its probe sequence that comes after the previous element's, with placeholder
# entries on the free slots its probe sequence passes before that; the placeholders are then
# removed (they stay as deleted entries, which iteration skips).

_SET_BASE_SIZE = sys.getsizeof(set())
_MASK64 = (1 << 64) - 1
_LINEAR_PROBES = 9  # CPython's setobject.c (3.11-3.13)
_PERTURB_SHIFT = 5


_Placeholder = _settable.Placeholder  # an entry that hashes to the slot it must take


def _table_size(s: set[Any] | frozenset[Any]) -> int:
    extra = sys.getsizeof(s) - _SET_BASE_SIZE
    return 8 if extra <= 0 else extra // 16


def _probe_groups(h: int, mask: int) -> Iterator[range]:
    """The slots a set of ``mask + 1`` slots looks at for hash ``h``, group by group."""
    perturb = h & _MASK64
    i = h & mask
    while True:
        yield range(i, i + (_LINEAR_PROBES if i + _LINEAR_PROBES <= mask else 0) + 1)
        perturb >>= _PERTURB_SHIFT
        i = (i * 5 + 1 + perturb) & mask


def _layout(order: list[Any], size: int) -> list[Any] | None:
    """The insertion sequence (placeholders, then the elements) that lays ``order`` out in a
    table of ``size`` slots in that order, or None if this size does not allow it.

    Each element gets the first free slot of its probe sequence between the previous element's
    slot and the next element's own; the slots its probe sequence passes before that must be
    taken when it is inserted: by elements inserted before it, or else by placeholders.
    """
    mask = size - 1
    hashes = [hash(e) for e in order]
    target: dict[int, int] = {}  # slot -> index of the element laid out there
    passed: list[list[int]] = []  # per element: the slots it must find taken
    prev = -1
    bound = 4 * size + 64
    for n, h in enumerate(hashes):
        # The first usable slot of its probe sequence, after the previous element's and not
        # after the next element's own slot (where that element most likely sits); else the
        # first usable one.
        limit = mask
        if n + 1 < len(hashes):
            nxt = hashes[n + 1] & mask
            if nxt > prev:
                limit = nxt
        slot = -1
        for bounded in (True, False):
            before = []
            for steps, group in enumerate(_probe_groups(h, mask)):
                for j in group:
                    if j not in target and j > prev and (not bounded or j <= limit):
                        slot = j
                        break
                    before.append(j)
                if slot >= 0 or steps > bound:
                    break
            if slot >= 0:
                break
        if slot < 0:
            return None
        target[slot] = n
        passed.append(before)
        prev = slot
    placeholders = sorted({j for before in passed for j in before if j not in target})
    # The elements in an order where each finds the slots it passes taken: Kahn's algorithm.
    waits = [0] * len(order)
    unblocks: dict[int, list[int]] = {}
    for n, before in enumerate(passed):
        for k in {target[j] for j in before if j in target}:
            waits[n] += 1
            unblocks.setdefault(k, []).append(n)
    ready = [n for n, w in enumerate(waits) if w == 0]
    seq: list[Any] = [_Placeholder(j) for j in placeholders]
    while ready:
        n = ready.pop()
        seq.append(order[n])
        for m in unblocks.get(n, ()):
            waits[m] -= 1
            if waits[m] == 0:
                ready.append(m)
    if len(seq) != len(order) + len(placeholders):
        return None  # elements that wait for each other
    # The table is made by one resize to the smallest power of two above twice the entries (a
    # set updated from a dict presizes so, from five entries on): pad the entries to get ``size``.
    m = len(seq)
    if size == 8:
        return seq if m <= 4 else None
    if 2 * m >= size:
        return None
    pad = max(size // 4, 5) - m
    taken = set(target) | set(placeholders)
    j = 0
    while pad > 0:
        if j not in taken:
            seq.insert(0, _Placeholder(j))
            pad -= 1
        j += 1
    return seq


def _same_order(s: set[Any], order: list[Any]) -> bool:
    return len(s) == len(order) and all(a is b for a, b in zip(s, order, strict=True))


def fill_set(s: set[Any], order: list[Any], size: int) -> bool:
    """Add ``order``'s elements to the empty set ``s`` so that it iterates in that order (laid
    out in a table of ``size`` slots, the size the set had, or a larger one). False if no layout
    was found: ``s`` then holds the elements in its own order."""
    s.update(order)  # the common case: the plain rebuild keeps the order
    if len(order) < 2 or _same_order(s, order):
        return True
    size = max(size, 8)
    for _ in range(4):
        seq = _layout(order, size)
        if seq is not None:
            s.clear()
            s.update(dict.fromkeys(seq))
            for p in seq:
                if type(p) is _Placeholder:
                    s.discard(p)
            if _same_order(s, order):
                return True
        size *= 2
    s.clear()
    s.update(order)
    return False


class SetNotRestorable(Exception):
    """A set of a checkpoint whose table cannot be rebuilt in this process; ``frames`` is what
    was unpickled (the set holds its elements in another table), to name the variable by."""

    def __init__(self, reason: str, the_set: set[Any], frames: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.the_set = the_set
        self.frames = frames


def _set_record(s: set[Any]) -> Any:
    """What a checkpoint records of set ``s`` beside its elements: its exact table; TypeError
    if a restore could not rebuild it."""
    if not _settable.SUPPORTED:
        raise TypeError(
            f"a set of {len(s)} elements whose hash table this interpreter ({sys.version.split()[0]}, "
            f"{sys.implementation.name}) does not let a checkpoint record, so a restore could not "
            "give it back with the same order and later behaviour; hold sorted(...) or a "
            "dict.fromkeys(...) of its elements across the await"
        )
    table = _settable.read(s)
    problem = _settable.problem(table)
    if problem is not None:
        raise TypeError(
            f"a set of {len(s)} elements whose hash table a restore cannot rebuild ({problem}); "
            "hold sorted(...) or a dict.fromkeys(...) of its elements across the await"
        )
    return table.record()


def _frozenset_problem(f: frozenset[Any]) -> str | None:
    order = list(f)
    again = frozenset(order)  # what pickle rebuilds it as
    if _settable.SUPPORTED:
        if _settable.read(again) == _settable.read(f):
            return None
    elif _same_order(again, order):  # type: ignore[arg-type]
        return None
    return (
        f"a frozenset of {len(f)} elements whose iteration order a restore cannot reproduce (a "
        "rebuilt frozenset lays its elements out anew, in another table); hold a set, or a "
        "tuple(sorted(...)), across the await"
    )


class _Pickler(cloudpickle.CloudPickler):  # type: ignore[misc]  # cloudpickle is untyped
    """cloudpickle with the checkpoint's rules, except those for the builtin containers the C
    pickler writes without asking reducer_override (CheckpointPickler adds them).

    ``spaces`` maps ``id(globals dict)`` to the key of a workflow running in it: the frames'.
    """

    dispatch_table = _DISPATCH

    def __init__(
        self,
        file: Any,
        spaces: dict[int, tuple[str, dict[str, Any]]],
        data: ModuleData | None = None,
    ) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._spaces = spaces
        self._data = data if data is not None else ModuleData(spaces)
        self._globals: dict[int, Any] | None = None  # the data's globals, when first needed
        self.reached = False  # an object reached through module data was met

    def reducer_override(self, obj: Any) -> Any:
        t = type(obj)
        own = _OWN_OVERRIDES.get(t)
        if own is not None:
            return own(self, obj)
        if t in _UNSHARED or t is types.FunctionType and obj in _BY_NAME:
            return NotImplemented
        refs = self._globals
        if refs is None:
            refs = self._globals = self._data.globals()
        if id(obj) in refs:
            ref = self._data.global_ref(obj)
            if ref is not None:
                return (workflow_global, ref)
        if t is types.FunctionType or isinstance(obj, type):
            if t is type and obj.__module__ == "builtins" and getattr(builtins, obj.__qualname__, None) is obj:
                return NotImplemented  # a builtin class: by name (what cloudpickle decides, slowly)
            r = super().reducer_override(obj)  # cloudpickle's: classes and functions only
            if isinstance(obj, type):
                _keep_qualname(obj, r)
            return r
        if self._data.active and t not in _PLAIN_TYPES and self._data.path(obj) is not None:
            self.reached = True  # kept by its path: CheckpointPickler's persistent_id
        if isinstance(obj, BaseException):
            return _reduce_exception(obj, self.proto)
        return NotImplemented

    def _dynamic_function_reduce(self, func: Any) -> Any:
        r = super()._dynamic_function_reduce(func)
        # cloudpickle drops a generic function's ``__type_params__`` (def f[T](...), 3.12+):
        # carry them in the attribute state it restores with setattr.
        params = getattr(func, "__type_params__", ())
        state = r[2] if isinstance(r, tuple) and len(r) > 2 else None
        if params and isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            state[1]["__type_params__"] = params
        space = self._spaces.get(id(func.__globals__))
        if space is not None and isinstance(state, tuple) and len(state) == 2:
            # A function made in a workflow: its globals are the module's, resolved at restore.
            code, _base, name, argdefs, closure = r[1]
            state[1]["__globals__"] = {}
            state[1]["_cloudpickle_submodules"] = []
            r = (r[0], (code, _GlobalsRef(space[0]), name, argdefs, closure), state, None, None,
                 _function_setstate)
        return r


def _keep_qualname(cls: type, r: Any) -> None:
    """Make cloudpickle's rebuild of a class made at run time keep its ``__qualname__``.

    It builds the class anew with ``types.new_class(name, bases, ..., ns.update(type_kwargs))``
    where the class object is not already in the process (a restore in another one): the
    qualified name, which is not in the class's ``__dict__``, became its bare name. Given in the
    namespace the class is made from, ``type.__new__`` takes it as the class's own (before
    ``__init_subclass__`` and ``__set_name__`` run, as in the original class statement).
    """
    if not (isinstance(r, tuple) and len(r) > 1 and r[0] is getattr(cloudpickle.cloudpickle, "_make_skeleton_class", None)):
        return  # a class pickled by reference, or an enum (whose rebuild keeps its qualname)
    args = r[1]
    if isinstance(args, tuple) and len(args) > 3 and isinstance(args[3], dict) and cls.__qualname__ != cls.__name__:
        args[3]["__qualname__"] = cls.__qualname__


# Types the pickler writes with rules of their own, whatever module data holds.
def _reduce_live_iter(p: _Pickler, it: LiveIter) -> Any:
    if it._kind == "set" and _settable.SUPPORTED:
        p.reached = True  # written as its position by CheckpointPickler's persistent_id
    return (_restore_live_iter, it.state())


def _reduce_set_iter(p: _Pickler, it: Any) -> Any:
    if _settable.SUPPORTED:
        p.reached = True  # written as its position by CheckpointPickler's persistent_id
    return _reduce_native_iter(it)


_OWN_OVERRIDES: dict[type, Any] = {
    LiveIter: _reduce_live_iter,
    **{t: lambda _p, it: _reduce_native_iter(it) for t in _NATIVE_ITERS},
    _SetIter: _reduce_set_iter,
    **{t: lambda _p, it: _reduce_deque_iter(it) for t in _dequestate.ITER_TYPES},
}
# Types never looked up in module data: written by reference whatever they are bound to, or the
# runtime's own (``never_shared``).
_UNSHARED: set[type] = {
    types.BuiltinFunctionType, types.ModuleType, types.CodeType, types.CellType, _GlobalsRef,
}


# Functions of this package that reduce tuples name: pickled by reference (what cloudpickle
# decides for them too, slowly), never looked up in module data.
_BY_NAME: set[Any] = {
    _restore_live_iter, _restore_native_dict_iter, _exhausted, workflow_global, workflow_globals,
    _function_setstate, _set_exc_state, _rebuild_type_alias, _restore_deque_iter,
}


def never_shared(*objs: Any) -> None:
    """Declare the runtime's types whose objects are never module data (its frames), and its
    functions that reduce tuples name (pickled by reference)."""
    for o in objs:
        (_UNSHARED if isinstance(o, type) else _BY_NAME).add(o)


class CheckpointPickler(_Pickler):
    """cloudpickle with all the checkpoint's rules (see the module docstring): also sets (kept
    in their order) and module-level containers (kept by name), through persistent ids. A
    Python call for every object pickled: ``dumps`` uses it only where they occur."""

    def __init__(
        self,
        file: Any,
        spaces: dict[int, tuple[str, dict[str, Any]]],
        data: ModuleData | None = None,
    ) -> None:
        super().__init__(file, spaces, data)
        self._sets: list[set[Any]] = []  # the sets met, in order: their pid is their index
        self._records: list[Any] = []  # their tables, read when met
        self._set_pids: dict[int, tuple[str, int]] = {}

    def persistent_id(self, obj: Any) -> Any:
        t = type(obj)
        data = self._data
        if (t is LiveIter and obj._kind == "set" or t is _SetIter) and _settable.SUPPORTED:
            return self._set_iter_pid(obj)
        if t is set or t is list or t is dict or t is frozenset:
            ref = data.global_ref(obj)
            if ref is not None:
                return ("g", *ref)
            if data.active and t is not frozenset:
                path = data.path(obj)
                if path is not None:
                    return path
            if t is set:
                i = id(obj)
                pid = self._set_pids.get(i)
                if pid is None:
                    if _settable.SUPPORTED and _settable.plain(obj):
                        return None  # any rebuild gives its table
                    self._records.append(_set_record(obj))
                    pid = self._set_pids[i] = ("s", len(self._sets))
                    self._sets.append(obj)
                return pid
            if t is frozenset and len(obj) > 1:
                problem = _frozenset_problem(obj)
                if problem is not None:
                    raise TypeError(problem)
        elif data.active and t not in _PLAIN_TYPES and t not in _UNSHARED and t not in _OWN_OVERRIDES:
            return data.path(obj)
        return None

    def _set_iter_pid(self, it: Any) -> Any:
        """A set loop, or a set iterator: ("i", the set, the size it checks, its slot, the
        elements it has still to visit). The restore goes on from the slot where the rebuilt
        table has those elements there, else over the elements (``_settle_set_iter``)."""
        if type(it) is LiveIter:
            return ("i", *it.set_position())
        c = _container_of(it)
        if c is None:
            return None  # exhausted: reduced as a fresh exhausted iterator
        live, used, slot = _settable.iterator_state(it)
        slot = slot if live else -1
        return ("i", c, used, slot, _settable.elements_from(c, slot))

    def dump(self, obj: Any) -> None:
        """Pickle ``obj``, then the elements of the sets it holds, in their order, as further
        pickles in the same stream (memo shared), until no new set is met."""
        super().dump(obj)
        done = 0
        while done < len(self._sets):
            batch = self._sets[done:]
            done = len(self._sets)
            super().dump([(rec, list(x)) for rec, x in zip(self._records[done - len(batch) : done], batch, strict=True)])


class CheckpointUnpickler(pickle.Unpickler):
    """Reads what CheckpointPickler writes: module-level containers by name, sets in order."""

    def __init__(self, file: Any) -> None:
        super().__init__(file)
        self._sets: list[set[Any]] = []
        self._broken: tuple[str, _Unresolved] | None = None  # the first path that did not resolve
        self._set_iters: list[tuple[LiveIter, int | None, list[Any]]] = []  # settled once loaded

    def persistent_load(self, pid: Any) -> Any:
        tag = pid[0]
        if tag == "g":
            return workflow_global(pid[1], pid[2])
        if tag == "p" or tag == "m":
            try:
                return _resolve_ref(pid)
            except ValueError as e:
                stand_in = _Unresolved(ref_text(pid))
                if self._broken is None:
                    what = "module-level data" if tag == "p" else f"module {pid[1]!r}"
                    self._broken = (
                        f"it held the {pid[4]} at {ref_text(pid)} of {what}, and in this "
                        f"process {e}",
                        stand_in,
                    )
                return stand_in
        if tag == "i":
            _tag, c, used, slot, rest = pid
            li = LiveIter(None, c, "set", used)
            self._set_iters.append((li, slot, rest))
            return li
        if tag == "s":
            index = pid[1]
            while len(self._sets) <= index:
                self._sets.append(set())
            return self._sets[index]
        raise pickle.UnpicklingError(f"unknown reference {pid!r} in a checkpoint")

    def load_all(self) -> Any:
        """Load the checkpoint; SetNotRestorable once all is loaded if a set's table could not
        be rebuilt."""
        obj = self.load()
        done = 0
        failed: tuple[str, set[Any]] | None = None
        while done < len(self._sets):
            records = self.load()
            for s, (rec, order) in zip(self._sets[done:], records, strict=False):
                if isinstance(rec, int):  # written before tables were recorded: the order only
                    fill_set(s, order, rec)
                    continue
                why = _settable.rebuild(s, order, _settable.Table.from_record(rec))
                if why is not None and failed is None:
                    failed = (why, s)
            done += len(records)
        for li, slot, rest in self._set_iters:
            _settle_set_iter(li, slot, rest)
        if self._broken is not None:
            raise ModulePathBroken(self._broken[0], self._broken[1], obj)
        if failed is not None:
            raise SetNotRestorable(failed[0], failed[1], obj)
        return obj


def loads(payload: bytes) -> Any:
    """Unpickle what ``dumps`` wrote."""
    if payload[:1] == _REFS:
        f = io.BytesIO(payload)
        f.read(1)
        return CheckpointUnpickler(f).load_all()
    return pickle.loads(payload)


def dumps(
    obj: Any, spaces: dict[int, tuple[str, dict[str, Any]]], data: ModuleData | None = None
) -> bytes:
    """Pickle ``obj`` with the checkpoint's rules (``data``: the frames' module data, if the
    caller has looked into it already for this checkpoint)."""
    if not _STD_NAMES:
        _refresh_std_names()
    _refresh_dispatch()
    if data is None:
        data = ModuleData(spaces)
    buf = io.BytesIO()
    p = _Pickler(buf, spaces, data)
    p.dump(obj)
    payload = buf.getvalue()
    # A set or frozenset written (its opcode, or a byte of other data that looks like it), or an
    # object reached through module data, or a module-level container or one reached through
    # module data among the objects written (the C pickler writes lists, dicts and sets without
    # asking reducer_override): again with the rules for them.
    if _EMPTY_SET in payload or _FROZENSET in payload or p.reached or _shares_containers(data, p):
        buf = io.BytesIO()
        buf.write(_REFS)
        CheckpointPickler(buf, spaces, data).dump(obj)
        payload = buf.getvalue()
    return payload


def _shares_containers(data: ModuleData, p: _Pickler) -> bool:
    containers = data.containers()
    if not containers and not data.active:
        return False
    memo = p.memo.copy()
    if containers and not containers.keys().isdisjoint(memo):
        return True
    return data.active and (not data.paths().keys().isdisjoint(memo) or data.truncated is not None)


# The first byte of a payload written with persistent ids (a plain pickle starts with PROTO).
_REFS = b"R"


_EMPTY_SET = pickle.EMPTY_SET
_FROZENSET = pickle.FROZENSET


__all__ = [
    "CheckpointPickler",
    "CheckpointUnpickler",
    "LiveIter",
    "ModuleData",
    "ModulePathBroken",
    "ModuleTooLarge",
    "Namespace",
    "ResourceRefused",
    "SetNotRestorable",
    "dumps",
    "live_iter",
    "loads",
    "namespace",
    "never_shared",
    "user_module",
]
