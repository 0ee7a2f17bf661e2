"""Instances whose ``__dict__`` is held apart from them (``d = vars(obj)``, ``obj.__dict__`` in a
local or a container): the restore gives the instance that very dict back as its ``__dict__``.

pickle writes such an instance's state as its ``__dict__`` (the same object, so shared with any
other holder of it in the pickle's memo), and its ``BUILD`` copies that state into the new
instance's own dict: the holder then has a dict the instance no longer sees. For an instance whose
``__dict__`` is held by something else, and whose state is that dict, the checkpoint writes a
state setter that makes the restored state dict the instance's ``__dict__`` (what it was).
Where that cannot be done (a dict that cannot be assigned, a class whose own ``__getstate__``
writes another state), the dict is written as a reference to the instance with the dict's items
(``dict_of``): the instance comes back by its own rule, then its own dict is given those items.
"""

from __future__ import annotations

import sys
from typing import Any


def _count(obj: Any) -> int:
    d = object.__getattribute__(obj, "__dict__")
    return sys.getrefcount(d)


class _Probe:
    pass


# The references to an instance's __dict__ that shared_dict counts when nothing else holds it
# (the instance's own, the local, getrefcount's argument), measured here (by _count, which
# counts as shared_dict does) so that it holds for this Python.
_BASE = _count(_Probe())


def shared_dict(obj: Any) -> dict[str, Any] | None:
    """``obj.__dict__`` if something other than ``obj`` holds it (a local, a container, a pickle's
    memo), else None. A dict held only by its instance is written as pickle writes it."""
    try:  # counted as _count counts
        d = object.__getattribute__(obj, "__dict__")
    except Exception:
        return None
    if type(d) is not dict or sys.getrefcount(d) <= _BASE:
        return None
    return d


def assignable(obj: Any, d: dict[str, Any]) -> bool:
    """Whether ``d`` (its ``__dict__``) can be given to ``obj`` as its ``__dict__`` (not to a
    SimpleNamespace, whose dict is its own)."""
    try:
        object.__setattr__(obj, "__dict__", d)
    except Exception:
        return False
    return True


def dict_of(owner: Any, items: tuple[tuple[Any, Any], ...] | None) -> dict[str, Any]:
    """The restore of an instance's ``__dict__`` held apart from it that could not come back as
    its state (a SimpleNamespace's, or one of a class whose own ``__getstate__`` decides its
    state): the restored instance's own dict, holding ``items`` (what it held at the
    checkpoint; None where this is a further reference to it)."""
    d: dict[str, Any] = object.__getattribute__(owner, "__dict__")
    if items is not None:
        d.clear()
        d.update(items)
    return d


def adopt_state(obj: Any, state: Any) -> None:
    """The state setter of an instance whose ``__dict__`` is held apart: ``state`` (a dict, or
    ``(dict, slots)``) becomes its ``__dict__`` itself; slots are set as pickle sets them."""
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state is not None:
        object.__setattr__(obj, "__dict__", state)
    if slots:
        for k, v in slots.items():
            object.__setattr__(obj, k, v)


def with_adopted_dict(obj: Any, d: dict[str, Any], rv: Any) -> Any:
    """``rv`` (the reduce value of ``obj``) with ``adopt_state`` as its state setter, where its
    state is ``d`` (the instance's ``__dict__``); ``rv`` unchanged otherwise (a class whose own
    ``__getstate__``/``__reduce__`` decides its state)."""
    if not isinstance(rv, tuple) or len(rv) < 3:
        return rv
    state = rv[2]
    if not (state is d or isinstance(state, tuple) and len(state) == 2 and state[0] is d):
        return rv
    rest = tuple(rv[3:5]) + (None,) * (5 - len(rv[:5]))
    return (rv[0], rv[1], state, rest[0], rest[1], adopt_state)


# Subclasses of a standard library class whose own reduce leaves the instance's __dict__ out
# (Counter, defaultdict, Fraction, Decimal, datetime...): pickle gives their instances back
# without the attributes user code set on them. Per class: whether its reduce is such a one.
_DROPS: dict[type, bool] = {}
_STDLIB = frozenset(sys.stdlib_module_names) | {"builtins"}


def _reduce_provider(t: type) -> type | None:
    for k in t.__mro__:
        if "__reduce_ex__" in k.__dict__ or "__reduce__" in k.__dict__:
            return k
    return None


def _state_provider(t: type) -> type | None:
    """The class whose rule writes ``t``'s instances: the first with a reduce or a
    ``__getstate__`` of its own (``object``'s: the instance's dict and slots)."""
    for k in t.__mro__:
        if k is object:
            return k
        if "__reduce_ex__" in k.__dict__ or "__reduce__" in k.__dict__ or "__getstate__" in k.__dict__:
            return k
    return None


def may_drop_dict(t: type) -> bool:
    """Whether ``t`` is a user subclass of a standard library class that has its own reduce
    (cached per class); its instances' reduce is then checked for a missing state."""
    drops = _DROPS.get(t)
    if drops is None:
        k = _state_provider(t)
        drops = (
            k is not None
            and k is not object
            and k is not t
            and (k.__module__ or "").partition(".")[0] in _STDLIB
            and (t.__module__ or "").partition(".")[0] not in _STDLIB
        )
        if len(_DROPS) > 4096:
            _DROPS.clear()
        _DROPS[t] = drops
    return drops


def with_instance_dict(obj: Any, rv: Any) -> Any:
    """``rv`` (the reduce value of ``obj``) with ``obj``'s attributes in its state, where the
    base class's reduce left them out; ``rv`` unchanged where its state holds them or there are
    none. A state the base's reduce writes (a ``Random``'s generator, an ``Element``'s tag and
    children) is set as pickle sets it, then the attributes (``set_state_and_attributes``)."""
    if not isinstance(rv, tuple) or len(rv) < 2:
        return rv
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:
        return rv
    if type(d) is not dict or not d:
        return rv
    state = rv[2] if len(rv) > 2 else None
    setter = rv[5] if len(rv) > 5 else None
    rest = tuple(rv[3:5]) + (None,) * (5 - len(rv[:5]))
    if state is None and setter is None and assignable(obj, d):  # (one that a restore can set)
        return (rv[0], rv[1], d, rest[0], rest[1], adopt_state)
    if state is d or isinstance(state, tuple) and len(state) == 2 and state[0] is d:
        return rv
    if type(state) is dict and all(k in state for k in d):
        return rv
    return (rv[0], rv[1], (state, setter, d), rest[0], rest[1], set_state_and_attributes)


def set_state_and_attributes(obj: Any, packed: tuple[Any, Any, dict[str, Any]]) -> None:
    """The state setter of ``with_instance_dict``: the base's state set as pickle sets it (by
    its own state setter, or ``__setstate__``, or into the instance's dict and slots), then the
    instance's attributes."""
    state, setter, attributes = packed
    if setter is not None:
        setter(obj, state)
    elif state is not None:
        setstate = getattr(obj, "__setstate__", None)
        if setstate is not None:
            setstate(state)
        else:
            slots = None
            if isinstance(state, tuple) and len(state) == 2:
                state, slots = state
            if state:
                object.__getattribute__(obj, "__dict__").update(state)
            if slots:
                for k, v in slots.items():
                    object.__setattr__(obj, k, v)  # not the class's own __setattr__
    object.__getattribute__(obj, "__dict__").update(attributes)


def rebuild_as_base(t: type, base: type, args: tuple[Any, ...]) -> Any:
    """An instance of ``t`` made from ``args`` as ``base`` makes one (its ``__new__`` and
    ``__init__``), not through the ``__init__``/``__new__`` that ``t`` has of its own."""
    new: Any = base.__new__
    obj = new(t) if new is object.__new__ else new(t, *args)
    init = getattr(base, "__init__")  # noqa: B009 - the class's, looked up on the class
    if init is not object.__init__:
        init(obj, *args)
    return obj


def as_base(t: type, rv: Any) -> Any:
    """``rv`` made with ``rebuild_as_base`` where it calls ``t`` itself with the arguments of the
    standard library base's reduce (``Counter``: ``cls(dict(self))``) and ``t`` has an
    ``__init__`` or ``__new__`` of its own, which would take them otherwise (``LootBag(owner,
    **counts)`` would get the counts as its owner, or fail at the restore)."""
    if not isinstance(rv, tuple) or len(rv) < 2 or rv[0] is not t or type(rv[1]) is not tuple:
        return rv
    if _reduce_provider(t) is None:
        return rv
    # The standard library's class nearest to t makes the instances its reduce describes (the
    # reduce may be an ancestor's: ``IPv4Address`` is made by its own ``__init__`` from what
    # ``_BaseAddress.__reduce__`` gives).
    base = next((k for k in t.__mro__ if (k.__module__ or "").partition(".")[0] in _STDLIB), object)
    for k in t.__mro__:
        if k is base:
            return rv  # t makes its instances as its base does
        if "__init__" in k.__dict__ or "__new__" in k.__dict__:
            break
    return (rebuild_as_base, (t, base, rv[1]), *rv[2:])
