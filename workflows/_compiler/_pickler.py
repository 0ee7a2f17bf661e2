"""The checkpoint pickler: what a continuation's state becomes in its bytes, and back.

One contract (docs/reference.md, "What a checkpoint keeps"), kept by one pickler that is asked
about every object it writes (``persistent_id``), not by a list of cases:

* by reference: an object the workflow's modules reach (``_pickle_modules``: a walk of module
  data through every container, class, function and instance of the application, kept while
  module data is as it found it) is written as its path, and comes back as the module's object
  (or, where the path leads nowhere in the restoring process, as the value it had); a function
  the workflow made and put into module data is put back there;
* by value, with the sharing between locals: pickle's memo, plus floats and big ints held more
  than once (written once, then as references to that one); exceptions with their whole state
  (``_pickle_exceptions``); dict, set and deque iterators as their container and a position
  (``_pickle_iters``); sets with their hash table (``_pickle_sets``, ``_settable``); live views
  as views of their container, set subclasses with their table, records whose ``__getattr__``
  needs their state (``_pickle_values``);
* refused at the checkpoint, naming the value (``ValueRefused``, ``ResourceRefused``, and the
  refusals of the modules above): whatever a restore could not give back.

This module holds the picklers, the reducers they dispatch to, and ``dumps``/``loads``.
"""

from __future__ import annotations

import ast
import builtins
import collections
import copyreg
import datetime
import decimal
import enum
import functools
import gc
import io
import itertools
import operator
import pickle
import random
import struct
import sys
import types
import typing
import weakref
from typing import Any

import cloudpickle  # type: ignore[import-untyped]  # ships no type information

from . import (
    _cached,
    _dequestate,
    _dynclass,
    _memview,
    _pickle_caches,
    _procstate,
    _seqiter,
    _settable,
)
from ._instdict import (
    adopt_state,
    as_base,
    assignable,
    dict_of,
    may_drop_dict,
    set_state_and_attributes,
    shared_dict,
    with_adopted_dict,
    with_instance_dict,
)
from ._pickle_exceptions import (
    _rebuild_tb,
    _reduce_exception,
    _set_exc_state,
    _tb_before,
    _tb_entry,
    reduce_traceback,
)
from ._pickle_iters import (
    _NATIVE_ITERS,
    LiveIter,
    _container_of,
    _exhausted,
    _reduce_deque_iter,
    _reduce_native_iter,
    _restore_deque_iter,
    _restore_live_iter,
    _restore_native_dict_iter,
    _SetIter,
    _settle_set_iter,
    live_iter,
    restore_module_deque_iter,
    restore_module_dict_iter,
    restore_module_live_iter,
    restore_module_odict_iter,
    restore_odict_iter,
)
from ._pickle_modules import (
    _ORDERED_STEPS,
    _PLAIN_TYPES,
    HEAPTYPE,
    PROCESS,
    ModuleData,
    ModulePathBroken,
    ModuleTooLarge,
    Namespace,
    Ref,
    _function_setstate,
    _GlobalsRef,
    _resolve_ref,
    _Unresolved,
    kind_matches,
    kind_text,
    module_constant,
    namespace,
    number_ids,
    order_of,
    ordered,
    positional,
    positional_problem,
    process_object,
    process_objects,
    rebind_ref,
    ref_text,
    resolve_ordered,
    slot_names,
    step_into,
    user_module,
    workflow_global,
    workflow_globals,
)
from ._pickle_sets import (
    ElementHashRefused,
    SetNotRestorable,
    StaleKeyRefused,
    _frozenset_problem,
    _set_record,
    element_refused,
    hash_identities,
    hashed_by_value,
    restore_eq_problem,
    stale_key_problem,
)
from ._pickle_values import (
    _PLAN,
    _VIEW_KINDS,
    FinalizerRefused,
    ValueRefused,
    _plan,
    _reduce_memoryview,
    _reduce_proxy,
    _reduce_view,
    class_namespace,
    container_base,
    dict_view,
    fill_container,
    fill_set_like,
    finalizer_problem,
    library_finalizer_problem,
    memory_view,
    metaclass_problem,
    new_container,
    new_set_like,
    reduce_container,
    reduce_object,
    reduce_set_like,
    released_view,
    set_state,
)
from ._relink import custom_pickled, forget, links, relink

_PY311 = sys.version_info >= (3, 11)
_BY_REFERENCE = cloudpickle.cloudpickle._should_pickle_by_reference
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


# Type parameters (``def f[T, **P, *Ts]``, ``class Box[T]`` in a workflow, 3.12+; or TypeVar(...)
# and ParamSpec(...) called there): pickle writes them by name, which a parameter made at run
# time does not have (a ParamSpec or TypeVarTuple was refused, with "attribute lookup P on typing
# failed"), and cloudpickle rebuilds a TypeVar without its default and its inferred variance.
_TYPE_PARAMS = tuple(
    t
    for t in (getattr(typing, n, None) for n in ("TypeVar", "ParamSpec", "TypeVarTuple"))
    if isinstance(t, type)
)


def _reduce_type_param(p: Any) -> Any:
    cp = cloudpickle.cloudpickle
    ref = cp._lookup_module_and_qualname(p, name=p.__name__)
    if ref is not None and not cp._is_registered_pickle_by_value(ref[0]):
        return (getattr, ref)  # a module's own, by its name
    t = type(p)
    kw: dict[str, Any] = {}
    constraints: tuple[Any, ...] = ()
    if t.__name__ != "TypeVarTuple":
        if p.__bound__ is not None:  # (bound=None makes a ParamSpec bound to NoneType)
            kw["bound"] = p.__bound__
        kw["covariant"] = p.__covariant__
        kw["contravariant"] = p.__contravariant__
        if getattr(p, "__infer_variance__", False):
            kw["infer_variance"] = True
        if t.__name__ == "TypeVar":
            constraints = p.__constraints__
    has_default = getattr(p, "has_default", None)
    if has_default is not None and has_default():
        kw["default"] = p.__default__
    return (_make_type_param, (t, p.__name__, constraints, kw, cp._get_or_create_tracker_id(p)))


def _make_type_param(t: type, name: str, constraints: Any, kw: Any, tracker_id: str) -> Any:
    if t.__name__ == "ParamSpec" and "bound" not in kw and name.isidentifier():
        # Only the ``**P`` syntax makes a ParamSpec without a bound: ParamSpec(name) is bound
        # to NoneType (3.12, 3.13).
        src = f"def _af_g[**{name}{' = _af_d' if 'default' in kw else ''}](): pass"
        ns: dict[str, Any] = {"_af_d": kw.get("default")}
        exec(compile(src, "<type parameter>", "exec"), ns)  # noqa: S102 - a checked identifier
        made = ns["_af_g"].__type_params__[0]
    else:
        made = t(name, *constraints, **kw)
    return cloudpickle.cloudpickle._lookup_class_or_track(tracker_id, made)


# --------------------------------------------------------------------------------------------
# Open files


class PositionRefused(ValueRefused):
    """An object of module data that only a set's element reaches: a restore could find it only
    by its position in the set's order, which differs in another process."""


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


# The reducers by type, in one flat dict: ours, then cloudpickle's, then copyreg's (a ChainMap of
# ChainMaps costs a Python call and a KeyError per map for every object the pickler looks up).
# Refreshed when cloudpickle's or copyreg's table grows (registrations only add).
def _reduce_code(code: types.CodeType) -> Any:
    # cloudpickle writes a code object with the file name '<dynamic-code>' (for payloads that do
    # not depend on where a function was defined); a function made in a workflow would come back
    # from a restore with it, and the traceback of an error raised in it would lose the user's
    # file and lines. Its own reducer, with the file name put back.
    make, args = cloudpickle.cloudpickle._code_reduce(code)
    consts = code.co_consts
    if any(type(c) is frozenset for c in consts):
        args = tuple(tuple(map(_const, a)) if a is consts else a for a in args)
    return _code_in_file, (make, args, code.co_filename)


class _FrozenConst:
    """A frozenset among a code object's constants (``x in {"a", "b"}``, folded by the compiler),
    written as the call that makes it: code that tests membership in it does not depend on the
    order a rebuilt table gives, which the checkpoint checks of the frozensets a workflow holds
    (their order depended on the process's string hashes: accepted in one process, refused in
    the next, as the methods of a frozen dataclass on 3.12)."""

    __slots__ = ("elements",)

    def __init__(self, elements: frozenset[Any]) -> None:
        self.elements = elements

    def __reduce__(self) -> tuple[Any, ...]:
        return frozenset, (tuple(self.elements),)


def _const(c: Any) -> Any:
    return _FrozenConst(c) if type(c) is frozenset else c


def _code_in_file(make: Any, args: tuple[Any, ...], filename: str) -> types.CodeType:
    code: types.CodeType = make(*args)
    return code.replace(co_filename=filename)


def _reduce_cell(cell: types.CellType) -> Any:
    # An empty cell, filled from its state once pickle's memo holds it: the functions that share
    # it share it after a restore too, and a cell that holds (something that holds) a function
    # closing over it is no cycle through the arguments of a reduce.
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell (a variable not bound yet, or deleted)
        return (_empty_cell, ())
    return (_empty_cell, (), (value,), None, None, _fill_cell)


def _empty_cell() -> types.CellType:
    return types.CellType()


def _fill_cell(cell: types.CellType, state: tuple[Any]) -> None:
    cell.cell_contents = state[0]


def _reduce_system_random(_p: Any, r: random.SystemRandom) -> Any:
    """A ``random.SystemRandom`` draws from the operating system: it has no state to keep (its
    reduce, ``Random``'s, asks for one and raises), only its attributes (``__dict__``, itself)."""
    return (copyreg.__newobj__, (type(r),), r.__dict__, None, None, adopt_state)  # type: ignore[attr-defined]


def _reduce_cached_property(cp: Any) -> Any:
    """A ``functools.cached_property`` (of a class made in the workflow), without the lock it
    holds on 3.11, which cannot be pickled: the restore makes it with a new one."""
    state = {k: v for k, v in vars(cp).items() if k != "lock"}
    return (type(cp), (cp.func,), state)


_OWN_REDUCERS: dict[type, Any] = {t: _refuse_file for t in _FILE_TYPES}
if sys.version_info < (3, 12):
    _OWN_REDUCERS[functools.cached_property] = _reduce_cached_property
_OWN_REDUCERS[types.CellType] = _reduce_cell
_OWN_REDUCERS[types.CodeType] = _reduce_code
_OWN_REDUCERS.update(dict.fromkeys(_TYPE_PARAMS, _reduce_type_param))
_OWN_REDUCERS.update(dict.fromkeys(_VIEW_KINDS, _reduce_view))
_OWN_REDUCERS[types.MappingProxyType] = _reduce_proxy
_OWN_REDUCERS[memoryview] = _reduce_memoryview
_OWN_REDUCERS.update(_cached.REDUCERS)
if _TypeAliasType is not None:
    _OWN_REDUCERS[_TypeAliasType] = _reduce_type_alias
if sys.version_info >= (3, 12):
    # Their pickling is deprecated (a DeprecationWarning at each) and removed in Python 3.14.
    def _refuse_itertools(it: Any) -> Any:
        # (the checkpoint's error adds why and what to write instead)
        raise TypeError(f"cannot pickle 'itertools.{type(it).__name__}' object")

    for _t in vars(itertools).values():
        if isinstance(_t, type) and _t.__module__ == "itertools":
            _OWN_REDUCERS[_t] = _refuse_itertools


def _reduce_count(it: Any) -> Any:
    """An ``itertools.count`` (a sequence number: ``seq = count()``, ``next(seq)`` as a heap's
    tie-breaker) as the ``count`` that goes on from where it is: its next value and its step,
    read from its repr, which shows both (``count(7)``, ``count(2.5, 0.5)``). Its own pickling
    is deprecated since 3.12 (refused there) and removed in 3.14. Other values than numbers (a
    ``Fraction`` start) are refused on 3.12 and later, as the other itertools objects are."""
    text = repr(it)
    args: Any = None
    if text.startswith("count(") and text.endswith(")"):
        try:
            args = ast.literal_eval(f"({text[6:-1]},)")
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            args = None
    if (
        isinstance(args, tuple)
        and 1 <= len(args) <= 2
        and all(type(a) in (int, float, complex) for a in args)
    ):
        return (itertools.count, args)
    if sys.version_info >= (3, 12):
        raise TypeError("cannot pickle 'itertools.count' object")
    return it.__reduce__()


_OWN_REDUCERS[itertools.count] = _reduce_count
_CLOUD_TABLES = tuple(getattr(cloudpickle.CloudPickler.dispatch_table, "maps", ()))
_DISPATCH: dict[type, Any] = {}
_DISPATCH_SIZES: list[int] = []


def _refresh_dispatch(sizes: list[int]) -> None:
    merged: dict[type, Any] = {}
    for m in reversed(_CLOUD_TABLES):
        merged.update(m)
    if not _CLOUD_TABLES:
        merged.update(cloudpickle.CloudPickler.dispatch_table)
    merged.update(_OWN_REDUCERS)
    _DISPATCH.clear()
    _DISPATCH.update(merged)
    _DISPATCH_SIZES[:] = sizes
    _KINDS.clear()
    forget()



def _in_args(rv: Any, d: Any) -> bool:
    """Whether the reduce value ``rv`` passes ``d`` in its arguments (or a tuple of them)."""
    if not isinstance(rv, tuple) or len(rv) < 2 or not isinstance(rv[1], tuple):
        return False
    return any(a is d or type(a) is tuple and any(b is d for b in a) for a in rv[1])


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
        self.process = process_objects()  # id -> (module, name): kept as the process's own
        self.reached = False  # an object kept by reference, or a set iterator, was met
        # id(d) -> (d, its instance): __dict__s held apart from an instance that its state
        # cannot give back (CheckpointPickler writes each as a reference to the instance)
        self.owned: dict[int, tuple[dict[str, Any], Any]] = {}
        # Instances pickled by a rule of the application's own (``_relink``): their attributes
        # the workflow holds elsewhere too are set again at the restore.
        self.custom: list[Any] = []

    def module_order(self, c: Any, kind: str) -> tuple[list[str], str] | tuple[()] | None:
        """For a container an iterator goes over: if it is module data, the order of its items
        (``order_of``), which a restore in another process checks (the module may have built
        it in an order of its own process there), or ``()`` for one too long to record (followed
        by place); else None."""
        data = self._data
        try:
            held = data.global_ref(c) is not None or (data.active and data.path(c) is not None)
        except ModuleTooLarge:
            return None
        if not held:
            return None
        self.reached = True  # the container is written by name or path (``persistent_id``)
        return order_of(c, kind) or ()

    def by_reference(self, rv: Any, c: Any) -> Any:
        """``rv``, an iterator's reduce whose container ``c`` is module data: as it is here
        (this pickler writes ``c`` by name or path, through ``persistent_id``)."""
        return rv

    def reduce_seq_iter(self, it: Any) -> Any:
        """An iterator of a list, bytearray or array at its position; one of a list of module
        data (``for h in HANDLERS``) with the order of the list's items, which a restore in
        another process checks (``_seqiter.restore_module_seq_iter``)."""
        rv = it.__reduce__()
        if len(rv) >= 3 and isinstance(rv[1][0], list):
            order = self.module_order(rv[1][0], "i")
            if order is not None:
                return self.by_reference(
                    _seqiter.reduce_module_seq_iter(it, order) if order else _seqiter.reduce_seq_iter(it),
                    rv[1][0],
                )
        return _seqiter.reduce_seq_iter(it)

    def reduce_native_iter(self, it: Any) -> Any:
        """A dict or set iterator; one of a dict of module data with the order of its keys."""
        rv = _reduce_native_iter(it)
        if rv[0] is _restore_native_dict_iter:
            kind, c, pos = rv[1]
            order = self.module_order(c, "K")
            if order is not None:
                if order:
                    rv = (restore_module_dict_iter, (kind, c, pos, PROCESS, *order))
                return self.by_reference(rv, c)
        elif rv[0] is restore_odict_iter and rv[1][1] is not None:
            order = self.module_order(rv[1][1], "K")
            if order is not None:
                od = rv[1][1]
                if order:
                    rv = (restore_module_odict_iter, (*rv[1], PROCESS, *order))
                return self.by_reference(rv, od)
        return rv

    def reduce_deque_iter(self, it: Any) -> Any:
        """A deque iterator; one of a deque of module data with the order of its items."""
        rv = _reduce_deque_iter(it)
        order = self.module_order(rv[1][1], "i")
        if order is not None:
            d = rv[1][1]
            if order:
                rv = (restore_module_deque_iter, (*rv[1], PROCESS, *order))
            return self.by_reference(rv, d)
        return rv

    def reducer_override(self, obj: Any) -> Any:
        t = type(obj)
        if t in _UNSHARED or t is types.FunctionType and obj in _BY_NAME:
            return NotImplemented
        refs = self._globals
        if refs is None:
            refs = self._globals = self._data.globals()
        if id(obj) in refs:
            # A global of the module, of any type (a decimal.Context, a StringIO, an iterator
            # bound to a module-level name too): the module's object after a restore.
            ref = self._data.global_ref(obj)
            if ref is not None:
                return (workflow_global, ref)
        if id(obj) in self.process:  # os.environ, random's generator: the restoring process's
            return (process_object, self.process[id(obj)])
        own = _OWN_OVERRIDES.get(t)
        if own is not None:
            return own(self, obj)
        if t is types.FunctionType or isinstance(obj, type):
            if self._data.active and id(obj) in self._data.paths():
                self.reached = True  # kept by its path (an observer the workflow registered)
            if t is not types.FunctionType and not _BY_REFERENCE(obj):  # made at run time
                problem = metaclass_problem(obj)
                if problem is not None:
                    raise ValueRefused(problem, obj)
            elif t is types.FunctionType and weakref.getweakrefcount(obj) and not _BY_REFERENCE(obj):
                problem = library_finalizer_problem(obj, t)  # a function made in the workflow
                if problem is not None:
                    raise FinalizerRefused(problem, obj)
            if (
                t is type
                and obj.__module__ == "builtins"
                and getattr(builtins, obj.__qualname__, None) is obj
            ):
                return NotImplemented  # a builtin class: by name (what cloudpickle decides, slowly)
            r = super().reducer_override(obj)  # cloudpickle's: classes and functions only
            if t is types.FunctionType:
                self._own_dict(obj, shared_dict(obj))
            if isinstance(obj, type):
                _keep_qualname(obj, r)
                r = _dynclass.once(obj, r)  # its hooks run only if made anew; its __slots__ kept
            return r
        on_path = False
        if self._data.active and t not in _PLAIN_TYPES and self._data.path(obj) is not None:
            self.reached = on_path = True  # kept by its path: CheckpointPickler's persistent_id
        if t.__flags__ & HEAPTYPE:
            # (a library object of module data is kept by its path, not copied: its finalizer
            # is the module's)
            problem = finalizer_problem(obj, t, on_path)
            if problem is not None:
                raise FinalizerRefused(problem, obj)
        if isinstance(obj, BaseException):
            self._own_dict(obj, shared_dict(obj))
            return _reduce_exception(obj, self.proto)
        base = container_base(t)
        if base is not None:
            return reduce_container(obj, base)
        if isinstance(obj, set):
            return self._reduce_set_like(obj)
        if isinstance(obj, frozenset) and len(obj) > 1:
            # A frozenset subclass: rebuilt from its elements, as a frozenset is.
            self._check_elements(obj)
            problem = _frozenset_problem(obj)
            if problem is not None:
                raise ValueRefused(problem, obj)
        if t.__flags__ & HEAPTYPE and custom_pickled(t):
            self.custom.append(obj)
        plan = _PLAN.get(t)
        if plan is None:
            plan = _plan(t)
        if t.__dictoffset__:
            # (the dict's type only: a reference kept here would make it look held apart below)
            if type(getattr(obj, "__dict__", None)) not in _PLAIN_DICTS and not (plan[0] or plan[1] is not None):
                # ``obj.__dict__ = AttrDict(...)``: a restore that fills a new plain dict from
                # its items would lose its class; it gets the dict itself back.
                rv = obj.__reduce_ex__(self.proto)
                if isinstance(rv, tuple) and len(rv) >= 3 and isinstance(obj.__dict__, dict):
                    more = (*rv[3:5], None, None)[:2]
                    return (*rv[:2], (obj.__dict__, rv[2]), *more, _set_dict_subclass)
            # vars(obj) held apart from obj: the restore gives it back as obj's __dict__; a
            # subclass of Counter, defaultdict, Fraction...: its attributes, which their reduce
            # leaves out
            d = shared_dict(obj)
            drops = may_drop_dict(t)
            if d is not None or drops:
                custom = plan[0] or plan[1] is not None
                rv = reduce_object(obj, self.proto) if custom else obj.__reduce_ex__(self.proto)
                if d is not None:
                    adopted = with_adopted_dict(obj, d, rv) if assignable(obj, d) else rv
                    if adopted is rv and not _in_args(rv, d):
                        # written as vars(obj) by CheckpointPickler, in any order (not where the
                        # reduce makes the object from it: ctypes' _unpickle(type, (dict, data)))
                        self._own_dict(obj, d)
                    rv = adopted
                return with_instance_dict(obj, as_base(t, rv)) if drops else rv
        if plan[0] or plan[1] is not None:
            return reduce_object(obj, self.proto)
        return NotImplemented

    def _own_dict(self, obj: Any, d: dict[str, Any] | None) -> None:
        """``d``, ``obj``'s ``__dict__`` that something else holds (``shared_dict``: ``d =
        e.__dict__``), written as the restored ``obj``'s own dict (``CheckpointPickler``):
        ``obj``'s rule writes its state otherwise, which leaves that holder a copy."""
        if d is not None:
            self.owned[id(d)] = (d, obj)
            self.reached = True

    def _reduce_set_like(self, s: Any) -> Any:
        """A set subclass instance, kept with its table (an exact set is CheckpointPickler's)."""
        by_address = self._check_elements(s)
        if _settable.SUPPORTED and _settable.plain(s):
            return reduce_set_like(s, None)
        return reduce_set_like(s, _set_record(s, by_address))

    def _check_elements(self, s: Any) -> bool:
        """ValueRefused if set (or frozenset) ``s`` holds an element whose hash is made from the
        address of an object the checkpoint copies (an iterator, an instance without
        ``__hash__`` of its own, a function made in the workflow, the object a method is bound
        to, such an object in a tuple): the copy hashes otherwise, so the set's table (its
        order) cannot come back. Else whether some element's hash is made from the address of
        an object kept as itself (a module's function or class, ``None`` before 3.12): the same
        in this process only."""
        by_address = False
        addresses = self._data.addresses
        if addresses:
            for e in s:
                for n in _ints_in(e):
                    target = addresses.get(n)
                    if target is None:
                        continue
                    if not self._kept_as_is(target[1]):
                        raise address_refused(s, e, target[0], target[1])
                    by_address = True
        if hashed_by_value(s):
            return by_address
        for e in s:
            for part, obj in hash_identities(e):
                if not self._kept_as_is(obj):
                    raise element_refused(s, e, part, obj)
                by_address = True
        return by_address

    def _kept_as_is(self, e: Any) -> bool:
        """Whether ``e`` comes back from a restore as the same object (so, in this process,
        with the same address): a singleton, a module, a function or class pickled by
        reference, a builtin function, a global of the frames' modules, an object reached
        through module data. Being of a type never looked up in module data (``_UNSHARED``)
        says nothing of it: a range iterator, a frame or a cell is written by value, a copy."""
        if e is None or e is Ellipsis or e is NotImplemented:
            return True
        t = type(e)
        if t is types.ModuleType:
            return True
        if t is float:
            return False  # a NaN: written by value, whatever binds it (no reducer is asked)
        if t is types.FunctionType or isinstance(e, type):
            if cloudpickle.cloudpickle._should_pickle_by_reference(e):
                return True
        elif t is types.BuiltinFunctionType:
            # a builtin function (len) is pickled by name; one bound to an object is that
            # object's method, which _check_elements asks about through its __self__
            return e.__self__ is None or self._kept_as_is(e.__self__)
        refs = self._globals
        if refs is None:
            refs = self._globals = self._data.globals()
        return id(e) in refs or (self._data.active and self._data.path(e) is not None)

    def _dynamic_function_reduce(self, func: Any) -> Any:
        r = super()._dynamic_function_reduce(func)
        # cloudpickle drops a generic function's ``__type_params__`` (def f[T](...), 3.12+):
        # carry them in the attribute state it restores with setattr.
        params = getattr(func, "__type_params__", ())
        state = r[2] if isinstance(r, tuple) and len(r) > 2 else None
        if params and isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            state[1]["__type_params__"] = params
        if func.__closure__ is not None and isinstance(state, tuple) and len(state) == 2:
            # cloudpickle makes the function with new empty cells and copies the values of its
            # cells into them: two functions that share a variable of the function that made
            # them (a counter's inc and get, a nonlocal) would each come back with a copy of it.
            # Made with its own cells instead, written by _reduce_cell (empty, then filled:
            # a cell may hold the function itself), so pickle's memo shares them as they were.
            r = (*r[:1], (*r[1][:4], func.__closure__), *r[2:])
            state[1]["__closure__"] = None
        space = self._spaces.get(id(func.__globals__))
        if space is not None and isinstance(state, tuple) and len(state) == 2:
            # A function made in a workflow: its globals are the module's, resolved at restore.
            code, _base, name, argdefs, closure = r[1]
            state[1]["__globals__"] = {}
            state[1]["_cloudpickle_submodules"] = []
            r = (
                r[0],
                (code, _GlobalsRef(space[0]), name, argdefs, closure),
                state,
                None,
                None,
                _function_setstate,
            )
        elif isinstance(state, tuple) and len(state) == 2 and not _module_namespace(func.__globals__):
            # A function made by exec() in a dict of the workflow's (``exec(src, g)``): made
            # with that dict itself (written through the memo, shared with what else holds it),
            # not with a new one holding only the names its code reads.
            code, _base, name, argdefs, closure = r[1]
            state[1]["__globals__"] = {}
            state[1]["_cloudpickle_submodules"] = []
            r = (r[0], (code, func.__globals__, name, argdefs, closure), state, None, None, _function_setstate)
        return r


def _module_namespace(g: dict[str, Any]) -> bool:
    """Whether ``g`` is the namespace of a module of this process (or names none: cloudpickle's
    rule then, as for a module made at run time)."""
    name = g.get("__name__")
    if not isinstance(name, str):
        return False
    m = sys.modules.get(name)
    return m is None or getattr(m, "__dict__", None) is g


def _keep_qualname(cls: type, r: Any) -> None:
    """Make cloudpickle's rebuild of a class made at run time keep its ``__qualname__``.

    It builds the class anew with ``types.new_class(name, bases, ..., ns.update(type_kwargs))``
    where the class object is not already in the process (a restore in another one): the
    qualified name, which is not in the class's ``__dict__``, became its bare name. Given in the
    namespace the class is made from, ``type.__new__`` takes it as the class's own (before
    ``__init_subclass__`` and ``__set_name__`` run, as in the original class statement).
    """
    if not (
        isinstance(r, tuple)
        and len(r) > 1
        and r[0] is getattr(cloudpickle.cloudpickle, "_make_skeleton_class", None)
    ):
        return  # a class pickled by reference, or an enum (whose rebuild keeps its qualname)
    args = r[1]
    if (
        isinstance(args, tuple)
        and len(args) > 3
        and isinstance(args[3], dict)
        and cls.__qualname__ != cls.__name__
    ):
        args[3]["__qualname__"] = cls.__qualname__


class _AliasedFrames:
    """Frames, and the locals that hold the same float or int as an earlier local (the C
    pickler writes such a number twice): made one object again by ``alias_frames``; and the
    locals that hold one of the module's constants, made that constant again."""

    __slots__ = ("frames", "aliases", "constants")

    def __init__(
        self,
        frames: list[Any],
        aliases: list[tuple[int, str, int, str]],
        constants: list[tuple[int, str, str]] | None = None,
    ) -> None:
        self.frames = frames
        self.aliases = aliases
        self.constants = constants

    def __reduce__(self) -> Any:
        if self.constants:
            return (alias_frames, (self.frames, self.aliases, self.constants))
        return (alias_frames, (self.frames, self.aliases))


_PLAIN_DICTS = frozenset({dict, type(None)})


def _set_dict_subclass(obj: Any, st: tuple[Any, Any]) -> None:
    """The state of an instance whose ``__dict__`` is a dict subclass: that dict, made its
    ``__dict__`` (it holds its items), and its slots if the state has some."""
    d, state = st
    object.__setattr__(obj, "__dict__", d)
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
        for k, v in state[1].items():
            object.__setattr__(obj, k, v)  # not the class's own __setattr__


class Observed:
    """Frames, and the functions of theirs that module data holds (observers the workflow
    registered there, held by no local maybe): written with them, so that the restore puts
    each back where module data held it ("R"), and the module calls the restored workflow's."""

    __slots__ = ("frames", "functions")

    def __init__(self, frames: list[Any], functions: list[Any]) -> None:
        self.frames = frames
        self.functions = functions

    def __reduce__(self) -> Any:
        return (_observed, (self.frames, self.functions))


def _observed(frames: list[Any], _functions: list[Any]) -> list[Any]:
    return frames


# Types the pickler writes with rules of their own, whatever module data holds.
def _reduce_live_iter(p: _Pickler, it: LiveIter) -> Any:
    if it._kind == "set":
        if _settable.SUPPORTED:
            p.reached = True  # written as its position by CheckpointPickler's persistent_id
        return (_restore_live_iter, it.state())
    state = it.state()
    if state[4] is None:  # a dict loop: of a dict of module data, with the order of its keys
        order = p.module_order(state[0], "K")
        if order is not None:
            rv = (restore_module_live_iter, (*state, PROCESS, *order)) if order else (_restore_live_iter, state)
            return p.by_reference(rv, state[0])
    return (_restore_live_iter, state)


def _reduce_set_iter(p: _Pickler, it: Any) -> Any:
    if _settable.SUPPORTED:
        p.reached = True  # written as its position by CheckpointPickler's persistent_id
    return _reduce_native_iter(it)


def _refuse_lost_newlines(_p: Any, s: io.StringIO) -> Any:
    """A StringIO in universal newlines mode (``newline=None``) that has seen a ``\r`` or
    ``\r\n``: its ``newlines`` says so, which its pickle leaves out on 3.11 (3.12 keeps it)."""
    if s.newlines not in (None, "\n") and not s.closed:
        raise ValueRefused(
            f"a StringIO(newline=None) that has translated {s.newlines!r} newlines cannot keep "
            "its newlines attribute on Python 3.11; hold its text (s.getvalue()) instead, or "
            "make it with StringIO(newline='')",
            s,
        )
    return NotImplemented


def sys_value(name: str) -> Any:
    """``sys.<name>`` of the restoring process."""
    return getattr(sys, name)


# The struct sequences of ``sys`` that cannot be made again (their classes refuse instances):
# kept as ``sys``'s own, as an object of a module is.
_SYS_SINGLETONS = {type(getattr(sys, n)): n for n in ("flags", "float_info", "hash_info", "int_info", "thread_info",
                                                       "version_info") if hasattr(sys, n)}


def _reduce_sys_singleton(_p: Any, obj: Any) -> Any:
    name = _SYS_SINGLETONS[type(obj)]
    if obj is not getattr(sys, name):
        raise ValueRefused(f"a {type(obj).__name__} other than sys.{name} cannot be made again at a restore; "
                           "hold tuple(it) instead", obj)
    return (sys_value, (name,))


def _reduce_method_wrapper(_p: Any, obj: Any) -> Any:
    """A ``staticmethod`` or ``classmethod`` with its ``__dict__`` (the names it copied from its
    function, and any attribute set on it since), which cloudpickle's reduce leaves out."""
    return (type(obj), (obj.__func__,), obj.__dict__, None, None, adopt_state)


def _refuse_current_context(_p: Any, c: decimal.Context) -> Any:
    """decimal's current context (``decimal.getcontext()``) is the thread's: a restore would
    give back a copy that no arithmetic uses."""
    if c is decimal.getcontext():
        raise ValueRefused(
            "decimal's current context (decimal.getcontext()) belongs to the thread that runs "
            "the step, not to the workflow, and a restore gives back a copy no arithmetic uses; "
            "hold a context of your own (ctx = decimal.Context(prec=...)) and compute with "
            "ctx.divide(a, b) or inside `with decimal.localcontext(ctx):` in one step",
            c,
        )
    return NotImplemented


def _reduce_super(_p: Any, obj: Any) -> Any:
    """A ``super(C, obj)`` held across an await: made again from its class and object (the
    object is the workflow's, restored with it), as the call made it."""
    if obj.__self__ is None:
        return (super, (obj.__thisclass__,))
    return (super, (obj.__thisclass__, obj.__self__))


def _reduce_generator(_p: Any, g: types.GeneratorType[Any, Any, Any]) -> Any:
    """A generator that has finished (it returned or raised, or was closed): it has no frame
    left, and every ``next`` raises StopIteration; made again as a closed generator of the same
    code and names. One that can still run keeps a frame, which pickle cannot write."""
    if g.gi_frame is not None:
        raise TypeError("cannot pickle 'generator' object")
    return (closed_generator, (g.gi_code, g.__name__, g.__qualname__))


def closed_generator(code: types.CodeType, name: str, qualname: str) -> Any:
    """A finished generator of ``code`` (the restore of one)."""
    cells = tuple(types.CellType() for _ in code.co_freevars)
    make = types.FunctionType(code, {}, name, (None,) * code.co_argcount, cells or None)
    make.__kwdefaults__ = dict.fromkeys(code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])
    g = make()
    g.close()  # never started: closing it runs none of its code
    g.__qualname__ = qualname
    return g


_OWN_OVERRIDES: dict[type, Any] = {
    super: _reduce_super,
    types.GeneratorType: _reduce_generator,
    decimal.Context: _refuse_current_context,
    random.SystemRandom: _reduce_system_random,
    staticmethod: _reduce_method_wrapper,
    classmethod: _reduce_method_wrapper,
    **{t: _reduce_sys_singleton for t in _SYS_SINGLETONS},
    LiveIter: _reduce_live_iter,
    types.TracebackType: reduce_traceback,
    **{t: lambda p, it: p.reduce_native_iter(it) for t in _NATIVE_ITERS},
    _SetIter: _reduce_set_iter,
    **{t: lambda p, it: p.reduce_deque_iter(it) for t in _dequestate.ITER_TYPES},
    **{t: lambda p, it: p.reduce_seq_iter(it) for t in _seqiter.TYPES},
    _seqiter.MEMORY_ITER: lambda _p, it: _seqiter.reduce_memory_iter(it),
    **({} if _PY312 else {io.StringIO: _refuse_lost_newlines}),
    **{t: _procstate.refuse_entered for t in _procstate.ENTERED_TYPES},
}
# The runtime's own iterators (a ``for`` loop's), never module data.
_RUNTIME_ITERS = frozenset({LiveIter, _SetIter})
_NO_ORDER: Any = object()  # an order not recorded yet (``_order_checks``)
# Types never looked up in module data: written by reference whatever they are bound to, or the
# runtime's own (``never_shared``).
_UNSHARED: set[type] = {
    _seqiter.Reordered,  # written by its own reduce (its items, its container, a position)
    type(iter(range(0))),  # written by their own reduce (a range and a position)
    type(iter(range(1 << 64))),
    _AliasedFrames,
    types.BuiltinFunctionType,
    types.ModuleType,
    types.CodeType,
    types.CellType,
    _GlobalsRef,
}


# Functions of this package that reduce tuples name: pickled by reference (what cloudpickle
# decides for them too, slowly), never looked up in module data.
_BY_NAME: set[Any] = {
    process_object,
    _restore_live_iter,
    _restore_native_dict_iter,
    _exhausted,
    workflow_global,
    workflow_globals,
    _function_setstate,
    _empty_cell,
    _fill_cell,
    _set_exc_state,
    _rebuild_tb,
    _tb_before,
    _tb_entry,
    _cached._rebuild_match,
    _rebuild_type_alias,
    _make_type_param,
    _restore_deque_iter,
    restore_module_deque_iter,
    restore_module_dict_iter,
    restore_module_live_iter,
    _seqiter.restore_seq_iter,
    _seqiter.restore_module_seq_iter,
    restore_odict_iter,
    restore_module_odict_iter,
    _seqiter.restore_memory_iter,
    _memview.make,
    closed_generator,
    _seqiter._exhausted_memory_iter,
    sys_value,
    set_state_and_attributes,
    adopt_state,
    dict_view,
    class_namespace,
    memory_view,
    released_view,
    set_state,
    new_set_like,
    fill_set_like,
    new_container,
    fill_container,
}


def never_shared(*objs: Any) -> None:
    """Declare the runtime's types whose objects are never module data (its frames), and its
    functions that reduce tuples name (pickled by reference)."""
    for o in objs:
        (_UNSHARED if isinstance(o, type) else _BY_NAME).add(o)
    _KINDS.clear()


_HASHED_BY_C = frozenset({str, int, float, bytes, bool, complex, type(None), frozenset, range})


def hash_runs_code(k: Any) -> bool:
    """Whether hashing ``k`` runs a ``__hash__`` written in Python (a class's own, a dataclass's),
    which reads the object's state: at a restore that state may not be set yet where the
    object is met inside its own attributes (a room whose exits dict is keyed by the rooms it
    links to, which link back). An enum member's is set with its class."""
    t = type(k)
    if t in _HASHED_BY_C:
        return False
    if t is tuple:
        return any(hash_runs_code(e) for e in k)
    return type(t.__hash__) is types.FunctionType and not isinstance(k, enum.Enum)


def cyclic_tables(memo: dict[int, Any]) -> set[int]:
    """The ids of the dicts and sets written (``memo``: a pass's) that a key (an element)
    hashed by Python code reaches through its own attributes: a restore would put that key in
    while the key's state is still being read, before its ``__hash__`` can run. Only those
    are filled once every object is back (a ``Counter``, whose reduce hands its items over as a
    new dict, is made empty as other dict subclasses are); a dict or set a reduce makes to hand
    on is no object's attribute, and is written as it is. A frozenset among them is refused: it
    cannot be made before its elements.

    A key reaches its table where both are in one strongly connected part of the graph of the
    objects written (Tarjan's walk, from the tables: each object once)."""
    tables = [
        o
        for _, o in memo.values()
        if isinstance(o, (dict, set, frozenset)) and o and keys_run_code(o) and any(map(_may_hold, o))
    ]
    if not tables:
        return set()
    written = {id(o) for _, o in memo.values()}

    def edges(o: Any) -> Any:
        for r in gc.get_referents(o):
            if (id(r) in written or type(r) is dict) and not isinstance(r, _NOT_WALKED):
                yield r

    index: dict[int, int] = {}
    low: dict[int, int] = {}
    part: dict[int, int] = {}
    stack: list[Any] = []
    on_stack: set[int] = set()
    for root in tables:
        if id(root) in index:
            continue
        index[id(root)] = low[id(root)] = len(index)
        stack.append(root)
        on_stack.add(id(root))
        work = [(root, edges(root))]
        while work:
            node, it = work[-1]
            for child in it:
                c = id(child)
                if c not in index:
                    index[c] = low[c] = len(index)
                    stack.append(child)
                    on_stack.add(c)
                    work.append((child, edges(child)))
                    break
                if c in on_stack:
                    low[id(node)] = min(low[id(node)], index[c])
            else:
                work.pop()
                n = id(node)
                if work:
                    p = id(work[-1][0])
                    low[p] = min(low[p], low[n])
                if low[n] == index[n]:
                    while True:
                        w = stack.pop()
                        on_stack.discard(id(w))
                        part[id(w)] = n
                        if w is node:
                            break
    return {
        id(t) for t in tables if any(part.get(id(k)) == part[id(t)] for k in t if hash_runs_code(k))
    }


_NOT_WALKED = (type, types.ModuleType, types.FunctionType, types.CodeType)
_ATOMIC = frozenset({int, str, float, bool, bytes, complex, type(None)})


def _may_hold(k: Any) -> bool:
    """Whether key ``k`` may hold other objects (its attributes are not all numbers and
    strings: a tile of two ints holds nothing that could lead back to its table)."""
    t = type(k)
    if t in _ATOMIC:
        return False
    if t is tuple:
        return any(map(_may_hold, k))
    d = getattr(k, "__dict__", None)
    if type(d) is not dict or slot_names(t):
        return True
    return any(type(v) not in _ATOMIC for v in d.values())


def _without_items(rv: Any) -> tuple[Any, list[tuple[Any, Any]] | None]:
    """A mapping's reduce value without its items, and the items (None: it has none apart)."""
    if not isinstance(rv, tuple):
        return rv, None
    if rv[0] is new_container and len(rv) > 2:
        base, extra, items, attrs = rv[2]
        return (rv[0], rv[1], (base, extra, [], attrs), *rv[3:]), list(items)
    if len(rv) > 4 and rv[4] is not None:
        return (*rv[:4], None, *rv[5:]), list(rv[4])
    return rv, None


def _items_as_argument(obj: dict[Any, Any], rv: Any) -> bool:
    """Whether ``rv`` (a dict subclass's reduce value) makes ``obj`` by calling its class with
    one plain dict of its items, and nothing else (no state, no items apart)."""
    return (
        isinstance(rv, tuple) and len(rv) == 2 and rv[0] is type(obj) and isinstance(rv[1], tuple)
        and len(rv[1]) == 1 and type(rv[1][0]) is dict and rv[1][0] == obj
    )


def keys_run_code(table: Any) -> bool:
    """Whether a key of dict ``table`` (an element of set ``table``) hashes by Python code."""
    for k in table:
        if type(k) is not str and hash_runs_code(k):
            return True
    return False


class CheckpointPickler(_Pickler):
    """cloudpickle with all the checkpoint's rules (see the module docstring), through
    persistent ids too: module data by reference, sets in their order, shared numbers once. A
    Python call for every object pickled: the checkpoint of plain locals (numbers, strings,
    builtin containers of them, none shared with a module) skips it (``_checkpoint``)."""

    def __init__(
        self,
        file: Any,
        spaces: dict[int, tuple[str, dict[str, Any]]],
        data: ModuleData | None = None,
        shared: set[int] | None = None,
        owned: dict[int, tuple[dict[str, Any], Any]] | None = None,
        cyclic: set[int] | None = None,
    ) -> None:
        super().__init__(file, spaces, data)
        if owned:
            self.owned.update(owned)
        self._cyclic = cyclic or set()  # (cyclic_tables)
        self._dicts_written: set[int] = set()  # of self.owned: those whose items are written
        self._sets: list[set[Any]] = []  # the sets met, in order: their pid is their index
        self._sets_done = 0  # those whose elements are written
        # Dicts keyed by objects hashed by Python code: written empty, their items as further
        # pickles in the stream, put in once every object is back (``hash_runs_code``).
        self._tables: list[dict[Any, Any]] = []
        self._table_pids: dict[int, tuple[str, int]] = {}
        self._tables_done = 0
        self._mappings: list[tuple[Any, list[tuple[Any, Any]]]] = []  # OrderedDict, defaultdict...
        self._mappings_done = 0
        self._records: list[Any] = []  # their tables, read when met
        self._set_pids: dict[int, tuple[str, int]] = {}
        # Floats and ints (other than the cached small ones): pickle writes each occurrence anew,
        # so two locals holding one NaN would come back holding two. The first dump notes those
        # met more than once (holding each, so that no id is reused while it runs); ``dumps``
        # then writes again with ``shared`` set: each of those as a reference after its first.
        self.numbers: dict[int, Any] = {}
        self.shared_numbers: set[int] = set()
        self._occurs: dict[int, int] = {}
        self._shared: set[int] | None = shared
        self._number_pids: dict[int, tuple[str]] = {}
        self._fallback: int | None = None  # the object a path reference is writing by value
        # Per (container, step kind) of module data: its order (``_order_checks``).
        self._orders: dict[tuple[int, str], Any] = {}

    def reducer_override(self, obj: Any) -> Any:
        rv = super().reducer_override(obj)
        if self._cyclic and id(obj) in self._cyclic and isinstance(obj, dict):
            # An OrderedDict, defaultdict or dict subclass keyed by objects that hold it: made
            # empty, its items put in once every object is back (as cyclic_tables' dicts).
            if rv is NotImplemented:
                reduce = _DISPATCH.get(type(obj))
                rv = reduce(obj) if reduce is not None else obj.__reduce_ex__(self.proto)
            rv, items = _without_items(rv)
            if items is None and _items_as_argument(obj, rv):
                # Its reduce hands its items to its class as a new dict (a Counter's
                # ``(Counter, (dict(self),))``), which a restore would fill before its keys are
                # back: made empty as any dict subclass is, its items put in with the others'.
                rv, items = (copyreg.__newobj__, (type(obj),), None), list(obj.items())  # type: ignore[attr-defined]
            if items is not None:
                self._mappings.append((obj, items))
        return rv

    def persistent_id(self, obj: Any) -> Any:
        t = type(obj)
        if t is float or t is int:
            return self._number_pid(obj, t)
        if t is str or t is tuple or t is bytes or t is bool or obj is None:
            return None
        data = self._data
        if (t is LiveIter and obj._kind == "set" or t is _SetIter) and _settable.SUPPORTED:
            return self._set_iter_pid(obj)
        if t is dict and self.owned:
            held = self.owned.get(id(obj))
            if held is not None and held[0] is obj:
                return self._dict_of(obj, held[1])
        if t is set or t is list or t is dict or t is frozenset or t is bytearray:
            # (the C pickler writes these without asking reducer_override)
            proc = self.process.get(id(obj))
            if proc is not None:  # sys.path, sys.modules: the restoring process's
                return ("X", *proc)
            ref = data.global_ref(obj)
            if ref is not None:
                return ("g", *ref)
            if data.active and t is not frozenset:
                pid = self._by_path(obj)
                if pid is not None:
                    return pid
            if t is dict:
                if id(obj) in self._cyclic:
                    pid = self._table_pids.get(id(obj))
                    if pid is None:
                        pid = self._table_pids[id(obj)] = ("e", len(self._tables))
                        self._tables.append(obj)
                    return pid
                return None
            if t is set:
                i = id(obj)
                pid = self._set_pids.get(i)
                if pid is None:
                    by_address = self._check_elements(obj)
                    if _settable.SUPPORTED and _settable.plain(obj) and i not in self._cyclic:
                        return None  # any rebuild gives its table (its elements put in as met)
                    self._records.append(_set_record(obj, by_address))
                    pid = self._set_pids[i] = ("s", len(self._sets))
                    self._sets.append(obj)
                return pid
            if t is frozenset and id(obj) in self._cyclic:
                raise TypeError(
                    "a frozenset of objects hashed by their own __hash__, one of which holds the "
                    "frozenset back: a restore must build it (hashing its elements) before their "
                    "state is back, so their __hash__ would fail; hold a set (or a tuple) of them "
                    "across the await instead"
                )
            if t is frozenset and len(obj) > 1:
                self._check_elements(obj)
                problem = _frozenset_problem(obj)
                if problem is not None:
                    raise TypeError(problem)
        elif data.active and t not in _PLAIN_TYPES and t not in _UNSHARED and t not in _RUNTIME_ITERS:
            return self._by_path(obj)
        return None

    def _dict_of(self, d: dict[str, Any], owner: Any) -> Any:
        """("D", the instance, its items at the first reference; None at the others)."""
        if id(d) in self._dicts_written:
            return ("D", owner, None)
        self._dicts_written.add(id(d))
        return ("D", owner, tuple(d.items()))

    def _by_path(self, obj: Any) -> Any:
        """An object reached through module data: its path, and (unless it is a global of another
        module) the object itself, written by value, for a process where the path leads nowhere
        (data the workflow added to a module, gone with the process that added it)."""
        if id(obj) == self._fallback:
            self._fallback = None
            return None  # the value the reference carries
        path = self._data.path(obj)
        if path is None or not path[3]:
            return path
        if positional(path[3]):
            raise PositionRefused(positional_problem(obj, path), obj)
        _pickle_caches.check_path(obj, path, self._kept_as_is)  # a cached function's result
        self._fallback = id(obj)
        if type(obj) is types.FunctionType and self._data.closes_over_own(obj):
            # A function the workflow made (its closure holds the workflow's frame) and put into
            # module data (an observer it registered): written by value, and put back there at
            # the restore, so that the module calls the restored workflow's function: at each
            # place module data held it (registered in two lists, put back in both).
            more = self._data.more_paths(obj)
            if more:
                return ("RR", (path, *more), obj, PROCESS)
            return ("R", *path, PROCESS, obj)
        if ordered(path[3]):
            # Found by its place in a list or a dict: in another process the module may have
            # built that container in another order, where the place holds another object.
            return ("Q", *path, (PROCESS, self._order_checks(path), own_id(obj)), obj)
        # (in this process, a restore checks that the path still leads to this very object)
        return ("P", *path, (PROCESS, own_id(obj)), obj)

    def _order_checks(self, path: Any) -> tuple[Any, ...]:
        """For each ordered step of ``path``: the step's index, the fingerprint of the element
        it goes through, and that of its container's elements whatever their order."""
        checks = []
        tag, root, name, steps, _tname = path
        o = workflow_globals(root)[name] if tag == "p" else vars(sys.modules[root])[name]
        try:
            for at, step in enumerate(steps):
                kind, k = step
                if kind in _ORDERED_STEPS and type(k) is int:
                    key = (id(o), kind)
                    order = self._orders.get(key, _NO_ORDER)
                    if order is _NO_ORDER:
                        order = self._orders[key] = order_of(o, kind)
                    if order is not None and 0 <= k < len(order[0]):
                        checks.append((at, order[0][k], order[1]))
                o = step_into(o, step)
        except Exception:  # the path was just found: only a container changing under the walk
            pass
        return tuple(checks)

    def _number_pid(self, n: Any, t: type) -> Any:
        if t is int and -5 <= n <= 256:
            return None  # one object per value in every process
        addresses = self._data.addresses
        if addresses is not None and t is int:
            target = addresses.get(n)
            if target is not None:  # the id (or hash) of an object written: the restored one's
                if len(target) == 3:  # of an object of module data only: the way to it
                    return ("O", target[0], target[2], format(n, "x"))
                return ("o", target[0], target[1], own_id(n))
        i = id(n)
        shared = self._shared
        if shared is None:
            if i in self.numbers:
                # Held twice: unless only by locals the frames' aliases make one again.
                seen = self._occurs[i] = self._occurs.get(i, 1) + 1
                if seen > self._data.direct_counts.get(i, 1):
                    self.shared_numbers.add(i)
            else:
                self.numbers[i] = n
            return None
        if i not in shared:
            return None
        return number_pid(self._number_pids, n, t)

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
        done = self._sets_done
        while (
            done < len(self._sets)
            or self._tables_done < len(self._tables)
            or self._mappings_done < len(self._mappings)
        ):
            if self._tables_done < len(self._tables) or self._mappings_done < len(self._mappings):
                tables = self._tables[self._tables_done :]
                self._tables_done = len(self._tables)
                mappings = self._mappings[self._mappings_done :]
                self._mappings_done = len(self._mappings)
                super().dump((_TABLE_ITEMS, [list(d.items()) for d in tables], mappings))
            if done < len(self._sets):
                batch = self._sets[done:]
                done = len(self._sets)
                super().dump(
                    [
                        (rec, list(x))
                        for rec, x in zip(self._records[done - len(batch) : done], batch, strict=True)
                    ]
                )
        self._sets_done = done


class _FirstPass(_Pickler):
    """The first pass of ``dumps``: the C pickler with the checkpoint's rules, which keeps what
    a reduce hands to pickle outside any container, where a float or int it writes would not be
    seen by the check for numbers held twice (``_numbers_held_twice``, which reads the
    containers in the memo): a state that is the number itself and the items and (key, value)
    pairs a reduce gives as iterators (``loose``, ``loose_pairs``: listed here and handed to
    pickle as they were), or the object whose items those iterators give (``seqs``: a deque, a
    list subclass; ``maps``: an OrderedDict, a defaultdict, a dict subclass).

    What the C pickler does with an object ``_Pickler.reducer_override`` leaves to it is decided
    once per class (``_kind``): left to it where it writes the object by reference or by a
    reduce whose parts are in its memo, or whose items are the object's own; reduced here (as
    the C pickler would: the dispatch table's reducer, else ``__reduce_ex__``) otherwise."""

    def __init__(
        self,
        file: Any,
        spaces: dict[int, tuple[str, dict[str, Any]]],
        data: ModuleData | None = None,
    ) -> None:
        super().__init__(file, spaces, data)
        self.loose: list[Any] = []
        self.loose_pairs: list[list[tuple[Any, Any]]] = []
        self.seqs: list[Any] = []
        self.maps: list[dict[Any, Any]] = []
        # An object other than the builtin values the C pickler writes without asking was met:
        # only such a one (or a tuple of them) is a key whose hash can change (stale_keys).
        self.objects = False
        self._frames = set(map(id, self._data.frames))

    def by_reference(self, rv: Any, c: Any) -> Any:
        # Once module data is met (``reached``), what this pass writes is not used: the pass
        # with the rules for it writes again. Its container is left out here, not written by
        # value (with every key checked, and every object it holds in the memo's walks).
        assert self.reached
        f, args, *rest = rv
        return (f, tuple(None if a is c else a for a in args), *rest)

    def reducer_override(self, obj: Any) -> Any:
        self.objects = True
        if id(obj) in self._frames:
            state = obj.__dict__
            if not _CONTAINER_TYPES.isdisjoint(map(type, state.values())):
                held = self._data.containers()
                if held and not held.keys().isdisjoint(map(id, state.values())):
                    # A local holds a module-level container (``players = PLAYERS``): the pass
                    # with the rules for module data writes it by name, not by value as this
                    # one would (with every key checked, and what it holds in the memo's walks).
                    self.reached = True
                    rv = obj.__reduce__()
                    return (*rv[:2], {k: None if id(v) in held else v for k, v in state.items()})
        if isinstance(obj, _TABLES):  # a subclass (exact ones are not asked about): an
            _refuse_stale(obj, self._data)  # OrderedDict's reduce fails on a key changed
        rv = _PICKLER_OVERRIDE(self, obj)
        if rv is NotImplemented:
            t = type(obj)
            kind = _KINDS.get(t)
            if kind is None:
                kind = _kind(t)
            if kind is _AS_IS:
                return rv
            if kind is _SEQ:
                self.seqs.append(obj)
                return rv
            if kind is _MAP:
                self.maps.append(obj)
                return rv
            reduce = _DISPATCH.get(t)
            rv = reduce(obj) if reduce is not None else obj.__reduce_ex__(self.proto)
        if type(rv) is not tuple or len(rv) < 3:
            return rv
        if type(rv[2]) in _NUMBER_TYPES:
            self.loose.append(rv[2])
        if len(rv) < 4:
            return rv
        items = rv[3]
        if items is not None and hasattr(type(items), "__next__"):
            listed = list(items)
            self.loose.extend(listed)
            rv = (*rv[:3], iter(listed), *rv[4:])
        pairs = rv[4] if len(rv) > 4 else None
        if pairs is not None and hasattr(type(pairs), "__next__"):
            listed_pairs = list(pairs)
            self.loose_pairs.append(listed_pairs)
            rv = (*rv[:4], iter(listed_pairs), *rv[5:])
        return rv


_PICKLER_OVERRIDE = _Pickler.reducer_override
_NUMBER_TYPES = frozenset({float, int})
# What the first pass does with an object _Pickler.reducer_override leaves to the C pickler, per
# class (``_kind``): leave it to it (_AS_IS), or note the object whose items the C pickler
# writes from its reduce's iterator (_SEQ, _MAP), or reduce it itself (_REDUCE). Cleared when
# the dispatch table or the classes never looked up change.
_AS_IS, _SEQ, _MAP, _REDUCE = "as is", "sequence", "mapping", "reduce"
_KINDS: dict[type, str] = {}
_OBJECT_REDUCE_EX = object.__reduce_ex__
_OBJECT_REDUCE = object.__reduce__
_OBJECT_GETSTATE = object.__getstate__
# Classes whose reduce hands pickle their items (``__iter__``) or their pairs (``items``), and
# a state that is their __dict__ if any: (base, its __reduce__, its __iter__ or items, kind).
_ITEM_REDUCES = (
    (collections.deque, collections.deque.__reduce__, "__iter__", _SEQ),
    (collections.OrderedDict, collections.OrderedDict.__reduce__, "items", _MAP),
    (collections.defaultdict, collections.defaultdict.__reduce__, "items", _MAP),
    (list, _OBJECT_REDUCE, "__iter__", _SEQ),
    (dict, _OBJECT_REDUCE, "items", _MAP),
)


# Classes of the standard library whose reduce gives only a callable and a tuple of arguments.
_ARGS_ONLY = frozenset(
    {range, slice, datetime.date, datetime.datetime, datetime.time, datetime.timedelta}
)


def _kind(t: type) -> str:
    """What the first pass does with the instances of ``t`` that ``_Pickler.reducer_override``
    leaves to the C pickler. Left to it (_AS_IS) where it writes them by reference (functions,
    classes), by the reduce of a class never looked up in module data (range iterators, frames,
    cells: their parts in tuples, their state a dict) or of ``_ARGS_ONLY``, or by
    ``object.__reduce_ex__`` as it is (no dispatch entry, no ``__reduce_ex__``, ``__reduce__``
    or ``__getstate__`` of the class's own): their state is their ``__dict__``, or
    ``(__dict__, slots)``, all in the memo. A deque,
    an OrderedDict, a defaultdict, a list or dict subclass reduced by its base's reduce, over
    its base's ``__iter__`` or ``items``: _SEQ or _MAP, the object holding what the reduce's
    iterator gives. Any other: _REDUCE."""
    kind = _REDUCE
    if t in _UNSHARED or t in _ARGS_ONLY or t is types.FunctionType or issubclass(t, type):
        kind = _AS_IS
    elif (
        t not in _DISPATCH
        and getattr(t, "__reduce_ex__", None) is _OBJECT_REDUCE_EX
        and getattr(t, "__getstate__", None) is _OBJECT_GETSTATE
    ):
        reduce = getattr(t, "__reduce__", None)
        for base, base_reduce, items, base_kind in _ITEM_REDUCES:
            if issubclass(t, base):
                if reduce is base_reduce and getattr(t, items) is getattr(base, items):
                    kind = base_kind
                break
        else:
            if reduce is _OBJECT_REDUCE:
                kind = _AS_IS
    if len(_KINDS) > 4096:
        _KINDS.clear()
    _KINDS[t] = kind
    return kind


def alias_frames(
    frames: list[Any],
    aliases: list[tuple[int, str, int, str]],
    constants: list[tuple[int, str, str]] = (),  # type: ignore[assignment]
) -> list[Any]:
    """The restored frames, each aliased local holding its earlier local's object again, and
    each local that held one of the module's constants holding it again (``module_constant``)."""
    for fi, name, fj, other in aliases:
        frames[fi].__dict__[name] = frames[fj].__dict__[other]
    for fi, name, ref in constants:
        d = frames[fi].__dict__
        d[name] = module_constant(ref, d[name])
    return frames


_BY_NAME.add(alias_frames)


def aliased(
    frames: list[Any],
    aliases: list[tuple[int, str, int, str]] | None,
    constants: list[tuple[int, str, str]] | None = None,
) -> Any:
    """What a checkpoint pickles for ``frames``: the frames, with their aliases and the locals
    holding the module's constants, if any."""
    if constants:
        return _AliasedFrames(frames, aliases or [], constants)
    return _AliasedFrames(frames, aliases) if aliases else frames


def own_id(o: Any) -> str:
    """The id of ``o`` as a reference of the checkpoint records it: as text, not an int, which
    the pickler would take for one of the workflow's (``key = id(obj)``, written as the id of
    the object it names: through the very reference that holds it, without end)."""
    return format(id(o), "x")


def number_pid(pids: dict[int, tuple[str]], n: Any, t: type) -> tuple[str]:
    """The reference a checkpoint writes for a float or int held twice: its value at its first
    occurrence (``n<index>:<f hex | i hex>``), ``N<index>`` after."""
    i = id(n)
    pid = pids.get(i)
    if pid is not None:
        return pid
    pids[i] = (f"N{len(pids)}",)
    value = f"f{n.hex()}" if t is float else f"i{n:x}"
    return (f"n{len(pids) - 1}:{value}",)


class NumbersPickler(pickle.Pickler):
    """The C pickler, writing the floats and ints of ``shared`` (by id) once each."""

    def __init__(self, file: Any, shared: set[int]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._shared = shared
        self._pids: dict[int, tuple[str]] = {}

    def persistent_id(self, obj: Any) -> Any:
        t = type(obj)
        if (t is int or t is float) and id(obj) in self._shared:
            return number_pid(self._pids, obj, t)
        return None


class GlobalsPickler(pickle.Pickler):
    """The C pickler, writing the objects of ``refs`` (functions and classes, by id) as the
    globals of the workflows' modules they are bound to, with the (workflow key, name) given:
    what the checkpoint pickler writes for them (``_Pickler.reducer_override``)."""

    def __init__(self, file: Any, refs: dict[int, tuple[str, str]]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._refs = refs

    def reducer_override(self, obj: Any) -> Any:
        ref = self._refs.get(id(obj))  # the objects of refs are alive: their ids are theirs
        if ref is not None:
            return (workflow_global, ref)
        return NotImplemented


class PathsPickler(GlobalsPickler):
    """``GlobalsPickler``, writing too the lists and dicts of ``paths`` (by id: objects reached
    through module data) as the checkpoint pickler writes them where their path goes through no
    set's element nor place in an ordered container (``_Pickler._by_path``, ``plain_path``):
    the path, this process and the object's id, then its items (in a list or dict of its own,
    written by value: what a process where the path leads nowhere gets)."""

    def __init__(self, file: Any, refs: dict[int, tuple[str, str]], paths: dict[int, Any]) -> None:
        super().__init__(file, refs)
        # (the objects of paths are alive: their ids are theirs)
        pids = {i: ("P", *ref, (PROCESS, format(i, "x")), list(o) if type(o) is list else dict(o))
                for i, (ref, o) in paths.items()}
        get = pids.get
        self.persistent_id = lambda obj: get(id(obj))  # type: ignore[method-assign]


def plain_path(data: ModuleData, obj: Any) -> Ref | None:
    """The path of list or dict ``obj`` (reached through module data) if the checkpoint pickler
    writes it as a plain reference, the object by value with it ("P", ``_Pickler._by_path``),
    and could not refuse it; else None (a global, a set's element, a place in an ordered
    container, a cached function's result whose call a restore may not make again alike)."""
    if data.global_ref(obj) is not None:
        return None
    try:
        path = data.path(obj)
    except ModuleTooLarge:
        return None
    if path is None or not path[3] or positional(path[3]) or ordered(path[3]):
        return None
    if not _pickle_caches.remade_alike(path[3]):
        return None
    return path


def global_function_ref(data: ModuleData, f: types.FunctionType) -> tuple[str, str] | None:
    """(workflow key, name) if the checkpoint pickler writes function ``f`` as a global of the
    frames' modules (as ``_Pickler.reducer_override`` decides), else None."""
    if f in _BY_NAME:
        return None
    return data.global_ref(f)


def reduced_state(data: ModuleData, obj: Any) -> dict[str, Any] | None:
    """The ``__dict__`` of ``obj`` if the checkpoint pickler writes ``obj`` by the class's own
    reduce (its class by reference, then that dict), as the C pickler does: where
    ``_Pickler.reducer_override`` returns NotImplemented for it and for its class (an instance
    not bound to a global of the frames' modules, whose ``__dict__`` is a dict held by it alone,
    of an importable class with no rule of its own). Else None. Where the class is bound to a
    global, it is written as that global: recorded in ``data.by_name``. Whether the instance or
    its class is module data (reached through it) is for the caller to ask (``data.paths()``)."""
    t = type(obj)
    if (
        t in _UNSHARED
        or t in _OWN_OVERRIDES
        or type(t) is not type
        or isinstance(obj, (BaseException, set))
        or _plan(t) != (False, None)
        or not t.__dictoffset__
        or may_drop_dict(t)
        or data.global_ref(obj) is not None
        or shared_dict(obj) is not None
    ):
        return None
    d = object.__getattribute__(obj, "__dict__")
    if type(d) is not dict:
        return None
    ref = data.global_ref(t)
    if ref is not None:
        if data.by_name is None:
            data.by_name = {}
        data.by_name[id(t)] = ref
    elif not cloudpickle.cloudpickle._should_pickle_by_reference(t):
        return None
    return d


class CheckpointUnpickler(pickle.Unpickler):
    """Reads what CheckpointPickler writes: module-level containers by name, sets in order."""

    def __init__(self, file: Any) -> None:
        super().__init__(file)
        self._file = file
        self._sets: list[set[Any]] = []
        self._tables: list[dict[Any, Any]] = []  # ("e" references) filled at the end
        self._table_items: list[list[tuple[Any, Any]]] = []
        self._mapping_items: list[tuple[Any, list[tuple[Any, Any]]]] = []
        self._broken: tuple[str, _Unresolved] | None = None  # the first path that did not resolve
        self._set_iters: list[tuple[LiveIter, int | None, list[Any]]] = []  # settled once loaded
        self._numbers: dict[int, Any] = {}
        self._addresses: dict[Any, int] = {}  # ("o", "O" references) per int written: the restored one
        self._orders: dict[tuple[int, str], Any] = {}  # ("Q" references) per container

    def persistent_load(self, pid: Any) -> Any:
        tag = pid[0]
        if len(pid) == 1:  # a shared float or int: its first occurrence, then references to it
            text = tag
            if text[0] == "N":
                return self._numbers[int(text[1:])]
            index, _, value = text[1:].partition(":")
            n = float.fromhex(value[1:]) if value[0] == "f" else int(value[1:], 16)
            self._numbers[int(index)] = n
            return n
        if tag == "o":  # the id (or hash) of an object: the restored object's, once per int
            address = self._addresses.get(pid[3])
            if address is None:
                o = pid[2]
                address = id(o) if pid[1] == "id" else _IDENTITY_HASH(o)
                self._addresses[pid[3]] = address
            return address
        if tag == "O":  # the same, of an object of module data: the number where the way broke
            address = self._addresses.get(pid)
            if address is None:
                try:
                    o = _resolve_ref(pid[2])
                    address = id(o) if pid[1] == "id" else _IDENTITY_HASH(o)
                except ValueError:
                    address = int(pid[3], 16)
                self._addresses[pid] = address
            return address
        if tag == "g":
            return workflow_global(pid[1], pid[2])
        if tag == "X":  # one of the process's objects (sys.path): the restoring process's
            return process_object(pid[1], pid[2])
        if tag == "P":  # a path, and the value to use where it leads nowhere in this process
            ref, mark = (pid[1:6], pid[6]) if len(pid) == 8 else (pid[1:-1], None)
            try:
                o = _resolve_ref(ref)
            except ValueError:
                return pid[-1]
            return _same_object(o, mark, pid[-1], ref)
        if tag == "Q":  # a path through a place in a list or a dict, checked in another process
            ref, (process, checks, *ident) = pid[1:-2], pid[-2]
            try:
                if process == PROCESS:
                    return _same_object(_resolve_ref(ref), (process, *ident), pid[-1], ref)
                return resolve_ordered(ref, checks, self._orders)
            except ValueError:
                return pid[-1]
        if tag == "R":  # the workflow's own function, put back where module data held it
            # (written with the process that wrote it since the places missing in another
            # process are filled: a process that did not run the registration)
            elsewhere = len(pid) == 8 and pid[6] != PROCESS
            rebind_ref(pid[1:6], pid[-1], elsewhere)
            return pid[-1]
        if tag == "RR":  # the same, held at several places of module data
            elsewhere = len(pid) == 4 and pid[3] != PROCESS
            for ref in pid[1]:
                rebind_ref(ref, pid[2], elsewhere)
            return pid[2]
        if tag == "p" or tag == "m":
            try:
                return _resolve_ref(pid)
            except ValueError as e:
                stand_in = _Unresolved(ref_text(pid))
                if self._broken is None:
                    what = "module-level data" if tag == "p" else f"module {pid[1]!r}"
                    self._broken = (
                        f"it held {kind_text(pid[4])} at {ref_text(pid)} of {what}, and in this "
                        f"process {e}",
                        stand_in,
                    )
                return stand_in
        if tag == "i":
            _tag, c, used, slot, rest = pid
            li = LiveIter(None, c, "set", used)
            self._set_iters.append((li, slot, rest))
            return li
        if tag == "D":  # an instance's __dict__ held apart from it
            return dict_of(pid[1], pid[2])
        if tag == "e":
            index = pid[1]
            while len(self._tables) <= index:
                self._tables.append({})
            return self._tables[index]
        if tag == "s":
            index = pid[1]
            while len(self._sets) <= index:
                self._sets.append(set())
            return self._sets[index]
        raise pickle.UnpicklingError(f"unknown reference {pid!r} in a checkpoint")

    def _took_items(self, chunk: Any) -> bool:
        """Whether ``chunk`` is a further pickle of deferred items (``CheckpointPickler.dump``),
        noted to be put in at the end."""
        if type(chunk) is not tuple or chunk[:1] != (_TABLE_ITEMS,):
            return False
        self._table_items.extend(chunk[1])
        self._mapping_items.extend(chunk[2])
        return True

    def load_all(self) -> Any:
        """Load the checkpoint; SetNotRestorable once all is loaded if a set's table could not
        be rebuilt."""
        obj = self.load()
        done = 0
        failed: tuple[str, set[Any]] | None = None
        found: Any = None
        f = self._file
        while True:
            while done < len(self._sets) or len(self._table_items) < len(self._tables):
                records = self.load()
                if self._took_items(records):
                    continue
                for s, (rec, order) in zip(self._sets[done:], records, strict=False):
                    why = _settable.rebuild(s, order, _settable.Table.from_record(rec))
                    if why is not None and failed is None:
                        failed = (why, s)
                done += len(records)
            at = f.tell()
            if f.seek(0, io.SEEK_END) == at:
                break
            f.seek(at)
            chunk = self.load()
            if self._took_items(chunk):
                continue  # (items of mappings only: no "e" reference says to expect them)
            if found is not None:
                raise pickle.UnpicklingError("a checkpoint with more data than it says")
            # The attributes an instance's own rule leaves out (``_relink``), then the elements
            # of the sets they hold.
            found = chunk
        for li, slot, rest in self._set_iters:
            _settle_set_iter(li, slot, rest)
        if found is not None:
            relink(found)
        for d, items in zip(self._tables, self._table_items, strict=True):
            d.update(items)  # every object is back: their own __hash__ reads what it needs
        for m, items in self._mapping_items:
            setitem = collections.OrderedDict.__setitem__ if isinstance(m, collections.OrderedDict) else dict.__setitem__
            for k, v in items:
                setitem(m, k, v)  # (the base's: as reduce_container's fill)
        if self._broken is not None:
            raise ModulePathBroken(self._broken[0], self._broken[1], obj)
        if failed is not None:
            raise SetNotRestorable(failed[0], failed[1], obj)
        return obj


def _same_object(o: Any, mark: Any, value: Any, ref: Ref) -> Any:
    """``o``, the object path ``ref`` leads to now, where the checkpoint was written in another
    process or ``o`` is the object it was written for (``mark``: the process and the object's
    id). In the process that wrote it, module data changed since (another workflow, or the
    module's code, put another object at that place, or moved the object elsewhere): the object
    where module data holds it now, else ``value``, what it held (module data let go of it)."""
    if mark is None or len(mark) < 2 or mark[0] != PROCESS:
        return o
    ident = mark[1] if type(mark[1]) is int else int(mark[1], 16)
    if id(o) == ident:
        return o
    moved = _found_again(ref, ident)
    return value if moved is None else moved


def _found_again(ref: Ref, ident: int) -> Any:
    """The object of id ``ident`` (of the type ``ref`` records) where the module data of the
    namespace ``ref`` starts from (a workflow's module, or another module) holds it now, or
    None."""
    try:
        tag, root = ref[0], ref[1]
        g = workflow_globals(root) if tag == "p" else vars(sys.modules[root])
        path = ModuleData({id(g): (root if tag == "p" else "", g)}).paths().get(ident)
        if path is None:
            return None
        if path[0] == "m":  # through another module the namespace imports
            o = _resolve_ref(path)
        else:
            o = g[path[2]]
            for st in path[3]:
                o = step_into(o, st)
    except Exception:  # the walk or the path failed: the value
        return None
    return o if id(o) == ident and kind_matches(o, ref[4]) else None


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
    """Pickle ``obj`` with the checkpoint's rules (``data``: the module data of this checkpoint,
    if the caller has made it: for the frames, ``ModuleData(spaces, frames)``)."""
    if not _STD_NAMES:
        _refresh_std_names()
    sizes = list(map(len, _CLOUD_TABLES))
    if sizes != _DISPATCH_SIZES:  # a reducer registered since the last checkpoint
        _refresh_dispatch(sizes)
    if data is None:
        data = ModuleData(spaces)
    if data.shared_numbers is not None:
        # Plain locals (numbers, strings, builtin containers of them, none of them module data)
        # but for the floats and ints held twice, all known: the C pickler, asked only to
        # write those once.
        buf = io.BytesIO()
        buf.write(_REFS)
        NumbersPickler(buf, data.shared_numbers).dump(aliased(obj, None, data.find_constants()))
        return buf.getvalue()
    buf = io.BytesIO()

    def first_pass() -> tuple[_FirstPass, bytes, dict[int, Any], list[Any]]:
        buf.seek(0)
        buf.truncate()
        p = _FirstPass(buf, spaces, data)
        p.dump(aliased(obj, data.find_aliases(), data.find_constants()))
        memo = p.memo.copy()
        return p, buf.getvalue(), memo, _items(memo, p)

    p, payload, memo, items = first_pass()
    if data.top_constants and data.held_elsewhere(items):
        # A local's constant held by a container or an object too: written as it is, so that
        # they still share it (``held_elsewhere`` left it out of the constants made again).
        p.clear_memo()
        p, payload, memo, items = first_pass()
    cyclic: set[int] = set()
    if p.objects:
        stale_keys(memo, data)
        cyclic = cyclic_tables(memo)
    data.addresses = address_ints(items, memo, data)
    # A set or frozenset written (its opcode, or a byte of other data that looks like it), an
    # object reached through module data, a module-level container or one reached through module
    # data among the objects written (the C pickler writes lists, dicts and sets without asking
    # reducer_override), a float or big int held twice but by locals only, or an int that is the
    # id (or identity hash) of an object written: again, with the rules for them.
    if (
        _EMPTY_SET in payload
        or _FROZENSET in payload
        or p.reached
        or not p.process.keys().isdisjoint(memo)  # sys.path written (a list: no reducer_override)
        or data.addresses
        or _shares_containers(data, memo)
        or _numbers_held_twice(data, items)
        or cyclic
    ):
        # The first pass's memo lets go of what it wrote: an instance's __dict__ it holds
        # would look held apart from its instance (shared_dict) to the next pass.
        p.clear_memo()
        memo.clear()
        return _checkpoint_pickle(obj, spaces, data, p.owned, cyclic)
    if p.custom:
        found = links(p.custom, memo)
        if found:
            if any(id(v) not in memo for *_, v in found):
                # An object only the instances' attributes hold, written with the links: with
                # the rules the first pass did not look for in it.
                p.clear_memo()
                memo.clear()
                return _checkpoint_pickle(obj, spaces, data, p.owned, cyclic)
            _Pickler.dump(p, found)  # a further pickle in the stream, as _checkpoint_pickle's
            return _REFS + buf.getvalue()
    return payload


_TABLES = (dict, set, frozenset)
_CONTAINER_TYPES = frozenset({dict, list, set, frozenset})
_TABLE_ITEMS = "dict items"  # the first item of a further pickle of deferred dicts' items


def stale_keys(memo: dict[int, Any], data: ModuleData) -> None:
    """StaleKeyRefused for the first dict, set or frozenset written by value (``memo``: a
    pass's) that a restore, which puts its keys in again, would not give back as it is: one
    whose key was changed (its hash, its equality) after it was put in."""
    tables = [o for _, o in memo.values() if isinstance(o, _TABLES) and len(o) > 0]
    # An OrderedDict, a Counter, a set subclass before the plain copy its reduce hands pickle.
    tables.sort(key=lambda o: type(o) in _TABLES)
    for o in tables:
        _refuse_stale(o, data)


def _refuse_stale(o: Any, data: ModuleData) -> None:
    if len(o) == 0:
        return
    # (first: that one compares no keys, which the other does, by the __eq__ it is about)
    problem = restore_eq_problem(o)
    refusal: type[ValueRefused] = ValueRefused
    if problem is None:
        problem = stale_key_problem(o)
        refusal = StaleKeyRefused
    if problem is None:
        return
    if data.global_ref(o) is not None or data.active and data.path(o) is not None:
        return  # module data: kept by reference, the module's own object
    raise refusal(problem, o)


def _checkpoint_pickle(
    obj: Any,
    spaces: Any,
    data: ModuleData,
    owned: dict[int, tuple[dict[str, Any], Any]],
    cyclic: set[int] | None = None,
) -> bytes:
    """``obj`` written by CheckpointPickler: once, or twice if it met floats or ints held more
    than once (other than by the locals the aliases make one again)."""
    obj = aliased(obj, data.find_aliases(), data.find_constants())
    buf = io.BytesIO()
    buf.write(_REFS)
    cp = CheckpointPickler(buf, spaces, data, owned=owned, cyclic=cyclic)
    cp.dump(obj)
    if cp.shared_numbers:
        cp.clear_memo()  # as the first pass's, for the instances' __dict__s
        buf = io.BytesIO()
        buf.write(_REFS)
        cp = CheckpointPickler(
            buf, spaces, data, shared=cp.shared_numbers, owned=cp.owned, cyclic=cyclic
        )
        cp.dump(obj)
    if cp.custom:
        # (a set written as a reference to its table is not in the memo)
        found = links(cp.custom, cp.memo.copy(), {id(x): x for x in cp._sets})
        if found:
            # A further pickle in the stream (memo shared): the restored instances and objects.
            cp.dump(found)
    return buf.getvalue()


def _shares_containers(data: ModuleData, memo: dict[int, Any]) -> bool:
    containers = data.containers()
    if not containers and not data.active:
        return False
    if containers and not containers.keys().isdisjoint(memo):
        return True
    return data.active and (not data.paths().keys().isdisjoint(memo) or data.truncated is not None)


def _numbers_held_twice(data: ModuleData, items: list[Any]) -> bool:
    """Whether a float or big int occurs more than once among what the first pass wrote (the C
    pickler writes each occurrence anew): ``items`` (``_items``), beyond the locals the aliases
    make one again. At C speed."""
    ids = number_ids(items)
    return len(set(ids)) < len(ids) - len(data.aliases or ())


def _items(memo: dict[int, Any], p: _FirstPass) -> list[Any]:
    """What the first pass wrote as items: those of the containers in its memo and what a
    reduce handed it outside any container (``p.loose``, ``p.loose_pairs``; the items of
    ``p.seqs``, the keys and values of ``p.maps``). At C speed.

    The items are read as pickle reads them: a dict's keys and values from the dict itself, not
    from ``gc.get_referents``, which on 3.13 sees none of the values of an instance's
    ``__dict__`` (the pickled state of an instance) where the instance keeps them inline."""
    objs = list(map(_SECOND, memo.values()))
    kinds = list(map(type, objs))
    dicts = list(itertools.compress(objs, map(_IS_DICT.__contains__, kinds)))
    dicts += p.maps  # the OrderedDicts, defaultdicts and dict subclasses: keys and values
    parts = [
        itertools.chain.from_iterable(
            itertools.compress(objs, map(_SEQUENCES.__contains__, kinds))
        ),
        itertools.chain.from_iterable(map(dict.keys, dicts)),
        itertools.chain.from_iterable(map(dict.values, dicts)),
        p.loose,
    ]
    if p.seqs:
        parts.append(itertools.chain.from_iterable(p.seqs))
    if p.loose_pairs:
        parts.append(itertools.chain.from_iterable(itertools.chain.from_iterable(p.loose_pairs)))
    return list(itertools.chain.from_iterable(parts))


def _ints_in(e: Any) -> list[int]:
    """The ints a set element's hash is made from: itself, or those in a tuple or frozenset."""
    t = type(e)
    if t is int:
        return [e]
    if t is tuple or t is frozenset:
        return [n for x in e for n in _ints_in(x)]
    return []


def address_refused(s: Any, e: Any, how: str, obj: Any) -> ElementHashRefused:
    """The refusal of set (or frozenset) ``s``: its element ``e`` is (or holds) the ``id()``
    (or identity hash) of ``obj``, which a restore gives back as a copy, at another address."""
    kind = type(s).__name__
    t = type(obj)
    name = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    return ElementHashRefused(
        f"a {kind} holding {e!r:.60}, the {how}() of a {name} that the checkpoint writes: the "
        f"restore gives that {name} back at another address, so the int comes back as its new "
        f"{how}, which hashes otherwise, and the {kind} cannot come back in its order; hold a "
        f"dict.fromkeys(...) of them instead (a dict keeps its order), or the objects themselves",
        s,
    )


# Ints below this are never taken for an address (CPython's objects live far above it).
_LOW_ADDRESS = 1 << 20
_IS_INT = frozenset({int})
_IDENTITY_HASH: Any = object.__hash__


def address_ints(
    items: list[Any], memo: dict[int, Any], data: ModuleData | None = None
) -> dict[int, tuple[Any, ...]] | None:
    """The ints among ``items`` that are the ``id()`` of an object the checkpoint writes (in
    ``memo``, a pass's: id -> (index, object)) or of a global of the frames' modules (``data``),
    or of an object reached through module data (``ROOMS[1]``, which a new process makes
    anew), or the ``hash()`` of one of those hashed by its identity: by their value, ("id" or
    "hash", the object). A restore gives the object back at another address: such an int (a
    ``seen`` dict of ids, an index keyed by ``id(obj)``) is written as the id (or hash) of the
    object, and comes back as the restored object's, so that it still says which object it was.
    None if there are none (most checkpoints: no int large enough to be an address). Looked up
    by address (module data's objects in its last walk), never by a walk of the objects."""
    ints = {
        n
        for n in itertools.compress(items, map(_IS_INT.__contains__, map(type, items)))
        if n >= _LOW_ADDRESS
    }
    if not ints:
        return None
    refs = data.globals() if data is not None else {}
    known: dict[int, Any] | None = None  # module data's objects by id, looked up if needed
    out: dict[int, tuple[Any, ...]] = {}
    for n in ints:
        for address, how in ((n, "id"), (unrotate(n), "hash")):
            held = memo.get(address)
            if held is not None:
                o = held[1]
            elif address in refs:
                _key, name, g = refs[address]
                o = g.get(name)
            else:
                if known is None:
                    known = data.known_paths() if data is not None else {}
                o = module_object_at(address, known)
                if o is None:
                    continue
                if how == "id" or type(o).__hash__ is _IDENTITY_HASH and hash(o) == n:
                    out[n] = (how, o, known[address])  # written as the way to it, not by value
                    break
                continue
            if id(o) != address:
                continue
            if how == "hash" and (type(o).__hash__ is not _IDENTITY_HASH or hash(o) != n):
                continue
            out[n] = (how, o)
            break
    return out or None


_POINTER_BITS = 8 * struct.calcsize("P")
_POINTER_MASK = (1 << _POINTER_BITS) - 1


def unrotate(h: int) -> int:
    """The address an identity hash ``h`` is made from (CPython rotates it by 4 bits)."""
    y = h & _POINTER_MASK
    return ((y << 4) | (y >> (_POINTER_BITS - 4))) & _POINTER_MASK


def module_object_at(address: int, known: dict[int, Any]) -> Any:
    """The object at ``address`` (its id) that module data reaches, or None. Looked up in
    ``known``, the last walk of module data (``ModuleData.known_paths``: one made since, for the
    objects of another step, knows those the module added later), then followed: the object
    found must be at that address."""
    ref = known.get(address)
    if ref is None or positional(ref[3]):  # (through a set's order: of this process only)
        return None
    try:
        o = _resolve_ref(ref)
    except Exception:  # the path found leads nowhere now: no object of module data
        return None
    return o if id(o) == address else None


def maybe_addresses(bigs: list[int], ids: Any, data: ModuleData) -> bool:
    """Whether one of ``bigs`` (ints >= _LOW_ADDRESS) is the id, or the identity hash, of an
    object whose id is in ``ids``, of a global of the frames' modules or of an object reached
    through module data."""
    refs = None
    known: dict[int, Any] = {}
    for n in bigs:
        for address in (n, unrotate(n)):
            if address in ids:
                return True
            if refs is None:
                refs = data.globals()
                known = data.known_paths()
            if address in refs:
                return True
            if address in known and module_object_at(address, known) is not None:
                return True
    return False


_SECOND = operator.itemgetter(1)
_SEQUENCES = frozenset({list, tuple, set, frozenset})
_IS_DICT = frozenset({dict})


# The first byte of a payload written with persistent ids (a plain pickle starts with PROTO).
_REFS = b"R"
REFS = _REFS  # (the mark of a payload the checkpoint's unpickler reads: ``loads``)
_EMPTY_SET = pickle.EMPTY_SET
_FROZENSET = pickle.FROZENSET


__all__ = [
    "CheckpointPickler",
    "CheckpointUnpickler",
    "FinalizerRefused",
    "GlobalsPickler",
    "LiveIter",
    "ModuleData",
    "ModulePathBroken",
    "ModuleTooLarge",
    "Namespace",
    "PathsPickler",
    "PositionRefused",
    "REFS",
    "ResourceRefused",
    "SetNotRestorable",
    "aliased",
    "dumps",
    "global_function_ref",
    "live_iter",
    "loads",
    "namespace",
    "never_shared",
    "number_ids",
    "plain_path",
    "reduced_state",
    "user_module",
]
