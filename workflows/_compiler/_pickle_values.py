"""Values in a checkpoint that cloudpickle would give back otherwise, or not at all.

* a live view (``d.keys()``, ``d.values()``, ``d.items()``, their OrderedDict kinds, a
  ``types.MappingProxyType``, a ``memoryview`` of a whole buffer) is written as a view of its
  container, which is pickled with the other locals (so shared): after a restore it follows the
  container again;
* an instance of a class with its own ``__getattr__`` or ``__getattribute__`` gets its state back
  through a setter that never looks an attribute up on the half-built object (pickle looks up
  ``__setstate__`` on it, and such a ``__getattr__`` often reads state that is not there yet);
  so does an instance with ``__slots__`` whose class has its own ``__setattr__`` (pickle sets
  slot values with ``setattr``: an immutable value object's ``__setattr__`` refuses them, and
  one made in the workflow may read its variables, not back yet): its recorded values are put
  back as they were, by ``object.__setattr__``, as those of its ``__dict__`` are;
* an object whose class's ``__new__`` does not take the arguments pickle would call it with (an
  ``int`` subclass whose ``__new__`` takes a currency too) is refused at the checkpoint;
* a set subclass is rebuilt with the hash table it had (``_settable``), so it iterates as before;
* a class made in the workflow whose metaclass, also made there, reads the workflow's variables
  while it makes the class is refused (cloudpickle rebuilds the class before those variables);
* an element of a set whose hash is made from the address of an object a checkpoint copies (an
  iterator, an instance of a class without ``__hash__``, a function made in the workflow, the
  object a method is bound to, such an object in a tuple) is refused (``_pickle_sets``): its copy
  hashes otherwise, so the set's table cannot be rebuilt.

Each refusal is a ``ValueRefused`` whose text says what to write instead; the checkpoint names the
variable that holds the value.
"""

from __future__ import annotations

import collections
import copyreg
import enum
import gc
import inspect
import sys
import types
import weakref
from collections import OrderedDict
from typing import Any

import cloudpickle  # type: ignore[import-untyped]  # ships no type information

from . import _memview, _settable
from ._instdict import rebuild_as_base
from ._pickle_modules import HEAPTYPE, slot_names, slot_values
from ._scope import FRAME, LOCAL, user_name


class ValueRefused(TypeError):
    """A value a restore could not give back; raised while checkpointing it. ``value`` is the
    object refused (the checkpoint names the variable that holds it, before those that only
    reach it)."""

    def __init__(self, message: str, value: Any = None) -> None:
        super().__init__(message)
        self.value = value


# --------------------------------------------------------------------------------------------
# Live views

_DictKeys: type = type({}.keys())
_DictValues: type = type({}.values())
_DictItems: type = type({}.items())
_ODictKeys: type = type(OrderedDict().keys())
_ODictValues: type = type(OrderedDict().values())
_ODictItems: type = type(OrderedDict().items())
_VIEW_KINDS: dict[type, str] = {
    _DictKeys: "keys",
    _DictValues: "values",
    _DictItems: "items",
    _ODictKeys: "odict keys",
    _ODictValues: "odict values",
    _ODictItems: "odict items",
}
_MAKE_VIEW = {
    "keys": dict.keys,
    "values": dict.values,
    "items": dict.items,
    "odict keys": OrderedDict.keys,
    "odict values": OrderedDict.values,
    "odict items": OrderedDict.items,
}


def _referent(o: Any, kind: type) -> Any:
    for r in gc.get_referents(o):
        if isinstance(r, kind):
            return r
    return None


def dict_view(c: Any, kind: str) -> Any:
    """The ``kind`` view of ``c`` (the restore of a view)."""
    return _MAKE_VIEW[kind](c)


def _reduce_view(v: Any) -> Any:
    c = _referent(v, dict)
    if c is None:
        raise ValueRefused(
            f"a {type(v).__name__} whose dict cannot be found; hold list(...) of it across the await",
            v,
        )
    return (dict_view, (c, _VIEW_KINDS[type(v)]))


def class_namespace(cls: type) -> Any:
    """``vars(cls)``: the restore of a mapping proxy of a class's namespace."""
    return vars(cls)


def _reduce_proxy(p: types.MappingProxyType[Any, Any]) -> Any:
    m = _referent(p, object)
    if type(m) is dict:
        for v in m.values():
            owner = getattr(v, "__objclass__", None)
            if isinstance(owner, type) and _referent(vars(owner), dict) is m:
                return (class_namespace, (owner,))
    if m is None:
        raise ValueRefused("a mappingproxy whose mapping cannot be found; hold dict(...) of it")
    return (types.MappingProxyType, (m,))


def released_view() -> memoryview:
    """A released memoryview (the restore of one)."""
    mv = memoryview(b"")
    mv.release()
    return mv


def memory_view(obj: Any, fmt: str, shape: tuple[int, ...], readonly: bool) -> memoryview:
    """A view of all of ``obj`` in ``fmt`` and ``shape`` (the restore of a memoryview)."""
    mv: Any = memoryview(obj)
    if mv.format != fmt or mv.shape != shape:
        mv = mv.cast("B").cast(fmt, shape) if fmt != "B" or len(shape) != 1 else mv.cast("B")
    view: memoryview = mv.toreadonly() if readonly and not mv.readonly else mv
    return view


def _reduce_memoryview(mv: memoryview) -> Any:
    try:
        obj = mv.obj
    except ValueError:  # released
        return (released_view, ())
    whole = memoryview(obj)
    shape = tuple(mv.shape or ())
    if mv.nbytes == whole.nbytes and mv.c_contiguous and whole.c_contiguous:
        return (memory_view, (obj, mv.format, shape, mv.readonly))
    # Part of it (a slice, a cast of one): made again from where it starts in obj's buffer.
    why = "its offset into it cannot be read on this interpreter"
    if _memview.SUPPORTED and whole.c_contiguous:
        args = (obj, _memview.offset(mv), mv.format, shape, tuple(mv.strides or ()), mv.readonly)
        try:
            _memview.make(*args)
        except (ValueError, TypeError, NotImplementedError) as e:
            why = f"it cannot be made again as a slice of a cast of it ({e})"
        else:
            return (_memview.make, args)
    raise ValueRefused(
        f"a memoryview of part of a {type(obj).__name__} ({mv.nbytes} of its {whole.nbytes} "
        f"bytes, or not contiguous): {why}; hold the {type(obj).__name__} and the slice bounds "
        "across the await, and take the view after it",
        mv,
    )


# --------------------------------------------------------------------------------------------
# Objects: state set without attribute lookups, __new__ arguments checked


def set_state(obj: Any, state: Any) -> None:
    """pickle's default ``BUILD`` (a ``__dict__`` state, or ``(__dict__, slots)``), done without
    looking ``__setstate__`` up on ``obj``, which may not have the state its ``__getattr__``
    reads yet, and with the slot values put back by ``object.__setattr__``, not through the
    class's own ``__setattr__`` (which may refuse them: an immutable value object)."""
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        d = object.__getattribute__(obj, "__dict__")
        for k, v in state.items():
            d[sys.intern(k) if type(k) is str else k] = v
    if slots:
        for k, v in slots.items():
            object.__setattr__(obj, k, v)


_PLAN: dict[type, tuple[bool, Any]] = {}  # per class: (state set by set_state, its Python __new__)
_OWN_HOOKS = ("__getattr__", "__getattribute__")


def _plan(t: type) -> tuple[bool, Any]:
    plan = _PLAN.get(t)
    if plan is None:
        safe = False
        new = None
        slotted: bool | None = None
        for k in t.__mro__:
            if not k.__flags__ & HEAPTYPE:
                break  # a builtin class: its own reduce rebuilds it
            d = k.__dict__
            if any(h in d for h in _OWN_HOOKS) and not safe:
                safe = True
            if "__setattr__" in d and not safe:
                # pickle would set the slot values through it (set_state does not)
                if slotted is None:
                    slotted = bool(slot_names(t))
                safe = slotted
            if "__new__" in d and new is None:
                m = d["__new__"]
                new = m.__func__ if isinstance(m, staticmethod) else m
                if not isinstance(new, types.FunctionType):
                    new = False  # a builtin's: takes what its own reduce gives
        if _has_own(t, "__setstate__") or _has_own(t, "__reduce_ex__") or _has_own(t, "__reduce__"):
            safe = False
        plan = (safe, new or None)
        if len(_PLAN) > 4096:
            _PLAN.clear()
        _PLAN[t] = plan
    return plan


def _has_own(t: type, name: str) -> bool:
    for k in t.__mro__:
        if k is object:
            return False
        if name in k.__dict__:
            return k.__module__ not in ("builtins", "copyreg")
    return False


def needs_own_reduce(t: type) -> bool:
    """Whether instances of ``t`` go through ``reduce_object`` (cached per class)."""
    safe, new = _plan(t)
    return safe or new is not None


def reduce_object(obj: Any, proto: int) -> Any:
    """The object's own reduce, with its state set by ``set_state`` where the class has its own
    ``__getattr__``; ValueRefused where its class's ``__new__`` would refuse the arguments."""
    t = type(obj)
    safe, new = _plan(t)
    rv = obj.__reduce_ex__(proto)
    if not isinstance(rv, tuple) or len(rv) < 2:
        return rv
    func, args = rv[0], rv[1]
    if new is not None and isinstance(args, tuple) and args and args[0] is t:
        base = value_base(t)
        if base is not None and (func is _NEWOBJ or func is _NEWOBJ_EX and len(args) == 3 and not args[2]):
            # The arguments are the value as the builtin base holds it (its __getnewargs__:
            # ``(tuple(self),)``, ``(int(self),)``), not what the class's own __new__ takes
            # (``Vec(x, y)``, ``Money(gold, silver)``): made as the base makes it, from them.
            func, args = rebuild_as_base, (t, base, tuple(args[1:] if func is _NEWOBJ else args[1]))
            rv = (func, args, *rv[2:])
        elif func is _NEWOBJ:
            _check_new(t, new, args[1:], {}, obj)
        elif func is _NEWOBJ_EX and len(args) == 3:
            _check_new(t, new, args[1], args[2], obj)
    state = rv[2] if len(rv) > 2 else None
    if safe and state is not None and len(rv) < 6:
        rest = tuple(rv[3:5]) + (None,) * (5 - len(rv[:5]))
        return (func, args, state, rest[0], rest[1], set_state)
    return rv


_VALUE_BASE: dict[type, type | None] = {}


def value_base(t: type) -> type | None:
    """The builtin class ``t`` derives from whose ``__getnewargs__`` writes its instances
    (``int``, ``float``, ``complex``, ``str``, ``bytes``, ``tuple``: the value it holds), where
    ``t`` does not say itself what its ``__new__`` takes (no ``__getnewargs__`` or
    ``__getnewargs_ex__`` of its own); else None. Cached per class."""
    if t in _VALUE_BASE:
        return _VALUE_BASE[t]
    base = next((k for k in t.__mro__ if not k.__flags__ & HEAPTYPE), object)
    found = (
        base
        if base is not object
        and "__getnewargs__" in base.__dict__
        and not _has_own(t, "__getnewargs__")
        and not _has_own(t, "__getnewargs_ex__")
        else None
    )
    if len(_VALUE_BASE) > 4096:
        _VALUE_BASE.clear()
    _VALUE_BASE[t] = found
    return found


_NEWOBJ = getattr(copyreg, "__newobj__")  # noqa: B009 - typeshed does not list them
_NEWOBJ_EX = getattr(copyreg, "__newobj_ex__")  # noqa: B009


def _check_new(t: type, new: Any, args: Any, kwargs: Any, obj: Any) -> None:
    try:
        inspect.signature(new).bind(t, *args, **kwargs)
    except TypeError as err:
        raise ValueRefused(
            f"a {t.__qualname__} cannot be rebuilt at restore: pickle calls "
            f"{t.__qualname__}.__new__ with {tuple(args)!r}, which it refuses ({err}); give the "
            "class a __getnewargs__ that returns the arguments its __new__ takes (or a "
            "__reduce__)",
            obj,
        ) from None
    except ValueError:  # no signature to check
        pass


# --------------------------------------------------------------------------------------------
# Finalizers and weak references


# per class: has a __del__; None: the engine's own; "library": the standard library's
_HAS_DEL: dict[type, bool | str | None] = {}
# The engine's own packages: their classes' __del__ knows checkpoints (a call not awaited warns
# only if no checkpoint holds it).
_ENGINE = frozenset({"workflows", "actors", "persistence"})
_NOT_CHECKED = _ENGINE | frozenset(sys.stdlib_module_names) | {"builtins"}


def finalizer_problem(obj: Any, t: type, module_data: bool = False) -> str | None:
    """Why ``obj`` (an instance of a class made by a class statement) cannot be checkpointed:
    its class has a ``__del__``, or a weak reference points to it (a ``weakref.finalize``, a
    ``WeakValueDictionary``'s or ``WeakSet``'s entry). A restore makes a new object: the weak
    reference does not follow it, and a finalizer runs for the copy the restore discards (when
    a passivated workflow is loaded again, say) or, after a crash, never. An instance of a
    standard library class only where a ``weakref.finalize`` is registered on it (and not where
    it is ``module_data``, kept by its path), or where it is a live ``weakref.finalize``."""
    has_del = _HAS_DEL.get(t, _UNKNOWN)
    if has_del is _UNKNOWN:
        top = t.__module__.partition(".")[0]
        if top in _ENGINE:
            has_del = None  # the engine's own (an Event, a call not awaited yet): kept
        elif top in _NOT_CHECKED:
            # The standard library's (its files and threads are refused as resources; its
            # caches hold weak references to TypeVars, and 3.12's io classes have a __del__):
            # only a weakref.finalize registered on it is looked for.
            has_del = "library"
        else:
            has_del = any("__del__" in k.__dict__ for k in t.__mro__ if k.__flags__ & HEAPTYPE)
        if len(_HAS_DEL) > 4096:
            _HAS_DEL.clear()
        _HAS_DEL[t] = has_del
    if has_del is None:
        return None
    if has_del == "library":
        return None if module_data else library_finalizer_problem(obj, t)
    if has_del:
        return (
            f"{t.__qualname__} has a __del__, which would run for each copy a restore discards "
            "(a passivated workflow loaded again, say) and, after a crash, not at all; release "
            "what it holds by an explicit call (in a finally), not in __del__"
        )
    if weakref.getweakrefcount(obj):
        return (
            f"a weak reference points to this {t.__qualname__} (a weakref.finalize, or an entry "
            "of a WeakValueDictionary or WeakSet): a restore gives back another object, which the "
            "weak reference does not follow, and a finalizer would run for the copy the restore "
            "discards; call the cleanup explicitly, and hold no weak reference to the object "
            "across the await"
        )
    return None


_UNKNOWN: Any = object()


def _finalized(obj: Any) -> bool:
    """Whether a live ``weakref.finalize`` is registered on ``obj``."""
    try:
        if not weakref.getweakrefcount(obj):
            return False
    except TypeError:
        return False
    registry = getattr(weakref.finalize, "_registry", None)
    if not isinstance(registry, dict):
        return False
    for fin in list(registry):
        info = fin.peek()
        if info is not None and info[0] is obj:
            return True
    return False


class FinalizerRefused(ValueRefused):
    """An object a finalizer watches (or a live finalizer), which a restore would copy."""


def library_finalizer_problem(obj: Any, t: type) -> str | None:
    """Why ``obj``, an instance of a standard library class, or a function made in the
    workflow, cannot be checkpointed: a ``weakref.finalize`` is registered on it (a
    ``tempfile.TemporaryDirectory`` deletes its directory so), or it is a live
    ``weakref.finalize`` itself. A restore makes a new object: the finalizer of the copy it
    discards runs (the directory is deleted while the workflow still uses it), and a copied
    ``weakref.finalize`` is dead."""
    if t is weakref.finalize:
        if not obj.alive:
            return None
        return (
            "a live weakref.finalize is registered in this process only: a restore gives back a "
            "dead copy (its callback never runs), while the original runs its callback when the "
            "object it watches is discarded; call the cleanup explicitly (in a finally) instead"
        )
    if not _finalized(obj):
        return None
    name = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    return (
        f"a weakref.finalize is registered on this {name}: a restore gives back another "
        "object, and the finalizer runs for the one it discards (a passivated workflow loaded "
        "again) while the workflow still uses what it cleans up (a TemporaryDirectory's "
        "directory), or, after a crash, never; keep the awaits out of its 'with' block, or "
        "clean up by an explicit call in a finally"
    )


# --------------------------------------------------------------------------------------------
# Subclasses of list, dict, deque, OrderedDict, defaultdict and Counter with mutators of their own


# (base, the methods pickle's rebuild would call on the subclass: a reduce that calls the class,
# or fills it with append/extend or item assignment; and those it reads the items through,
# ``__iter__`` or ``items``, which would give it others to write). Most derived first.
_CONTAINER_BASES: tuple[tuple[type, tuple[str, ...]], ...] = (
    (collections.OrderedDict, ("__setitem__", "items")),
    (collections.defaultdict, ("__setitem__", "__init__", "items")),
    (collections.Counter, ("__setitem__", "__init__", "update", "items")),
    (collections.deque, ("append", "extend", "__init__", "__iter__")),
    (dict, ("__setitem__", "items")),
    (list, ("append", "extend", "__iter__")),
)
_OWN_PICKLING = ("__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__getnewargs__",
                 "__getnewargs_ex__")
_CONTAINER_PLAN: dict[type, type | None] = {}


def container_base(t: type) -> type | None:
    """The builtin container ``t`` derives from, where ``t`` (or a class between them) has its
    own version of a method pickle's rebuild calls (``__setitem__``, ``append``, ``extend``, or
    ``__init__`` where the base's reduce calls the class): a restore must not run it (it may
    read attributes not set yet, or change the items), so the items are put back by the base's
    own methods (``reduce_container``). None otherwise, or where the class pickles itself."""
    try:
        return _CONTAINER_PLAN[t]
    except KeyError:
        pass
    found: type | None = None
    for base, methods in _CONTAINER_BASES:
        if t is not base and issubclass(t, base):
            own = [k for k in t.__mro__[: t.__mro__.index(base)] if k.__flags__ & HEAPTYPE]
            if any(m in k.__dict__ for k in own for m in methods) and not any(
                m in k.__dict__ for k in own for m in _OWN_PICKLING
            ):
                found = base
            break
    if len(_CONTAINER_PLAN) > 4096:
        _CONTAINER_PLAN.clear()
    _CONTAINER_PLAN[t] = found
    return found


def new_container(cls: type, base: type) -> Any:
    """An empty instance of ``cls``, made by its builtin ``base``'s ``__new__`` (not ``cls()``)."""
    return base.__new__(cls)  # type: ignore[call-overload]


def fill_container(obj: Any, state: tuple[Any, ...]) -> None:
    """Give ``obj`` (from ``new_container``) its items by its base's own methods, then its
    attributes (its ``__dict__`` object itself, so ``vars(obj)`` held apart stays shared)."""
    base, extra, items, attrs = state
    if base is collections.deque:
        collections.deque.__init__(obj, (), extra)
        collections.deque.extend(obj, items)
    elif base is list:
        list.extend(obj, items)
    else:
        if base is collections.defaultdict:
            obj.default_factory = extra
        setitem = collections.OrderedDict.__setitem__ if base is collections.OrderedDict else dict.__setitem__
        for k, v in items:
            setitem(obj, k, v)
    d, slots = attrs if isinstance(attrs, tuple) else (attrs, None)
    if d is not None:
        try:
            object.__setattr__(obj, "__dict__", d)
        except (AttributeError, TypeError):
            set_state(obj, d)
    if slots:
        for k, v in slots.items():
            object.__setattr__(obj, k, v)


def reduce_container(obj: Any, base: type) -> Any:
    """``obj``, an instance of a subclass of ``base`` with mutators of its own: made empty and
    filled by ``base``'s methods, its attributes after (as pickle does, items first)."""
    if base is collections.deque:
        extra: Any = obj.maxlen
        items: Any = list(collections.deque.__iter__(obj))
    elif base is list:
        extra, items = None, list(list.__iter__(obj))
    else:
        extra = obj.default_factory if base is collections.defaultdict else None
        items = list(dict.items(obj)) if base is not collections.OrderedDict else list(
            collections.OrderedDict.items(obj)
        )
    d = getattr(obj, "__dict__", None)
    slots = slot_values(obj)
    attrs = (d, slots) if slots else d
    return (new_container, (type(obj), base), (base, extra, items, attrs), None, None, fill_container)


# --------------------------------------------------------------------------------------------
# Set subclasses and set elements


def new_set_like(cls: type) -> Any:
    """An empty instance of set subclass ``cls``, made without calling its ``__init__``."""
    return set.__new__(cls)


def fill_set_like(s: Any, state: Any) -> None:
    """Give the set subclass instance ``s`` its elements in the table it had, and its attributes."""
    elements, record, attrs = state
    if record is None:
        set.update(s, elements)
    else:
        why = _settable.rebuild(s, elements, _settable.Table.from_record(record))
        if why is not None:
            raise ValueError(f"a {type(s).__qualname__} whose table could not be rebuilt: {why}")
    if attrs:
        set_state(s, attrs)


def reduce_set_like(s: Any, record: Any) -> Any:
    """A set subclass instance: its class, elements in slot order, table and attributes."""
    d = getattr(s, "__dict__", None)
    return (
        new_set_like,
        (type(s),),
        (list(s), record, dict(d) if d else None),
        None,
        None,
        fill_set_like,
    )


# --------------------------------------------------------------------------------------------
# Classes made in a workflow


_BY_REFERENCE = cloudpickle.cloudpickle._should_pickle_by_reference


def _workflow_names(f: types.FunctionType) -> list[str]:
    """The variables of its enclosing functions that ``f`` reads (``__class__``, super()'s, is
    the class itself: not one), by the names the user wrote."""
    names = [n for n in f.__code__.co_freevars if n != "__class__"]
    if FRAME in names:  # the workflow's own variables: attributes of its frame
        names.remove(FRAME)
        names += [user_name(n) for n in _co_names(f.__code__) if n.startswith(LOCAL)]
    return list(dict.fromkeys(names))


def _restore_hook_problem(cls: type) -> str | None:
    """Why a restore could not rebuild the instances of ``cls``, made at run time: a method the
    unpickler calls to rebuild them (``__new__``, ``__setstate__``; ``__hash__`` for a dict key
    or a set element; the ``__init__`` of an exception with a ``__reduce__`` of its own, which
    may call its class: the others are made bare, their ``__init__`` not run) reads variables of
    the workflow, which come back only after the objects that hold them."""
    if issubclass(cls, type):
        return None  # a metaclass: its instances are classes (``metaclass_problem``)
    hooks = ["__new__", "__setstate__", "__hash__"]
    if issubclass(cls, BaseException) and any(
        "__reduce__" in k.__dict__ or "__reduce_ex__" in k.__dict__
        for k in cls.__mro__ if k.__flags__ & HEAPTYPE
    ):
        hooks.append("__init__")
    for k in cls.__mro__:
        if k is object or _BY_REFERENCE(k):
            continue
        for name in hooks:
            f = k.__dict__.get(name)
            f = getattr(f, "__func__", f)
            if not isinstance(f, types.FunctionType) or not f.__closure__:
                continue
            names = _workflow_names(f)
            if names:
                return (
                    f"class {cls.__qualname__}, made in the workflow, has a {name} that reads "
                    f"variables of the workflow ({', '.join(names)}); a restore calls it to "
                    "rebuild its instances before those variables are back. Define the class at "
                    "module level, or keep what it needs on the instance (self.salt) or the class"
                )
    return None


def eq_reading_workflow(cls: type) -> tuple[type, list[str]] | None:
    """(the class, the variables) where the ``__eq__`` of ``cls`` is a function made at run time
    that reads variables of the workflow (``isinstance(o, Reading)`` reads ``Reading``): a
    restore calls it where it puts back two keys of a dict (elements of a set) that hash alike,
    before those variables are back. None otherwise."""
    for k in cls.__mro__:
        if k is object or not k.__flags__ & HEAPTYPE or _BY_REFERENCE(k):
            continue
        f = k.__dict__.get("__eq__")
        if f is None:
            continue
        f = getattr(f, "__func__", f)
        if not isinstance(f, types.FunctionType) or not f.__closure__:
            return None  # the first __eq__ found is the one called
        names = _workflow_names(f)
        return (k, names) if names else None
    return None


def _enum_problem(cls: type) -> str | None:
    """Why a restore could not rebuild the enum ``cls`` made at run time as it is: its aliases
    (and a flag's named combinations) are not rebuilt, nor the attributes its ``__init__`` sets
    on members (in another process)."""
    if not isinstance(cls, enum.EnumMeta):
        return None
    aliases = [n for n in cls.__members__ if n not in cls._member_names_]
    if aliases:
        return (
            f"enum {cls.__qualname__}, made in the workflow, has aliases ({', '.join(aliases)}), "
            "which a restore cannot rebuild; define the enum at module level"
        )
    if "__init__" in cls.__dict__:
        return (
            f"enum {cls.__qualname__}, made in the workflow, sets its members up in __init__, "
            "which a restore in another process does not run again; define the enum at module "
            "level"
        )
    return None


def _init_subclass_problem(cls: type) -> str | None:
    """Why a restore could not rebuild ``cls``: a base made at run time too has an
    ``__init_subclass__`` that reads variables of its enclosing function (the workflow's, or a
    function's it called). Making the class anew (in another process) runs that hook, while the
    workflow's frame is still empty (its variables come back after the classes it holds) and a
    second time for what it did to them, which the checkpoint already holds. ``__class__``
    (``super()``) is the base itself, made before: not such a variable."""
    for k in cls.__mro__[1:]:
        if k is object or _BY_REFERENCE(k):
            continue  # a module's class: its hook runs as at an import
        f = k.__dict__.get("__init_subclass__")
        f = getattr(f, "__func__", f)
        if not isinstance(f, types.FunctionType) or not f.__closure__:
            continue
        names = [n for n in f.__code__.co_freevars if n != "__class__"]
        if names:
            if FRAME in names:  # the workflow's own variables: attributes of its frame
                names.remove(FRAME)
                names += [user_name(n) for n in _co_names(f.__code__) if n.startswith(LOCAL)]
            shown = ", ".join(dict.fromkeys(names))
            return (
                f"class {cls.__qualname__} cannot be rebuilt at restore: it is a subclass of "
                f"{k.__qualname__}, made in the workflow too, whose __init_subclass__ reads "
                f"variables of the workflow ({shown}); a restore in another process makes the "
                "class anew, which runs that hook before those variables are back (and runs it "
                f"again on what it did to them). Define {k.__name__} at module level, or keep "
                "what __init_subclass__ needs on the class (cls.registry) instead of in a "
                "variable of the workflow"
            )
    return None


def _co_names(code: types.CodeType) -> list[str]:
    out = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _co_names(c)
    return out


def metaclass_problem(cls: type) -> str | None:
    """Why a restore could not rebuild the class ``cls`` made at run time: its metaclass, made
    at run time too, runs code that reads variables of its enclosing function (cloudpickle makes
    the metaclass's functions with empty cells and fills them after the class is made)."""
    problem = _init_subclass_problem(cls) or _restore_hook_problem(cls) or _enum_problem(cls)
    if problem is not None:
        return problem
    meta: Any = type(cls)
    if meta.__module__ == "_ctypes":
        return (
            f"{cls.__qualname__} is a ctypes type made at run time ({meta.__name__}: an array, "
            "pointer, structure or union type), which cannot be rebuilt at restore; define it at "
            "module level (IntArray3 = ctypes.c_int * 3), or hold its values in a list"
        )
    if meta is type or "<locals>" not in meta.__qualname__:
        return None
    for k in meta.__mro__:
        if k is type:
            break
        for name in ("__new__", "__init__", "__prepare__"):
            f = k.__dict__.get(name)
            f = getattr(f, "__func__", f)
            if isinstance(f, types.FunctionType) and f.__closure__:
                return (
                    f"class {cls.__qualname__} is made with metaclass {meta.__qualname__}, made "
                    f"in the workflow too, whose {name} reads variables of the workflow "
                    f"({', '.join(f.__code__.co_freevars)}: its closure, super() included); a "
                    "restore makes the class before those variables are back. Define the "
                    "metaclass at module level and pass what it needs as class keywords "
                    "(class K(metaclass=M, tag=...))"
                )
    return None
