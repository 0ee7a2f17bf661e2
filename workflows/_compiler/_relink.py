"""The attributes an instance's own pickling leaves out, or gives back as other objects, that the
workflow holds elsewhere too: put back on the restored instance as the restored objects.

A class of the application may pickle its instances by a rule of its own: a ``__getstate__``
that drops a cache or a lock (``__setstate__`` makes a new one), or copies a list, a
``__reduce__`` that passes a copy of its data, a reducer registered with ``copyreg``. Where a
local, or another such instance, holds that attribute's object too (``c = p._cache``, ``items =
s.items``, ``b.items = a.items``), natively ``c is p._cache`` holds across the await; the restore
gave back the instance by its own rule, with a new cache or a copy of the list, apart from the
object the local came back as, so a change through the local was no longer the instance's. The
checkpoint records each such (instance, attribute, object) whose object it writes anyway (a
local, a container, another instance holds it) or that several such instances hold, and the
restore sets the attribute to that restored object where the instance's rule gave it another:
as if it had never stopped.
"""

from __future__ import annotations

import copyreg
import sys
import types
from typing import Any

from ._pickle_modules import HEAPTYPE, _app_module, slot_names

# Per class: whether its instances are pickled by a rule of the application's own.
_CUSTOM: dict[type, bool] = {}
_HOOKS = ("__getstate__", "__setstate__", "__reduce__", "__reduce_ex__")
# Values whose identity a restore does not keep anyway (pickle writes equal ones alike).
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})


def custom_pickled(t: type) -> bool:
    """Whether instances of ``t`` (a class made by a class statement) are pickled by a
    ``__getstate__``, ``__setstate__``, ``__reduce__`` or ``__reduce_ex__`` that a class of the
    application defines, or by a reducer registered for it with ``copyreg`` (not the standard
    library's rules, which keep their own fields). Cached until a reducer is registered
    (``forget``)."""
    known = _CUSTOM.get(t)
    if known is None:
        known = False
        if t.__flags__ & HEAPTYPE and t in copyreg.dispatch_table:
            known = _application(t)
        elif t.__flags__ & HEAPTYPE:
            for name in _HOOKS:
                for k in t.__mro__:
                    if name in k.__dict__:
                        known = bool(k.__flags__ & HEAPTYPE) and _application(k)
                        break
                if known:
                    break
        if len(_CUSTOM) > 4096:
            _CUSTOM.clear()
        _CUSTOM[t] = known
    return known


def _application(k: type) -> bool:
    """Whether class ``k`` is the application's: of one of its modules, or made by code run
    with no module (``exec`` of the application's source, a script's class statement)."""
    name = k.__module__
    return name == "builtins" or name not in sys.modules or _app_module(name)


def forget() -> None:
    """Forget which classes are pickled by their own rule (a reducer was registered)."""
    _CUSTOM.clear()


# Per class: the descriptors of its __slots__, by name.
_SLOTS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _slots(t: type) -> tuple[tuple[str, Any], ...]:
    known = _SLOTS.get(t)
    if known is None:
        found = []
        for name in slot_names(t):
            for k in t.__mro__:
                desc = k.__dict__.get(name)
                if desc is not None:
                    if isinstance(desc, types.MemberDescriptorType):
                        found.append((name, desc))
                    break
        known = tuple(found)
        if len(_SLOTS) > 4096:
            _SLOTS.clear()
        _SLOTS[t] = known
    return known


Link = tuple[Any, str, str, Any]  # (instance, "d" or "s", attribute name, object)


def links(instances: list[Any], memo: Any, sets: dict[int, Any] | None = None) -> list[Link]:
    """For ``instances`` (custom pickled, written by a pickler whose ``memo`` is given, and
    ``sets`` the sets it wrote as references, by id): each attribute (of the ``__dict__``: "d",
    of the ``__slots__``: "s") whose object the pickler wrote too, or that another of them holds
    too, to be set again at the restore (the object written with the links where the pickler
    did not)."""
    out: list[Link] = []
    seen: set[int] = set()
    apart: dict[int, list[Link]] = {}  # objects not written, by the attributes holding them
    get = memo.get
    plain = _PLAIN

    def place(link: Link) -> None:
        v = link[3]
        entry = get(id(v))
        if entry is not None and entry[1] is v or sets and sets.get(id(v)) is v:
            out.append(link)  # written by the pickler: linked again at the restore
        else:
            apart.setdefault(id(v), []).append(link)

    for obj in instances:
        i = id(obj)
        if i in seen or i not in memo:
            continue
        seen.add(i)
        try:
            d = object.__getattribute__(obj, "__dict__")
        except AttributeError:
            d = None
        if type(d) is dict:
            for k, v in d.items():
                if type(v) not in plain and type(k) is str:
                    place((obj, "d", k, v))
        for k, desc in _slots(type(obj)):
            try:
                v = desc.__get__(obj, None)
            except AttributeError:
                continue
            if type(v) not in plain:
                place((obj, "s", k, v))
    for held in apart.values():
        if len(held) > 1:
            out.extend(held)
    return out


def relink(found: list[Link]) -> None:
    """At the restore: set each recorded attribute of a restored instance to the restored
    object, where the instance's own rule gave it another (or none)."""
    for obj, kind, name, v in found:
        try:
            if kind == "d":
                d = object.__getattribute__(obj, "__dict__")
                if type(d) is dict and d.get(name, _NONE) is not v:
                    d[name] = v
            elif _slot(obj, name) is not v:
                object.__setattr__(obj, name, v)
        except Exception:  # an instance its rule rebuilt as another kind of object
            continue


_NONE: Any = object()


def _slot(obj: Any, name: str) -> Any:
    try:
        return object.__getattribute__(obj, name)
    except AttributeError:
        return _NONE
