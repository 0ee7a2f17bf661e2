"""A deque iterator's mutation check, read and set again, so a restore keeps it.

A ``collections.deque`` counts its mutations in a ``state`` field; its iterators (forward and
reversed) keep the ``state`` they were made at and the number of items they have still to yield
(``counter``), and their next ``next()`` raises ``RuntimeError: deque mutated during iteration``
when the deque's ``state`` differs from theirs. The iterators' own ``__reduce__`` keeps neither
(only the deque and ``len(deque) - counter``), so after a restore an iterator of a deque changed
since it was made would go on yielding. This module reads both fields and writes them into a
restored iterator.

It goes through ``ctypes``, by the layouts of CPython 3.11 to 3.13 (``Modules/_collectionsmodule.c``):
``dequeobject`` is the variable-size object header, then ``leftblock``, ``rightblock``,
``leftindex``, ``rightindex``, ``state``, ``maxlen``; ``dequeiterobject`` is the object header,
then ``b``, ``index``, ``deque``, ``state``, ``counter`` (all word-sized). The layouts are checked
against the running interpreter when this module loads (deques and iterators of known content
read back, mutated and read again); on another interpreter, or a free-threaded build, ``SUPPORTED``
is False and a checkpoint refuses a deque iterator rather than restore one that behaves otherwise.
"""

from __future__ import annotations

import ctypes
from collections import deque
from typing import Any

from . import _layouts

_WORD = ctypes.sizeof(ctypes.c_ssize_t)
_MASK = (1 << (8 * _WORD)) - 1  # ``state`` is a size_t: it wraps
# dequeobject after PyObject_VAR_HEAD: leftblock, rightblock, leftindex, rightindex, state, maxlen.
_DEQUE = ctypes.c_ssize_t * 6
_DEQUE_OFFSET = object.__basicsize__ + _WORD  # PyObject_VAR_HEAD: ob_refcnt, ob_type, ob_size
# dequeiterobject after PyObject_HEAD: b, index, deque, state, counter.
_ITER = ctypes.c_ssize_t * 5
_ITER_OFFSET = object.__basicsize__
_STATE_AT, _COUNTER_AT = 3, 4  # indexes in _ITER

ITER_TYPES: tuple[type, ...] = (type(iter(deque())), type(reversed(deque())))


def deque_state(d: deque[Any]) -> int:
    """The mutation count of deque ``d`` (``dequeobject.state``)."""
    return _DEQUE.from_address(id(d) + _DEQUE_OFFSET)[4] & _MASK


def iterator_state(it: Any) -> tuple[deque[Any], int, int]:
    """A deque iterator's (deque, mutations of the deque since the iterator was made, items it
    has still to yield). The deque is the one ``__reduce__`` names, checked against the pointer."""
    d = it.__reduce__()[1][0]
    fields = _ITER.from_address(id(it) + _ITER_OFFSET)
    if fields[2] != id(d):
        raise RuntimeError("the deque iterator's deque pointer is not its deque")
    return d, (deque_state(d) - fields[_STATE_AT]) & _MASK, fields[_COUNTER_AT]


def restore(kind: type, d: deque[Any], mutations: int, counter: int) -> Any:
    """An iterator of type ``kind`` over ``d`` with ``counter`` items still to yield, made
    ``mutations`` deque mutations ago (so its next ``next()`` raises as natively when not 0)."""
    if not mutations:
        # Positioned by the iterator's own constructor, which steps it ``len(d) - counter`` times.
        return kind(d, len(d) - counter)
    it = kind(d, 0)
    fields = _ITER.from_address(id(it) + _ITER_OFFSET)
    fields[_STATE_AT] = ctypes.c_ssize_t((deque_state(d) - mutations) & _MASK).value
    fields[_COUNTER_AT] = counter
    return it


def _self_test() -> bool:
    """Read back deques and iterators of known state; False if the layout is another."""
    if not _layouts.known():  # (free-threaded builds lay objects out otherwise)
        return False
    try:
        if object.__basicsize__ != 2 * _WORD or ITER_TYPES[0].__basicsize__ != _ITER_OFFSET + 5 * _WORD:
            return False
        d = deque([1, 2, 3], maxlen=7)
        head = _DEQUE.from_address(id(d) + _DEQUE_OFFSET)
        size = ctypes.c_ssize_t.from_address(id(d) + _DEQUE_OFFSET - _WORD).value
        if size != 3 or head[5] != 7:
            return False
        if _DEQUE.from_address(id(deque()) + _DEQUE_OFFSET)[5] != -1:  # no maxlen
            return False
        for kind in ITER_TYPES:
            it = kind(d, 0)
            next(it)
            base, moved, left = iterator_state(it)
            if base is not d or moved != 0 or left != 2:
                return False
            before = deque_state(d)
            d.append(4)
            d.pop()
            if deque_state(d) == before or iterator_state(it)[1:] != ((deque_state(d) - before) & _MASK, 2):
                return False
            again = restore(kind, d, iterator_state(it)[1], 2)
            if iterator_state(again)[1:] != iterator_state(it)[1:]:
                return False
            for x in (it, again):
                try:
                    next(x)
                    return False
                except RuntimeError:
                    pass
            fresh = restore(kind, d, 0, 2)
            if list(fresh) != (list(d)[1:] if kind is ITER_TYPES[0] else list(d)[-2::-1]):
                return False
        return True
    except Exception:
        return False


SUPPORTED = _self_test()

__all__ = ["ITER_TYPES", "SUPPORTED", "deque_state", "iterator_state", "restore"]
