"""Module data in a checkpoint: the objects a workflow's state shares with importable modules,
written as references (a global's name, or a path from one) and looked up again at the restore.
"""

from __future__ import annotations

import bisect
import collections
import functools
import hashlib
import importlib
import itertools
import operator
import os
import site
import struct
import sys
import sysconfig
import types
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from .._registry import resolve
from ._consts import const_key as _const_key

_NONE: Any = object()  # a missing value


class Caches:
    """The results of cached functions are module data too: ``_pickle_caches``, which builds on
    this module, sets itself as ``module`` as it is imported (the pickler imports it, so it is
    set before any walk, path or restore of module data asks it)."""

    module: Any = None


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
_MUTABLE_CONTAINERS = frozenset({list, dict, set, bytearray})


# --------------------------------------------------------------------------------------------
# The module's constants
#
# Natively a local holding one of the module's immutable constants (a literal of the workflow,
# the module's equal constant, ``state = IDLE`` with ``IDLE = "idle"``) is that object:
# ``state is IDLE`` holds. Written by value, it came back an equal copy. Such a local is written
# by value with a reference, "<workflow key>\0<global name or nothing>" (``find_constants``):
# the restore makes it the module's constant equal to the value (the global, else the literal of
# the workflow's code), or leaves the value where the module has none (its code changed). A
# constant held in a container or an object comes back an equal copy, as before: looking for
# those would take every checkpoint off the C pickler's path.

_CONSTANT_TYPES = frozenset({str, bytes, int, float, complex, tuple})


def _kept_constant(c: Any) -> bool:
    """Whether the identity of constant ``c`` needs keeping: not a small int, nor an empty or
    one-character string, bytes or tuple (CPython keeps one object per value of those)."""
    t = type(c)
    if t is int:
        return not -5 <= c <= 256
    if t is float or t is complex:
        return True
    return len(c) > (0 if t is tuple else 1)


def module_constants(code: Any) -> dict[int, tuple[str, Any]]:
    """id -> (reference, the object) of the constants a local of workflow code ``code`` may hold
    that a restore gives back as the module's: the literals of its code and the globals of its
    module bound to immutable values (computed again where globals were added or removed)."""
    known = code.constants
    g = code.globals
    if known is not None and known[0] == len(g):
        return known[1]  # type: ignore[no-any-return]
    out: dict[int, tuple[str, Any]] = {}
    key = code.key
    literal = f"{key}\0"

    def collect(co: types.CodeType) -> None:
        for c in co.co_consts:
            if type(c) is types.CodeType:
                collect(c)
            elif type(c) in _CONSTANT_TYPES and _kept_constant(c):
                out.setdefault(id(c), (literal, c))

    if code.native is not None:
        collect(code.native)
    for name, v in list(g.items()):
        t = type(v)
        if t in _CONSTANT_TYPES and not name.startswith("__") and _kept_constant(v):
            if t is not float and _const_key(v) is None:
                continue  # a tuple holding more than constants
            out[id(v)] = (f"{key}\0{name}", v)
    code.constants = (len(g), out)  # with the size of the namespace it was made from
    return out


def frame_constants(f: Any) -> dict[int, tuple[str, Any]]:
    """``module_constants`` of the code frame ``f`` runs."""
    code = getattr(f, "_af_code", None)
    if code is None:
        return _NO_CONSTANTS
    known = code.constants
    if known is not None and known[0] == len(code.globals):
        return known[1]  # type: ignore[no-any-return]
    return module_constants(code)


_NO_CONSTANTS: dict[int, tuple[str, Any]] = {}


def _same_constant(a: Any, b: Any) -> bool:
    ka = _const_key(a)
    if ka is not None:
        return bool(ka == _const_key(b))
    return type(a) is float and type(b) is float and a != a and b != b  # two NaNs


def module_constant(ref: str, value: Any) -> Any:
    """The module's constant that ``ref`` (a local's, ``find_constants``) names, if one equal to
    ``value`` is there in this process (the global, else a literal of the workflow), else
    ``value``."""
    key, _, name = ref.partition("\0")
    try:
        fn = resolve("workflow", key)
    except Exception:
        return value
    code = getattr(fn, "_code", None)
    if code is None:
        return value
    if name:
        v = code.globals.get(name, _NONE)
        if v is not _NONE and _same_constant(v, value):
            return v
    consts = module_constants(code)
    pool = _POOLS.get(key)
    if pool is None or pool[0] is not consts:
        by_key: dict[Any, Any] = {}
        for _ref, c in consts.values():
            k = _const_key(c)
            if k is not None:
                by_key.setdefault(k, c)
        if len(_POOLS) >= 1024:
            _POOLS.clear()
        pool = _POOLS[key] = (consts, by_key)
    k = _const_key(value)
    return value if k is None else pool[1].get(k, value)


# Per workflow key: its constants (``module_constants``) by what CPython merges them by.
_POOLS: dict[str, tuple[dict[int, tuple[str, Any]], dict[Any, Any]]] = {}


# --------------------------------------------------------------------------------------------
# Module data: objects a local shares with a module, kept by name or by path
#
# ``marker = _MISSING``, ``items = CONFIG["items"]``, ``items = config.ITEMS``: natively the local
# and the module share the object. A checkpoint writes such an object as a reference, and the
# restore looks it up in the restoring process, so that the local is the module's object again:
#
# * ("g", workflow key, name): a global of a namespace the frames' code runs in;
# * ("p", workflow key, name, steps, type): an object reached from such a global through any
#   container (dict values and keys whatever their type, list, tuple, deque and set items, dict
#   subclasses, SimpleNamespace), the attributes and ``__slots__`` of instances of the
#   application's classes, the attributes of its classes, and the defaults, ``__kwdefaults__``,
#   attributes and closure cells of its functions, transitively;
# * ("m", module, name, steps, type): a global of another user module those namespaces reach (a
#   module bound in them, the module of a function or class bound in them, and so on from that
#   module's namespace), or an object reached from one the same way. Modules of the standard
#   library, of site-packages and of this project are not user modules: their module-level data
#   is not looked into, nor are the modules only they reach;
# * a path's step ("L", call): the result the cache of a cached function (``functools.lru_cache``)
#   met on the way holds for that call, and what that result holds (``_pickle_caches``).
#
# The globals are indexed once per namespace (``Namespace``, rebuilt when the namespace no longer
# holds exactly the values it was indexed with: one identity comparison of its values at each
# checkpoint that needs it); the paths are walked at most once per checkpoint, and only when the
# state holds an object the walk could find.

# Keys a path may hold (written into the checkpoint and compared again at the restore).
_KEY_TYPES = frozenset({str, int, bytes, bool, float, type(None)})
# An int of at least this, a multiple of the second (as CPython aligns every object), may be an
# object's address: a dict key that is one (``{id(room): room}``), or the identity hash of its
# value, is of this process only, and the walk finds its value by its place in the dict, as for
# a key that is an object.
_LOW_ADDRESS = 1 << 20
_ALIGNMENT = 2 * struct.calcsize("P")


def _address(k: int, v: Any) -> bool:
    """Whether dict key ``k`` may be an address: an id (a multiple of ``_ALIGNMENT``), or the
    identity hash of its value (``{hash(room): room}``)."""
    return not k % _ALIGNMENT or type(v).__hash__ is _OBJECT_HASH and hash(v) == k


_OBJECT_HASH: Any = object.__hash__
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


# Objects of the process, not of a workflow nor of a module's data: the environment, the import
# path, the command line, the warnings filters, the generator behind ``random.random``.
# A local holding one (``env = os.environ``, ``pick = random.choice``, ``path = sys.path``) is
# the restoring process's object again, as natively it is the process's: a copy would take
# changes no one else sees (an environment variable set on it that ``os.environ`` lacks) and
# repeat the draws of the shared generator.
# (Those holding modules or import machinery, ``sys.modules``, ``sys.meta_path``, do not pickle:
# a checkpoint's first pass writes lists and dicts by value at C speed, and refuses them.)
_PROCESS_OBJECTS = (
    ("os", "environ"), ("os", "environb"), ("sys", "path"), ("sys", "argv"),
    ("warnings", "filters"), ("random", "_inst"),
)


def process_objects() -> dict[int, tuple[str, str]]:
    """id -> (module, name) of each of the process's objects (``_PROCESS_OBJECTS``) there now."""
    out: dict[int, tuple[str, str]] = {}
    for module, name in _PROCESS_OBJECTS:
        m = sys.modules.get(module)
        o = getattr(m, name, None) if m is not None else None
        if o is not None:
            out[id(o)] = (module, name)
    return out


def process_object(module: str, name: str) -> Any:
    """The restoring process's ``module.name`` (one of ``_PROCESS_OBJECTS``)."""
    return getattr(importlib.import_module(module), name)


def kind_of(obj: Any) -> str:
    """What a path reference records of the object it leads to, and a restore checks: its
    type's name; for a class or a function, which one too (``builtins.type game.Circle``): in
    another process the place may hold another class (a class the workflow made and put as a
    key of a module dict, where the new process's import put one of its own), which must not
    stand in for it."""
    t = type(obj)
    if t is types.FunctionType or isinstance(obj, type):
        return f"{_type_name(t)} {getattr(obj, '__module__', None)}.{obj.__qualname__}"
    return _type_name(t)


def kind_matches(obj: Any, kind: str) -> bool:
    """Whether ``obj`` is what a reference recording ``kind`` (``kind_of``; a type's name alone
    in checkpoints written before classes and functions were named) was written for."""
    return (kind_of(obj) if " " in kind else _type_name(type(obj))) == kind


def kind_text(kind: str) -> str:
    """``kind`` as words: "a game.Hero", "the class game.Circle", "the function game.f"."""
    tname, _, which = kind.partition(" ")
    if not which:
        return f"a {tname}"
    return f"the {'function' if tname == 'builtins.function' else 'class'} {which}"


# Per module namespace (by id, with the namespace: its id is not reused while held here): the
# globals a workflow of the module declares ``global`` and assigns, each with the object it was
# bound to when the workflow was compiled (``workflow_writes``).
_WRITTEN: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}


def workflow_writes(g: dict[str, Any], names: Any) -> None:
    """Note that a workflow of module namespace ``g`` assigns its globals ``names``. Once such a
    global is bound to another object than the module's (the one it had when the workflow was
    compiled, as an import makes it), what it holds is the workflow's, not the module's: a
    checkpoint keeps it by value where a local holds it (the global itself is not kept: a new
    process has its own), never as the module's global, which in a new process is the value its
    import gave it."""
    if not names:
        return
    held = _WRITTEN.get(id(g))
    if held is None or held[0] is not g:
        held = _WRITTEN[id(g)] = (g, {})
    for name in names:
        held[1].setdefault(name, g.get(name, _NONE))
    _NAMESPACES.pop(id(g), None)  # indexed again with them
    _WALKS.clear()


def _rebound(g: dict[str, Any]) -> frozenset[str]:
    """The globals of ``g`` a workflow assigns that are bound to another object than the
    module's (``workflow_writes``)."""
    held = _WRITTEN.get(id(g))
    if held is None or held[0] is not g:
        return frozenset()
    return frozenset(name for name, v in held[1].items() if g.get(name, _NONE) is not v)


class Namespace:
    """What a checkpoint looks up in one module namespace: per non-plain value, by id, its name;
    which of them are builtin containers (the C pickler writes those without asking
    reducer_override); the names of the values the path walk starts from (lists, dicts, tuples,
    instances of the module's own classes); the other user modules it reaches. The globals a
    workflow of the module assigned another object (``written``) are none of these: what they
    hold is the workflow's."""

    __slots__ = (
        "g", "module", "values", "names", "containers", "roots", "imports", "written", "_refs"
    )

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
        written = self.written = _rebound(g) if _WRITTEN else frozenset()
        for name, v in items:
            if name.startswith("__") or name in written:
                continue
            t = type(v)
            # A frozenset of several elements is never shared by accident, as an empty one is.
            if t not in _PLAIN_TYPES or t is frozenset and len(v) > 1:
                self.names.setdefault(id(v), name)
                if t in _MUTABLE_CONTAINERS or t is frozenset:
                    self.containers.setdefault(id(v), name)
            if _root(v, t, module):
                self.roots.append(name)
            other = (
                v
                if t is types.ModuleType
                else (
                    sys.modules.get(getattr(v, "__module__", None) or "")
                    if isinstance(v, (type, types.FunctionType))
                    else None
                )
            )
            if (
                other is not None
                and getattr(other, "__name__", None) != module
                and user_module(other)
            ):
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
    if (
        ns is None
        or ns.g is not g
        or len(g) != len(ns.values)
        or not all(map(operator.is_, g.values(), ns.values))
    ):
        if len(_NAMESPACES) >= 256:
            _NAMESPACES.clear()
        ns = _NAMESPACES[id(g)] = Namespace(g)
    return ns


def _root(v: Any, t: type, module: Any) -> bool:
    """Whether the walk starts from global ``v`` of ``module``: a container with items, a class
    of the module (its attributes may be rebound to containers), a function of the module that
    holds state (mutable defaults, attributes, closure cells), an instance of a user class."""
    if t is tuple or t is frozenset:
        return bool(v)  # immutable: an empty one never holds anything
    if t is list or t is dict or t is set:
        return True  # may hold objects later (the workflow may register its own there)
    if t is _LRU_WRAPPER:
        return True  # a cached function: its results are module data (``_pickle_caches``)
    if t is types.FunctionType:
        return bool(v.__module__ == module and _function_holds_state(v))
    if isinstance(v, type):
        return bool(v.__module__ == module)
    if (
        isinstance(v, _CONTAINER_BASES)
        or t is types.SimpleNamespace
        or t is types.MappingProxyType
        or isinstance(v, _HOLDERS)
    ):
        return True
    if t is types.MethodType or t is types.BuiltinFunctionType and _bound_to_data(v):
        return True
    return _walked_type(t, {module})


def _function_holds_state(f: Any) -> bool:
    if f.__closure__ or f.__dict__:
        return True
    values = (*(f.__defaults__ or ()), *(f.__kwdefaults__ or {}).values())
    return any(type(d) not in _PLAIN_TYPES or type(d) is tuple and d for d in values)


def _walked_type(t: type, modules: Any) -> bool:
    """Instances of ``t`` have their attributes walked: a class of one of ``modules`` or of
    any other of the application's modules (``HOLD = Holder()`` with ``Holder`` imported, the
    items of ``from game.data import MONSTERS``)."""
    return (
        (t.__module__ in modules or bool(t.__flags__ & HEAPTYPE) and _app_module(t.__module__))
        and not issubclass(t, _NOT_WALKED)
    )


def _app_module(name: Any) -> bool:
    """Whether ``name`` names a loaded module of the application (``user_module``)."""
    m = sys.modules.get(name) if isinstance(name, str) else None
    return m is not None and user_module(m)


_CONTAINER_BASES = (dict, list, tuple, set, frozenset, collections.deque)
_LRU_WRAPPER: type = type(functools.lru_cache(maxsize=None)(len))  # functools._lru_cache_wrapper
# Library objects that hold the application's objects, looked into wherever they are: their
# fields (``_held_fields``) and their __dict__.
_HOLDERS = (
    functools.partial, BaseException, collections.UserDict, collections.UserList, collections.ChainMap,
)
_HOLDER_FIELDS: dict[type, tuple[str, ...]] = {}


def _held_fields(o: Any) -> tuple[str, ...]:
    """The fields of a holder, beyond its __dict__: a partial's, an exception's args."""
    known = _HOLDER_FIELDS.get(type(o))
    if known is not None:
        return known
    fields: tuple[str, ...] = (
        ("func", "args", "keywords") if isinstance(o, functools.partial)
        else ("args",) if isinstance(o, BaseException)
        else ()
    )
    if len(_HOLDER_FIELDS) < 1024:
        _HOLDER_FIELDS[type(o)] = fields
    return fields


def _bound_to_data(f: Any) -> bool:
    """Whether builtin function ``f`` is a method bound to an object (not a module's function)."""
    s = getattr(f, "__self__", None)
    return s is not None and type(s) is not types.ModuleType
# Objects with no state a walk follows (written by reference, or the runtime's own).
_NOT_WALKED = (types.ModuleType, types.BuiltinFunctionType, types.MethodType, BaseException)


# Py_TPFLAGS_HEAPTYPE (a public flag): the class was made by a class statement, not in C.
HEAPTYPE = 1 << 9


def slot_names(t: type) -> list[str]:
    """The ``__slots__`` attribute names of class ``t`` and its bases, as stored: a private
    one (``__code``) under its class's mangled name (``_Cls__code``), as Python files it."""
    names: list[str] = []
    for k in t.__mro__:
        sl = k.__dict__.get("__slots__")
        if sl is None:
            continue
        owner = k.__name__.lstrip("_")
        for n in (sl,) if isinstance(sl, str) else sl:
            if n in ("__dict__", "__weakref__"):
                continue
            if owner and n.startswith("__") and not n.endswith("__"):
                n = f"_{owner}{n}"
            names.append(n)
    return names


_MISSING_SLOT: Any = object()


def children(o: Any, modules: Any) -> list[tuple[tuple[str, Any], Any]] | None:
    """What the walk follows from ``o``: (step, value) pairs, or None for nothing."""
    t = type(o)
    if t is dict or isinstance(o, dict) or t is types.MappingProxyType:
        # (a read-only view of a dict, ``LIMITS = MappingProxyType({...})``, by its items too)
        out = []
        for j, (k, v) in enumerate(dict.items(o) if t is not types.MappingProxyType else o.items()):
            tk = type(k)
            if tk in _KEY_TYPES and (tk is not int or k < _LOW_ADDRESS or not _address(k, v)):
                out.append((("k", k), v))
            else:
                out.append((("v", j), v))
                out.append((("K", j), k))
        if t is not dict and hasattr(o, "__dict__"):
            out.extend((("a", k), v) for k, v in vars(o).items() if type(k) is str)
        return out
    if t is list or t is tuple or isinstance(o, (list, tuple, collections.deque)):
        return [(("i", j), v) for j, v in enumerate(o)]
    if isinstance(o, (set, frozenset)):
        # By position in the set's order, which follows hashes that may differ in another
        # process (addresses, string hashes): never written (``positional``), the walk's last
        # resort for an object no other way reaches.
        return [(("E", j), v) for j, v in enumerate(o)]
    if t is types.MethodType:  # ``bus.subscribe(self.on_event)``: the instance it is bound to
        return [(("S", 0), o.__self__), (("F", 0), o.__func__)]
    if t is types.BuiltinFunctionType:  # ``HOOKS.append(got.append)``: the object it is bound to
        return [(("S", 0), o.__self__)] if _bound_to_data(o) else None
    if isinstance(o, _HOLDERS):
        # A partial's function and arguments, an exception's args, a UserDict's or ChainMap's
        # data (in its __dict__), and what their instances hold in their __dict__.
        out = [(("A", k), getattr(o, k)) for k in _held_fields(o)]
        d = getattr(o, "__dict__", None)
        if isinstance(d, dict):
            out.extend((("a", k), v) for k, v in d.items() if type(k) is str)
        return out
    if t is types.FunctionType:
        if o.__module__ not in modules and not _app_module(o.__module__):
            return None
        out = [(("d", j), v) for j, v in enumerate(o.__defaults__ or ())]
        out.extend((("w", k), v) for k, v in (o.__kwdefaults__ or {}).items())
        out.extend((("a", k), v) for k, v in o.__dict__.items())
        for j, cell in enumerate(o.__closure__ or ()):
            try:
                out.append((("c", j), cell.cell_contents))
            except ValueError:  # an empty cell
                pass
        return out
    if isinstance(o, type):
        if o.__module__ not in modules and not _app_module(o.__module__):
            return None
        return [
            (("a", k), v)
            for k, v in vars(o).items()
            if type(k) is str and not (k.startswith("__") and k.endswith("__"))
        ]
    if t is types.SimpleNamespace or _walked_type(t, modules):
        d = getattr(o, "__dict__", None)
        out = [(("a", k), v) for k, v in d.items() if type(k) is str] if isinstance(d, dict) else []
        for n in slot_names(t):
            v = _slot_value(o, n)
            if v is not _MISSING_SLOT:
                out.append((("s", n), v))
        if not _named(t):
            # A class made by a function (``BOSS = make_monster()``) that no global names: the
            # instance's class is the way to it, so that another instance of it held in a local
            # (``type(BOSS)(5)``) is of the module's class after a restore, not of a copy.
            out.append((("T", 0), t))
        return out
    return None


def _named(t: type) -> bool:
    """Whether class ``t`` is the object its module and qualified name lead to (pickle writes it
    by that name)."""
    known = _NAMED.get(t)
    if known is None:
        o: Any = sys.modules.get(t.__module__)
        for part in t.__qualname__.split("."):
            o = getattr(o, part, None)
        known = o is t
        _NAMED[t] = known
    return known


# (weakly: a class made in a workflow is let go with it)
_NAMED: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def slot_values(o: Any) -> dict[str, Any]:
    """The ``__slots__`` of ``o`` that are set, by name."""
    out = {}
    for n in slot_names(type(o)):
        v = _slot_value(o, n)
        if v is not _MISSING_SLOT:
            out[n] = v
    return out


def _slot_value(o: Any, name: str) -> Any:
    for k in type(o).__mro__:
        desc: Any = k.__dict__.get(name)
        if desc is not None and isinstance(desc, _MemberDescriptor):
            try:
                return desc.__get__(o, type(o))
            except AttributeError:
                return _MISSING_SLOT
    return _MISSING_SLOT


_MemberDescriptor = types.MemberDescriptorType


def step_into(o: Any, step: tuple[str, Any]) -> Any:
    """The object one step of a path leads to from ``o`` (KeyError, IndexError, TypeError or
    AttributeError where it leads nowhere)."""
    kind, k = step
    if kind == "k":
        return dict.__getitem__(o, k) if isinstance(o, dict) else o[k]
    if kind == "i":
        return o[k]
    if kind == "a":
        return vars(o)[k]
    if kind == "v":
        return list(dict.values(o) if isinstance(o, dict) else o.values())[k]
    if kind == "K":
        return list(dict.keys(o) if isinstance(o, dict) else o.keys())[k]
    if kind == "e" or kind == "E":
        return list(o)[k]
    if kind == "d":
        return o.__defaults__[k]
    if kind == "w":
        return o.__kwdefaults__[k]
    if kind == "c":
        return o.__closure__[k].cell_contents
    if kind == "s":
        v = _slot_value(o, k)
        if v is _MISSING_SLOT:
            raise AttributeError(k)
        return v
    if kind == "S":
        return o.__self__
    if kind == "F":
        return o.__func__
    if kind == "T":
        return type(o)
    if kind == "A":
        if k not in _held_fields(o):
            raise AttributeError(k)
        return getattr(o, k)
    if kind == "L":
        return Caches.module.cached_result(o, k)
    raise KeyError(kind)


Ref = tuple[Any, ...]  # ("g", key, name) | ("p", key, name, steps, type) | ("m", module, ...)


def number_ids(objs: list[Any]) -> list[int]:
    """The ids of the floats and ints among ``objs`` that pickle writes anew at each occurrence
    (all but the cached small ints, one object per value in every process), one per occurrence.
    At C speed."""
    numbers = itertools.compress(objs, map(_NUMBERS.__contains__, map(type, objs)))
    return list(itertools.filterfalse(_SMALL_INT_IDS.__contains__, map(id, numbers)))


_NUMBERS = frozenset({float, int})
_SMALL_INT_IDS = frozenset(map(id, range(-5, 257)))  # the cached small ints, alive with Python


class ModuleTooLarge(TypeError):
    """The path walk of one checkpoint stopped at its budget before it could tell whether an
    object the state holds is module data."""


class ModuleData:
    """The module data one checkpoint looks the objects it writes up in (see above): the
    globals of the frames' namespaces and, walked when first asked, the paths."""

    # Every checkpoint makes one; most read little of it: what is not set per instance is
    # these defaults.
    _ns: list[tuple[str, Namespace]] | None = None
    _globals: dict[int, tuple[str, str, dict[str, Any]]] | None = None
    _containers: dict[int, str]
    _paths: dict[int, Ref] | None = None
    _unchecked: Any = None  # the walk whose cached results ``quick_paths`` left unchecked
    _functions: list[types.FunctionType] = []  # noqa: RUF012  (read only: the walk's, once walked)
    _more: dict[int, list[Ref]] = {}  # noqa: RUF012  (read only: the walk's, once walked)
    active = False  # some namespace has data to walk
    truncated: list[str] | None = None  # the modules walked, if the walk stopped early
    # Set by the plain-locals check where the locals are plain but for floats or ints held more
    # than once: all those (by id), so that the checkpoint is written in one pass.
    shared_numbers: set[int] | None = None
    # (frame index, local, frame index, earlier local) of each local of ``own`` holding the same
    # float or big int as an earlier one (``find_aliases``; None until looked for): written
    # twice, made one object again at the restore.
    aliases: list[tuple[int, str, int, str]] | None = None
    # The ints that are the id (or identity hash) of an object the checkpoint writes, by value:
    # ("id" or "hash", the object), and the way to it for an object of module data the
    # checkpoint does not write; written as references to it (``address_ints``).
    addresses: dict[int, tuple[Any, ...]] | None = None
    direct_counts: Mapping[int, int] = types.MappingProxyType({})  # per number aliased: its locals
    # Set by the plain-locals check: id -> (workflow key, name) of each function (and class of
    # an instance) it met that is bound to a global of the frames' namespaces (written as it).
    by_name: dict[int, tuple[str, str]] | None = None
    # Set by the plain-locals check: the lists and dicts the locals hold that are reached
    # through module data, by id: (path, the object) (written by ``PathsPickler``).
    by_path: dict[int, tuple[Ref, Any]] | None = None

    def __init__(self, spaces: dict[int, tuple[str, dict[str, Any]]], own: Any = None) -> None:
        self._spaces = spaces
        self._own = own  # the list being checkpointed: it and its items' __dict__ are its own
        # (frame index, local, reference) of each local holding one of the module's constants
        # (``find_constants``; None until looked for): written by value, made the module's
        # constant again at the restore (``alias_frames``).
        self.top_constants: list[tuple[int, str, str]] | None = None

    @property
    def frames(self) -> Any:
        """The frames being checkpointed (none where it was made without them)."""
        return self._own or ()

    def find_constants(self) -> list[tuple[int, str, str]]:
        """``top_constants``, looked for once: the locals holding one of the module's constants
        (a literal of the workflow, a global bound to an immutable value)."""
        out = self.top_constants
        if out is not None:
            return out
        out = self.top_constants = []
        for fi, f in enumerate(self._own or ()):
            consts = frame_constants(f)
            d = f.__dict__
            if not consts or consts.keys().isdisjoint(map(id, d.values())):
                continue
            for name, v in d.items():
                c = consts.get(id(v))
                if c is not None:
                    out.append((fi, name, c[0]))
        return out

    def held_elsewhere(self, items: Any, locals_too: bool = True) -> bool:
        """Drop from ``top_constants`` the locals' constants that ``items`` (what a checkpoint
        writes: with the locals themselves if ``locals_too``) hold other than as those locals:
        a container or an object sharing it with a local must still share it after a restore.
        True if some were dropped."""
        tops = self.top_constants
        if not tops:
            return False
        own = self._own or ()
        mine = [id(own[fi].__dict__[name]) for fi, name, _ref in tops]
        if not locals_too and set(mine).isdisjoint(map(id, items)):
            return False  # (most often: held by the locals alone)
        ids = list(map(id, items))
        kept = [
            t
            for t, i in zip(tops, mine, strict=True)
            if ids.count(i) <= (mine.count(i) if locals_too else 0)
        ]
        if len(kept) == len(tops):
            return False
        self.top_constants = kept
        return True

    def find_aliases(self) -> list[tuple[int, str, int, str]]:
        """``aliases``, looked for once (with ``direct_counts`` for them): the locals that hold
        the same float or big int as an earlier local. One loop over the locals (a frame has
        few: it costs less than the tables that would find them at C speed)."""
        if self.aliases is not None:
            return self.aliases
        self.aliases = []
        first: dict[int, tuple[int, str]] = {}  # per number: its first local
        counts: dict[int, int] = {}
        for fi, f in enumerate(self._own or ()):
            consts = frame_constants(f)  # (made the module's constant again: one object)
            for name, v in f.__dict__.items():
                t = type(v)
                if t is not float and t is not int:
                    continue
                i = id(v)
                if i in _SMALL_INT_IDS or i in consts:
                    continue
                held = first.get(i)
                if held is None:
                    first[i] = (fi, name)
                else:  # a later local of a number
                    self.aliases.append((fi, name, *held))
                    counts[i] = counts.get(i, 1) + 1
        if counts:
            self.direct_counts = counts
        return self.aliases

    def _index(self) -> None:
        if len(self._spaces) == 1:  # the frames run in one module (most do)
            ((key, g),) = self._spaces.values()
            n = namespace(g)
            self._ns = [(key, n)]
            self._globals, self._containers = n.refs(key), n.containers
            self.active = bool(n.roots or n.imports)
            return
        self._ns = [(key, namespace(g)) for key, g in self._spaces.values()]
        self._globals, self._containers = {}, {}
        for key, n in reversed(self._ns):  # the first frame's namespace wins
            self._globals.update(n.refs(key))
            self._containers.update(n.containers)
            self.active = self.active or bool(n.roots or n.imports)

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
        """id -> reference of every object reached through module data: the last walk of these
        namespaces while it is current (``_Walk.current``), else a new walk."""
        if self._paths is None:
            self._walk_paths(True)
        elif self._unchecked is not None:
            self.check_caches()
        assert self._paths is not None
        return self._paths

    def quick_paths(self) -> dict[int, Ref]:
        """``paths()``, but for the results of the cached functions module data holds: those
        cached as last indexed, where no cache's entries changed since, without checking what
        they hold (an object put into a result since is found by ``check_caches``)."""
        if self._paths is None:
            self._walk_paths(False)
        assert self._paths is not None
        return self._paths

    def caches_unchecked(self) -> bool:
        """Whether ``quick_paths`` left what cached results hold unchecked."""
        return self._unchecked is not None

    def check_caches(self) -> dict[int, Ref]:
        """``paths()`` after a ``quick_paths()``: what the cached results hold checked, and
        indexed again where it changed."""
        w = self._unchecked
        if w is not None:
            self._unchecked = None
            self.truncated = w.caches.refresh(w)
            self._paths = w.index
        return self.paths()

    def _walk_paths(self, contents: bool) -> None:
        if self._paths is None:
            if self._globals is None:
                self._index()
            if not self.active:
                self._paths = {}
                return
            assert self._ns is not None
            key = (_PATH_BUDGET, *((wkey, id(n.g)) for wkey, n in self._ns))
            w = _WALKS.get(key)
            if w is None or not w.current(self._ns):
                w = self._walk()
                if len(_WALKS) >= 64:
                    _WALKS.clear()
                _WALKS[key] = w
            # (the results of cached functions, indexed again where a cache changed)
            if w.caches is None:
                self.truncated = w.truncated
            else:
                self.truncated = w.caches.refresh(w, contents)
                if not contents:
                    self._unchecked = w
            self._paths = w.index
            self._functions = w.functions
            self._more = w.more

    def known_paths(self) -> dict[int, Ref]:
        """id -> reference of the objects of the last walk of these namespaces, current or not
        (walked now if there is none): a path may lead elsewhere now, for the caller to follow
        and check. Costs a lookup where the module's objects were walked before."""
        if self._paths is not None:
            return self._paths
        if self._globals is None:
            self._index()
        if not self.active:
            return {}
        assert self._ns is not None
        w = _WALKS.get((_PATH_BUDGET, *((wkey, id(n.g)) for wkey, n in self._ns)))
        if w is None:
            return self.paths()
        if w.caches is not None:
            w.caches.refresh(w)
        return w.index

    def more_paths(self, obj: Any) -> list[Ref]:
        """The references of a function module data holds beyond the one ``path`` gives."""
        self.paths()
        return [(*ref[:4], kind_of(obj)) for ref in self._more.get(id(obj), [])]

    def observers(self) -> list[Any]:
        """The functions module data holds that close over the frames being checkpointed (an
        observer the workflow registered), whether or not a local holds them too."""
        self.paths()
        return [f for f in self._functions if self.closes_over_own(f)]

    def path(self, obj: Any) -> Ref | None:
        """The reference of an object reached through module data, or None; ModuleTooLarge if
        the walk stopped before it could tell."""
        ref = self.paths().get(id(obj))
        if ref is not None and ref[3] and (type(obj) is types.FunctionType or isinstance(obj, type)):
            return (*ref[:4], kind_of(obj))
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

    def closes_over_own(self, f: Any) -> bool:
        """Whether function ``f``'s closure holds one of the frames being checkpointed."""
        own = self._own
        if not own or not f.__closure__:
            return False
        for cell in f.__closure__:
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if any(v is o for o in own):
                return True
        return False

    def _is_own(self, obj: Any) -> bool:
        own = self._own
        return own is not None and (
            obj is own or any(obj is getattr(o, "__dict__", None) for o in own)
        )

    def _walk(self) -> _Walk:
        assert self._ns is not None
        index: dict[int, Ref] = {}
        checks: list[tuple[Any, list[Any]]] = []
        instances: list[Any] = []  # checked by their __dict__, with the dicts
        lists: list[list[Any]] = []
        dicts: list[dict[Any, Any]] = []
        functions: list[types.FunctionType] = []
        classes: list[type] = []
        more: dict[int, list[Ref]] = {}
        seen: set[int] = set()
        queue: collections.deque[tuple[Any, tuple[str, str, str], tuple[tuple[str, Any], ...]]] = (
            collections.deque()
        )
        own = {n.module for _key, n in self._ns}
        walked = []
        for key, n in self._ns:
            seen.update(n.names)  # globals themselves are kept by name
            seen.update(id(n.g[name]) for name in n.roots)
            for name in n.roots:
                queue.append((n.g[name], ("p", key, name), ()))
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
                if name.startswith("__") or name in mns.written:
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
                queue.append((mns.g[name], ("m", mname, name), ()))
        modules = own | set(others)
        budget = _PATH_BUDGET
        truncated = None
        # What only a set's element reaches is walked last: an object another way reaches (a
        # list, a dict, an attribute) is kept by that way, which a restore follows in any
        # process, not by its position in a set (``positional``).
        later: collections.deque[tuple[Any, tuple[str, str, str], tuple[tuple[str, Any], ...]]] = (
            collections.deque()
        )
        while queue or later:
            if budget <= 0:
                truncated = walked
                break
            if queue:
                o, root, steps = queue.popleft()
            else:  # reached only through a set's element: indexed here, if no other way did
                o, root, steps = later.popleft()
                i = id(o)
                if i in seen:
                    continue
                seen.add(i)
                budget -= 1
                to = type(o)
                if to is not tuple and to not in _UNINDEXED:
                    index[i] = (*root, steps, _type_name(to))
                if to in _UNINDEXED and not (to is types.BuiltinFunctionType and _bound_to_data(o)):
                    continue
            kids = children(o, modules)
            if kids is None:
                continue
            to = type(o)
            if to is list:
                lists.append(o)
            elif to is dict:
                dicts.append(o)
            elif to is types.FunctionType:
                functions.append(o)
            elif to is type:
                classes.append(o)
            elif to is not tuple and to is not frozenset:
                d = getattr(o, "__dict__", None)
                if (type(d) is dict and len(kids) == len(d) and not isinstance(o, _CONTAINER_BASES)
                        and all(k[0][0] == "a" for k in kids)):
                    # Its attributes are its __dict__ alone (most module data: the game's
                    # objects): checked with the dicts, at C speed (``_Walk.current``).
                    instances.append(o)
                else:
                    checks.append((o, contents(o, modules)))
            if not kids:
                continue
            behind = positional(steps)
            for step, v in kids:
                tv = type(v)
                if tv in _PLAIN_TYPES and tv is not tuple and tv is not frozenset:
                    continue
                i = id(v)
                if i in seen:
                    if tv is types.FunctionType and not behind and step[0] != "E":
                        more.setdefault(i, []).append((*root, (*steps, step), _type_name(tv)))
                    continue
                path = (*steps, step)
                if behind or step[0] == "E":
                    later.append((v, root, path))  # seen and indexed when its turn comes
                    continue
                seen.add(i)
                budget -= 1
                if tv is not tuple and tv not in _UNINDEXED:
                    index[i] = (*root, path, _type_name(tv))
                if tv not in _UNINDEXED or tv is types.BuiltinFunctionType and _bound_to_data(v):
                    queue.append((v, root, path))
        spaces = [n for _key, n in self._ns]
        others_ns = [namespace(vars(m)) for m in others.values()]
        w = _Walk(
            spaces, others_ns, index, truncated, checks, lists, dicts, functions, classes, instances, more
        )
        w.caches = Caches.module.caches_of(self._ns, index, modules)
        return w


class _Walk:
    """One walk of module data: its index, and what it is current while: the namespaces it
    started from (each rebuilt when a global is rebound) and, per object it looked into (every
    mutable container, instance, class and function it followed), what it found in it."""

    __slots__ = (
        "spaces",
        "others",
        "index",
        "truncated",
        "checks",
        "modules",
        "lists",
        "dicts",
        "functions",
        "classes",
        "cells",
        "states",
        "sizes",
        "items",
        "key_parts",
        "instances",
        "more",
        "caches",
    )

    def __init__(
        self,
        spaces: list[Namespace],
        others: list[Namespace],
        index: dict[int, Ref],
        truncated: list[str] | None,
        checks: list[tuple[Any, list[Any]]],
        lists: list[list[Any]],
        dicts: list[dict[Any, Any]],
        functions: list[types.FunctionType],
        classes: list[type],
        instances: list[Any],
        more: dict[int, list[Ref]],
    ) -> None:
        self.spaces = spaces
        # Per function module data holds at more than one place (an observer the workflow
        # registered in two lists): its references beyond the one in ``index``.
        self.more = more
        self.others = others
        self.index = index
        self.truncated = truncated
        self.checks = checks
        self.modules = {n.module for n in spaces} | {n.module for n in others}
        # The lists and dicts it looked into are checked together at C speed: their sizes, and
        # their items (keys and values) one after the other (``_parts``). So are the functions
        # and classes it looked into (most of what it looks into: the application's procedures,
        # classes and methods), by what their contents are made of. A function: its module,
        # defaults, keyword defaults, __dict__ and closure (the objects: ``states``), the items
        # of the dicts among them (with the dicts), the contents of its cells (``cells``). A
        # class: the keys and values of its namespace (dunders too: one that changes only costs
        # a walk).
        self.functions = functions
        self.classes = classes
        self.cells = [c for f in functions for c in f.__closure__ or ()]
        self.lists = lists
        self.dicts = [
            *dicts,
            *(f.__dict__ for f in functions),
            *(kw for kw in map(_KWDEFAULTS, functions) if kw is not None),
        ]
        # Instances whose attributes are their __dict__ alone: the keys and values of that dict,
        # with the dicts' (the dicts themselves are not held: a __dict__ held apart from its
        # instance is one the checkpoint writes otherwise, ``shared_dict``).
        self.instances = instances
        parts = self._parts()
        self.sizes = list(map(len, parts))
        self.items = list(itertools.chain.from_iterable(parts))
        # Which of the parts are keys (of the dicts, the classes' namespaces, the instances'
        # __dict__s): a value of module data is found by its key.
        nl, nd, nc, ni = len(lists), len(self.dicts), len(classes), len(instances)
        self.key_parts = frozenset(itertools.chain(
            range(nl, nl + nd), range(nl + 2 * nd, nl + 2 * nd + nc),
            range(nl + 2 * nd + 2 * nc, nl + 2 * nd + 2 * nc + ni),
        ))
        self.states = list(self._states())
        # The cached functions it met, their results indexed too (``_pickle_caches.Caches``).
        self.caches: Any = None

    def _parts(self) -> list[Any]:
        """What is compared item by item: the lists, the keys and the values of the dicts, of
        the classes' namespaces and of the instances' __dict__s."""
        classes = list(map(vars, self.classes))
        own = list(map(_DICT_OF, self.instances))
        return [
            *self.lists,
            *map(dict.keys, self.dicts),
            *map(dict.values, self.dicts),
            *classes,
            *map(_VALUES, classes),
            *map(dict.keys, own),
            *map(dict.values, own),
        ]

    def _only_plain_changed(self, parts: list[Any]) -> bool:
        """Whether what changed in the lists and dicts looked into since the walk (``parts``) is
        plain values alone: a value that was plain replaced by another (``PLAYERS["p0"]["hp"] -=
        1``, a counter), plain values added at the end (``LOG.append(("hit", n))``). Then every
        object the walk found is where it was, at the same place of the same container, and
        the walk stands: its items become the new ones. An object that gained or lost a place,
        an item removed, or plain values put where objects were, and it does not."""
        sizes, old_sizes, items = list(map(len, parts)), self.sizes, self.items
        if any(map(operator.lt, sizes, old_sizes)):
            return False
        # What each holds at the places it had (at C speed, as ``current``), then what it gained.
        # A key is never replaced, even by a plain one: the value at its place is found by it.
        kept = list(itertools.chain.from_iterable(map(itertools.islice, parts, old_sizes)))
        ends: list[int] | None = None
        for j in itertools.compress(itertools.count(), map(operator.is_not, kept, items)):
            if not (_plain(items[j]) and _plain(kept[j])):
                return False
            if ends is None:
                ends = list(itertools.accumulate(old_sizes))
            if bisect.bisect_right(ends, j) in self.key_parts:
                return False
        for k in itertools.compress(itertools.count(), map(operator.ne, sizes, old_sizes)):
            if not all(map(_plain, itertools.islice(parts[k], old_sizes[k], None))):
                return False
        self.items = list(itertools.chain.from_iterable(parts))
        self.sizes = sizes
        return True

    def _states(self) -> Iterator[Any]:
        return itertools.chain(
            itertools.chain.from_iterable(map(_FUNCTION_STATE, self.functions)),
            map(_cell_contents, self.cells),
        )

    def current(self, ns: list[tuple[str, Namespace]]) -> bool:
        """Whether module data is as this walk found it: the same namespaces (no global rebound,
        added or removed) and, in every object it looked into, the same objects (by identity),
        so that the same objects are reached through the same paths."""
        spaces = self.spaces
        if len(ns) != len(spaces):
            return False
        for (_k, n), m in zip(ns, spaces, strict=True):
            if n is not m:
                return False
        for m in self.others:
            if namespace(m.g) is not m:
                return False
        # The items compared as they come, once the sizes are the same.
        parts = self._parts()
        if (list(map(len, parts)) != self.sizes or not all(
            map(operator.is_, itertools.chain.from_iterable(parts), self.items)
        )) and not self._only_plain_changed(parts):
            return False
        if not all(map(operator.is_, self._states(), self.states)):
            return False
        modules = self.modules
        for o, seen in self.checks:
            now = contents(o, modules)
            if len(now) != len(seen) or not all(map(operator.is_, now, seen)):
                return False
        return True


_WALKS: dict[tuple[Any, ...], _Walk] = {}
# What a function's contents (``children``) are made of, but for the items of its dicts and
# the contents of its cells: each the same object while the function is as it was.
_FUNCTION_STATE = operator.attrgetter(
    "__module__", "__defaults__", "__kwdefaults__", "__dict__", "__closure__"
)
_KWDEFAULTS = operator.attrgetter("__kwdefaults__")
_DICT_OF = operator.attrgetter("__dict__")
_VALUES = operator.methodcaller("values")
_EMPTY_CELL: Any = object()


def _cell_contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _EMPTY_CELL


_ATOMS = frozenset({type(None), bool, int, float, complex, str, bytes})


def _plain(v: Any, depth: int = 0) -> bool:
    """Whether ``v`` holds no object a walk would index: an atom, or a tuple of such (nested
    at most 8 deep: a deeper one counts as holding objects, which only costs a walk)."""
    t = type(v)
    return t in _ATOMS or t is tuple and depth < 8 and all(_plain(x, depth + 1) for x in v)


def contents(o: Any, modules: Any) -> list[Any]:
    """The objects the walk finds in ``o``, each after the key or name it is found by (a dict's
    keys, attribute and slot names: the same objects while ``o`` is unchanged, names interned),
    in an order of their own. An object found under another name at the same place (``del
    obj.a; obj.b = x``, ``del d["a"]; d["b"] = x`` in a defaultdict) is a change."""
    t = type(o)
    if t is list:
        return list(o)
    if t is dict:
        return [*o.keys(), *o.values()]
    out = []
    for (kind, name), v in children(o, modules) or ():
        if kind == "k":
            out.append(name)
        elif kind in _NAMED_STEPS and type(name) is str:
            out.append(sys.intern(name))
        out.append(v)
    return out


# Steps that find an object by a name (an attribute, a slot, a holder's field, a keyword default).
_NAMED_STEPS = frozenset({"a", "s", "A", "w"})


# Never indexed nor walked: written by reference whatever holds them.
_UNINDEXED = frozenset({types.ModuleType, types.BuiltinFunctionType, types.CodeType})


# Written by reference already (by cloudpickle), or with no state of their own to share.
_BY_REFERENCE = (
    type,
    types.FunctionType,
    types.ModuleType,
    types.BuiltinFunctionType,
    types.MethodType,
)


def positional(steps: tuple[tuple[str, Any], ...]) -> bool:
    """Whether a path goes through a set's element, found by its position in the set's order."""
    return any(kind == "E" for kind, _k in steps)


# Steps that find an object by its place in a list, a tuple, a deque or a dict's order. That
# place is where the module put the object as it was imported, which is the same in every process
# unless the module built the container in an order of its own process: from a set of strings
# (``HANDLERS = [Handler(n) for n in NAMES]``, ordered by string hashes), by ``id()``... There
# the place holds another object in another process.
_ORDERED_STEPS = frozenset({"i", "v", "K"})
# A token of this process: a reference written here is followed as written in this process.
PROCESS = os.urandom(8).hex()
# Objects a fingerprint looks at (the rest counts by its type), and the longest container whose
# order a checkpoint records (a longer one is followed by place, unchecked).
_FINGERPRINT_BUDGET = 40
_ORDER_LIMIT = 256


def ordered(steps: tuple[tuple[str, Any], ...]) -> bool:
    """Whether a path finds an object by its place in a list, tuple, deque or dict."""
    return any(kind in _ORDERED_STEPS for kind, _k in steps)


def fingerprint(obj: Any) -> str:
    """A digest of what ``obj`` holds (its type, and its items, attributes and slots, by value,
    down a few levels), the same in every process for objects holding the same: classes,
    functions and modules by name, dicts and sets whatever their order, identities never."""
    budget = [_FINGERPRINT_BUDGET]
    stack: set[int] = set()

    def fp(o: Any, depth: int) -> str:
        t = type(o)
        if o is None or t is bool or t is int or t is float or t is complex or t is str or t is bytes:
            return repr(o)
        if isinstance(o, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
            qual = getattr(o, "__qualname__", None) or getattr(o, "__name__", "?")
            return f"<{t.__name__} {getattr(o, '__module__', None)}:{qual}>"
        budget[0] -= 1
        name = _type_name(t)
        if budget[0] < 0 or depth > 4 or id(o) in stack:
            return f"<{name}>"
        stack.add(id(o))
        try:
            parts: list[str] = []
            for base in (str, bytes, int, float, complex):
                if isinstance(o, base):
                    parts.append(base.__repr__(o))
                    break
            if isinstance(o, (list, tuple, collections.deque)):
                parts.append(f"#{len(o)}")
                parts.extend(fp(x, depth + 1) for x in itertools.islice(o, _FINGERPRINT_BUDGET))
            elif isinstance(o, dict):
                parts.append(f"#{len(o)}")
                if len(o) <= _FINGERPRINT_BUDGET:
                    parts.extend(sorted(f"{fp(k, depth + 1)}:{fp(v, depth + 1)}" for k, v in dict.items(o)))
            elif isinstance(o, (set, frozenset)):
                parts.append(f"#{len(o)}")
                if len(o) <= _FINGERPRINT_BUDGET:
                    parts.extend(sorted(fp(x, depth + 1) for x in o))
            try:
                d = object.__getattribute__(o, "__dict__")
            except Exception:
                d = None
            if type(d) is dict and len(d) <= _FINGERPRINT_BUDGET:
                parts.extend(
                    sorted(f".{k}={fp(v, depth + 1)}" for k, v in d.items() if type(k) is str)
                )
            parts.extend(sorted(f".{k}={fp(v, depth + 1)}" for k, v in slot_values(o).items()))
        except Exception:  # an object whose contents cannot be read: its type
            parts = ["?"]
        finally:
            stack.discard(id(o))
        if depth == 0:
            top.extend(parts)
        return f"{name}({','.join(parts)})"

    top: list[str] = []
    whole = _digest(fp(obj, 0), 24)
    # Then a short digest of each of its parts (an attribute and its value, an item), by which a
    # restore still finds the object after one of its attributes changed (``match_element``).
    pieces = sorted({_digest(f"{part}", _PART_DIGEST) for part in top})[:_PARTS]
    return whole + "|" + ".".join(pieces)


_PART_DIGEST = 10  # hex digits of a part's digest
_PARTS = 12  # parts recorded per object at most


def _digest(text: str, n: int) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:n]


def match_element(fp: str, now: list[str]) -> int | None:
    """The place in ``now`` (the fingerprints of a container's objects in this process) of the
    object that had fingerprint ``fp`` in the process that made a checkpoint: the one place
    holding the same fingerprint; else, where that object changed in place since (a counter
    the workflow bumped, which a new process's import does not have), the one object sharing
    with it each of its parts that no other object of the container has (its name, its key).
    None where that does not tell one object."""
    places = [j for j, f in enumerate(now) if f == fp]
    if len(places) == 1:
        return places[0]
    if places or "|" not in fp:
        return None
    mine = set(fp.partition("|")[2].split("."))
    owners: dict[str, list[int]] = {}
    for j, f in enumerate(now):
        for part in f.partition("|")[2].split("."):
            if part in mine:
                owners.setdefault(part, []).append(j)
    found = {js[0] for js in owners.values() if len(js) == 1}
    return found.pop() if len(found) == 1 else None


def _in_order(container: Any, kind: str) -> list[Any]:
    """The objects an ordered step of ``kind`` picks among in ``container``, in order."""
    proxy = type(container) is types.MappingProxyType
    if kind == "v":
        return list(container.values() if proxy else dict.values(container))
    if kind == "K":
        return list(container.keys() if proxy else dict.keys(container))
    return list(container)


# The orders recorded so far, by container and step kind: (the container, its elements' ids,
# the order). A workflow holding ``MONSTERS[3]`` checkpoints at every step; fingerprinting the
# whole list each time made each step's checkpoint several times dearer (0.8 to 5 ms for a list
# of 200 objects). Recorded once per container and elements, an element changed in place since
# keeps the fingerprint it had when first recorded: most often what the module made it, which is
# what a new process's import makes too.
_ORDERS: dict[tuple[int, str], tuple[Any, tuple[int, ...], tuple[list[str], str]]] = {}
_ORDERS_MOST = 1024


def order_of(container: Any, kind: str) -> tuple[list[str], str] | None:
    """The fingerprints of the objects in ``container`` an ordered step picks among, and a digest
    of them whatever their order (None for a container too long to record)."""
    items = _in_order(container, kind)
    if len(items) > _ORDER_LIMIT:
        return None
    ids = tuple(map(id, items))
    key = (id(container), kind)
    known = _ORDERS.get(key)
    if known is not None and known[0] is container and known[1] == ids:
        return known[2]
    fps = [fingerprint(o) for o in items]
    order = fps, hashlib.sha256("\n".join(sorted(fps)).encode()).hexdigest()[:24]
    if len(_ORDERS) >= _ORDERS_MOST:
        _ORDERS.clear()
    _ORDERS[key] = (container, ids, order)  # (holding the container: its id stays its own)
    return order


def reordered(
    c: Any, kind: str, process: str, fps: list[str], digest: str, start: int, stop: int
) -> list[Any] | None:
    """For an iterator of a container of module data restored in another process than the one
    that checkpointed it: where the module built ``c`` here holding the same objects (by
    fingerprint, ``order_of``) in another order, this process's objects that were at places
    ``start:stop`` of the recorded order (``fps``); else None (the same order, or the container
    changed since: the iterator goes on by its position)."""
    if process == PROCESS:
        return None
    now = order_of(c, kind)
    if now is None or now[0] == fps:
        return None
    items = _in_order(c, kind)
    if now[1] == digest:  # the same objects in another order
        pool: dict[str, list[Any]] = {}
        for f, o in zip(now[0], items, strict=True):
            pool.setdefault(f, []).append(o)
        return [pool[f].pop(0) for f in fps[start:stop]]
    # Some changed in place (or the container changed): each found by ``match_element``, or
    # the iterator goes on by its position.
    if len(now[0]) != len(fps):
        return None
    places = [match_element(f, now[0]) for f in fps]
    if None in places or len(set(places)) != len(places):
        return None
    return [items[j] for j in places[start:stop]]  # type: ignore[index]


OrderCheck = tuple[int, str, str]  # (index of the step in the path, the element's, the order's)


def resolve_ordered(
    pid: Ref, checks: tuple[OrderCheck, ...], orders: dict[tuple[int, str], Any]
) -> Any:
    """The object a path reference with ordered steps leads to, in a process other than the one
    that wrote it. At each step checked (``checks``), where the container holds the same objects
    as at the checkpoint (by fingerprint) in another order, and its place holds another one than
    the object the checkpoint went through, the step takes the one element holding what that
    object held: the module built the container in another order here. Elsewhere (the module's
    data changed since, or several elements hold alike) the step goes by place, as written.
    ValueError where the path leads nowhere, as ``_resolve_ref``. ``orders`` caches the orders
    of containers for one restore (by id and step kind)."""
    tag, root, name, steps, tname = pid
    by_step = {at: (elem, order) for at, elem, order in checks}
    moved = list(steps)
    o: Any = None
    try:
        if tag == "m":
            o = vars(sys.modules.get(root) or importlib.import_module(root))[name]
        else:
            o = workflow_globals(root)[name]
        for at, (kind, k) in enumerate(steps):
            check = by_step.get(at)
            if check is not None and type(k) is int:
                elem, order = check
                key = (id(o), kind)
                if key not in orders:
                    orders[key] = (o, order_of(o, kind))  # holding o: its id stays its own
                now = orders[key][1]
                if now is not None and now[0][k : k + 1] != [elem]:
                    if now[1] == order:
                        places = [j for j, f in enumerate(now[0]) if f == elem]
                        if len(places) == 1:
                            moved[at] = (kind, places[0])
                    else:  # changed since: the object itself changed in place, or others
                        j = match_element(elem, now[0])
                        if j is not None:
                            moved[at] = (kind, j)
            o = step_into(o, moved[at])
    except Exception:
        return _resolve_ref(pid)  # says where it leads nowhere, or the object it leads to
    if not kind_matches(o, tname):
        return _resolve_ref(pid)
    return o


def positional_problem(obj: Any, pid: Ref) -> str:
    """Why the object at the positional path ``pid`` (``positional``) is refused."""
    steps = pid[3]
    at = next(i for i, (kind, _k) in enumerate(steps) if kind == "E")
    holder = ref_text((pid[0], pid[1], pid[2], steps[:at], pid[4]))
    what = "an element" if at == len(steps) - 1 else "reached through an element"
    return (
        f"this {type(obj).__qualname__} is {what} of the module-level set {holder}, which a "
        "restore could find only by its position in the set's order: that order follows hashes "
        "(addresses, string hashes) that differ in another process, where that position holds "
        "another element. Keep such objects in a list, a tuple or a dict keyed by a name at "
        "module level, or hold a key (a name) across the await and look the object up after "
        "it; to loop over the set across awaits, iterate over a list of it or sorted(...)"
    )


def path_text(name: str, steps: tuple[tuple[str, Any], ...]) -> str:
    """A path as code: ``CONFIG['items'][0].children``."""
    out = [name]
    for kind, k in steps:
        if kind == "L":
            out.append(Caches.module.call_text(k))
            continue
        out.append(_STEP_TEXT[kind].format(k=k, r=repr(k)))
    return "".join(out)


_STEP_TEXT = {
    "k": "[{r}]",
    "i": "[{k}]",
    "a": ".{k}",
    "s": ".{k}",
    "v": ".values()[{k}]",
    "K": ".keys()[{k}]",
    "e": ".<element {k}>",
    "E": ".<element {k}>",
    "d": ".__defaults__[{k}]",
    "w": ".__kwdefaults__[{r}]",
    "c": ".__closure__[{k}].cell_contents",
    "S": ".__self__",
    "F": ".__func__",
    "T": ".__class__",
    "A": ".{k}",
    "L": "(...)",  # a cached function's result for a call (``_pickle_caches.call_text``)
}


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
            raise ValueError(
                f"module {root!r} cannot be imported ({type(e).__name__}: {e})"
            ) from None
    else:
        g = workflow_globals(root)
    if name not in g:
        raise ValueError(f"module {g.get('__name__')!r} has no global {name!r}")
    o = g[name]
    for n, (kind, k) in enumerate(steps):
        try:
            o = step_into(o, (kind, k))
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            what = (
                f"attribute {k}"
                if kind in ("a", "s")
                else f"item {k!r}"
                if kind in ("k", "i")
                else _STEP_TEXT[kind].format(k=k, r=repr(k)).lstrip(".")
            )
            where = ref_text((tag, root, name, steps[:n], tname))
            raise ValueError(f"{where} has no {what}") from None
    if not kind_matches(o, tname):
        now = kind_of(o) if " " in tname else _type_name(type(o))
        raise ValueError(f"{ref_text(pid)} is {kind_text(now)} now, not {kind_text(tname)}")
    return o


def rebind_ref(pid: Ref, value: Any, elsewhere: bool = False) -> None:
    """Put ``value`` where the "p" or "m" reference ``pid`` leads, if it leads to an object of
    the recorded kind there in this process. In a process other than the one that wrote it
    (``elsewhere``: one that did not run the registration), where the place is missing from a
    container that is there (the key of a dict, the next place of a list), put it there too.
    Else leave the module's data alone (in the process that wrote it, a place gone since was
    emptied by the application: the registration was undone)."""
    try:
        try:
            _resolve_ref(pid)  # it still leads to an object of the recorded kind
        except ValueError:
            if not elsewhere:
                return
            parent = _parent_of(pid)
            kind, k = pid[3][-1]
            if kind == "k" and isinstance(parent, dict) and k not in parent:
                parent[k] = value  # a handler registered under a key the import did not make
            elif kind == "i" and type(parent) is list and k == len(parent):
                parent.append(value)  # an observer appended to a list the import left shorter
            return
        parent = _parent_of(pid)
        _put(parent, pid[3][-1], value)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return  # immutable there (a tuple), or gone: the module's data is left as it is


def _put(parent: Any, step: tuple[str, Any], value: Any) -> None:
    kind, k = step
    if kind in ("i", "k"):
        parent[k] = value
    elif kind == "v":
        parent[list(parent)[k]] = value
    elif kind == "a" or kind == "A":
        setattr(parent, k, value)
    elif kind == "w":
        parent.__kwdefaults__[k] = value
    elif kind == "c":
        parent.__closure__[k].cell_contents = value
    elif kind == "d":
        d = list(parent.__defaults__)
        d[k] = value
        parent.__defaults__ = tuple(d)


def _parent_of(pid: Ref) -> Any:
    tag, root, name, steps, _tname = pid
    g = vars(sys.modules[root]) if tag == "m" else workflow_globals(root)
    o = g[name]
    for step in steps[:-1]:
        o = step_into(o, step)
    return o
