"""An ``OrderedDict`` iterator's state, read and set again, so a restore keeps it.

One iterator type serves ``iter(od)``, ``od.keys()``, ``od.values()``, ``od.items()`` and their
``reversed``; which it is, and where it is, are not visible from Python (its ``__reduce__`` gives
only a list of what it has still to yield). Natively it holds its OrderedDict, the size and the
mutation count (``od_state``: bumped whenever a key is added, removed or moved) it was made at,
and the key it yields next; its next step raises ``RuntimeError`` when the OrderedDict was
mutated or changed size since, and ``KeyError`` when that next key was removed behind its back.
This module reads those fields and writes them into a new iterator of the same kind over the
restored OrderedDict, so the restored one yields what is left and raises where the native one
would.

It goes through ``ctypes``, by the layouts of CPython 3.11 to 3.13 (``Objects/odictobject.c``):
``odictiterobject`` is the object header, then ``kind`` (an int, padded to a word), ``di_odict``,
``di_size``, ``di_state``, ``di_current``, ``di_result``; ``PyODictObject`` is a dict, then
``od_first``, ``od_last``, ``od_fast_nodes``, ``od_fast_nodes_size``, ``od_resize_sentinel``,
``od_state``. The layouts are checked against the running interpreter when this module loads
(iterators of known state read back and made again); where they do not hold ``SUPPORTED`` is
False and a checkpoint refuses such an iterator rather than restore one that behaves otherwise.
"""

from __future__ import annotations

import builtins
import ctypes
from collections import OrderedDict
from typing import Any

from . import _layouts

_WORD = ctypes.sizeof(ctypes.c_ssize_t)
_MASK = (1 << (8 * _WORD)) - 1  # ``od_state`` and ``di_state`` are size_t: they wrap
ITER_TYPE: type = type(iter(OrderedDict()))
# odictiterobject after PyObject_HEAD: kind (int, padded), di_odict, di_size, di_state,
# di_current, di_result.
_ITER = ctypes.c_ssize_t * 6
_KIND, _ODICT, _SIZE, _STATE, _CURRENT = range(5)
_OD_STATE = dict.__basicsize__ + 5 * _WORD  # after the dict: five words, then od_state

REVERSED, KEYS, VALUES = 1, 2, 4
ITEMS = KEYS | VALUES
# kind -> how to make an iterator of that kind over an OrderedDict (the class's own methods,
# not a subclass's)
MAKERS: dict[int, Any] = {
    KEYS: lambda od: builtins.iter(OrderedDict.keys(od)),
    VALUES: lambda od: builtins.iter(OrderedDict.values(od)),
    ITEMS: lambda od: builtins.iter(OrderedDict.items(od)),
    KEYS | REVERSED: lambda od: reversed(OrderedDict.keys(od)),
    VALUES | REVERSED: lambda od: reversed(OrderedDict.values(od)),
    ITEMS | REVERSED: lambda od: reversed(OrderedDict.items(od)),
}


def _fields(it: Any) -> Any:
    return _ITER.from_address(id(it) + object.__basicsize__)


def od_state(od: OrderedDict[Any, Any]) -> int:
    """The mutation count of ``od`` (``od_state``)."""
    return ctypes.c_size_t.from_address(id(od) + _OD_STATE).value


def _object_at(address: int) -> Any:
    return ctypes.cast(ctypes.c_void_p(address), ctypes.py_object).value


def iterator_state(it: Any) -> tuple[int, Any, int, int, tuple[Any, ...]]:
    """``(kind, the OrderedDict or None once it let go of it, the size it checks, the mutations
    of the OrderedDict since it was made, (the key it yields next,) or () at the end)``."""
    f = _fields(it)
    kind = ctypes.c_int.from_address(id(it) + object.__basicsize__).value
    od = _object_at(f[_ODICT]) if f[_ODICT] else None
    mutations = (od_state(od) - f[_STATE]) & _MASK if od is not None else 0
    current = (_object_at(f[_CURRENT]),) if f[_CURRENT] else ()
    return kind, od, f[_SIZE], mutations, current


def restore(kind: int, od: Any, size: int, mutations: int, current: tuple[Any, ...]) -> Any:
    """An iterator of ``kind`` over ``od`` that checks ``size``, made ``mutations`` mutations of
    ``od`` ago, yielding ``current[0]`` next (at its end if ``current`` is empty); over no
    OrderedDict (``od`` None): one that is exhausted."""
    if od is None:
        it = MAKERS[kind](OrderedDict())
        builtins.next(it, None)  # lets go of the OrderedDict, as the native one did
        return it
    it = MAKERS[kind](od)
    f = _fields(it)
    f[_SIZE] = size
    f[_STATE] = ctypes.c_ssize_t((od_state(od) - mutations) & _MASK).value
    old = f[_CURRENT]
    if current:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(current[0]))
        f[_CURRENT] = id(current[0])
    else:
        f[_CURRENT] = 0
    if old:
        ctypes.pythonapi.Py_DecRef(ctypes.c_void_p(old))
    return it


def _self_test() -> bool:
    """Read back iterators of known state and make them again; False if the layout is another."""
    if not _layouts.known():  # (free-threaded builds lay objects out otherwise)
        return False
    try:
        if ITER_TYPE.__basicsize__ != object.__basicsize__ + 6 * _WORD:
            return False
        if OrderedDict.__basicsize__ < _OD_STATE + 3 * _WORD:
            return False
        od = OrderedDict.fromkeys("abc", 0)
        before = od_state(od)
        od["d"] = 0
        od.move_to_end("a")
        if od_state(od) == before or od_state(OrderedDict()) != 0:
            return False
        for kind, make in MAKERS.items():
            it = make(od)
            builtins.next(it)
            keys = list(od)[:: -1 if kind & REVERSED else 1]
            k, base, size, moved, current = iterator_state(it)
            if (k, size, moved, len(current)) != (kind, 4, 0, 1) or base is not od or current[0] is not keys[1]:
                return False
            again = restore(kind, od, size, moved, current)
            if list(again) != list(it) or iterator_state(again)[1:] != (None, 4, 0, ()):
                return False
        it = iter(od)
        builtins.next(it)
        od.move_to_end("b")
        state = iterator_state(it)
        if state[3] == 0:
            return False
        for x in (it, restore(*state)):
            try:
                builtins.next(x)
                return False
            except RuntimeError:
                pass
        return True
    except Exception:
        return False


SUPPORTED = _self_test()

__all__ = ["ITER_TYPE", "MAKERS", "SUPPORTED", "iterator_state", "od_state", "restore"]
