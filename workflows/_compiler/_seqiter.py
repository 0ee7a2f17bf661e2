"""Iterators of lists, bytearrays and arrays (and ``reversed`` over a list) restored at the
position they had.

Such an iterator is its sequence and an index. Natively the index stays where it is when the
sequence shrinks below it, so the iterator goes on from there if the sequence grows back
(``xs.clear()``, then ``xs.extend(...)``: a ``for`` loop over ``xs`` resumes at its old index).
Their own ``__setstate__`` clamps the index to the sequence's length at the restore, which moves
such an iterator back to the new end: a restored ``for`` loop would visit other items. The same
happens to any iterator rebuilt while its sequence is being rebuilt (a list that holds its own
iterator is still empty then).

So the index is written as it was. ``__setstate__`` sets it when it is in range; otherwise it is
written through ``ctypes``, by the layouts of CPython 3.11 to 3.13 (``Objects/listobject.c``,
``bytearrayobject.c``, ``Modules/arraymodule.c``: the object header, then the index, a word).
The layout is checked against the running interpreter when this module loads; where it does not
hold (another interpreter, a free-threaded build) ``SUPPORTED`` is False, and a checkpoint refuses
an iterator whose index a restore would clamp rather than restore one that yields other items.
"""

from __future__ import annotations

import array
import builtins
import ctypes
import gc
import sys
import sysconfig
from typing import Any

_OFFSET = object.__basicsize__  # after PyObject_HEAD: the index (Py_ssize_t)
# Each iterator type, and how its sequence's class makes one (its own, not a subclass's
# ``__iter__``, which may make another kind of iterator).
_MAKERS: dict[type, Any] = {
    type(iter([])): list.__iter__,
    type(reversed([])): list.__reversed__,
    type(iter(bytearray())): bytearray.__iter__,
    type(iter(array.array("b"))): array.array.__iter__,
}
TYPES: tuple[type, ...] = tuple(_MAKERS)


def _index(it: Any) -> ctypes.c_ssize_t:
    return ctypes.c_ssize_t.from_address(id(it) + _OFFSET)


def _layout_holds() -> bool:
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return False
    try:
        for make, seq in ((builtins.iter, [1, 2, 3]), (reversed, [1, 2, 3]),
                          (builtins.iter, bytearray(b"abc")), (builtins.iter, array.array("b", [1, 2, 3]))):
            it = make(seq)
            next(it)
            field = _index(it)
            if field.value != it.__reduce__()[2]:
                return False
            field.value = 7
            if it.__reduce__()[2] != 7 or list(it):  # past the end: exhausted
                return False
        return True
    except Exception:
        return False


SUPPORTED = _layout_holds()


def _in_range(make: Any, seq: Any, index: int) -> bool:
    """True if ``__setstate__(index)`` keeps ``index`` as it is on ``seq`` now."""
    if make is list.__reversed__:
        return -1 <= index <= len(seq) - 1
    return 0 <= index <= len(seq)


def reduce_seq_iter(it: Any) -> Any:
    rv = it.__reduce__()
    if len(rv) < 3:
        return rv  # exhausted: an iterator over nothing
    _, (seq,), index = rv
    make = _MAKERS[type(it)]
    if not SUPPORTED and not _in_range(make, seq, index):
        raise RuntimeError(
            f"an iterator of a {type(seq).__name__} that shrank below its position (index {index}, "
            f"length {len(seq)}) cannot be restored at that position on this interpreter "
            f"({sys.implementation.name} {sys.version.split()[0]}); iterate over a copy "
            "(list(xs)), or do not shrink the sequence while it is iterated"
        )
    return (restore_seq_iter, (make, seq, index))


def reduce_module_seq_iter(it: Any, order: tuple[list[str], str]) -> Any:
    """An iterator of a list of module data (``for h in HANDLERS``), with the fingerprints of
    the list's items (``_pickle_modules.order_of``): a module may build such a list in an order
    of its own process (from a set of strings), so that in another process the index would go
    on over another order, visiting some items twice and others never."""
    rv = reduce_seq_iter(it)
    if rv[0] is not restore_seq_iter:
        return rv
    from ._pickle_modules import PROCESS

    return (restore_module_seq_iter, (*rv[1], PROCESS, order[0], order[1]))


def restore_module_seq_iter(
    make: Any, seq: Any, index: int, process: str, fps: list[str], digest: str
) -> Any:
    """``restore_seq_iter``; but in another process, where the module's list holds the same
    items (by fingerprint) in another order, an iterator over the items it had still to visit,
    in the order they had (this process's objects): the loop goes on as it would have."""
    from ._pickle_modules import reordered

    if _in_range(make, seq, index):
        backwards = make is list.__reversed__
        todo = reordered(
            seq, "i", process, fps, digest, *((0, index + 1) if backwards else (index, len(fps)))
        )
        if todo is not None:
            return reversed(todo) if backwards else Reordered(todo, seq, len(fps), "list")
    return restore_seq_iter(make, seq, index)


class Reordered:
    """An iterator of a container of module data restored where the module built it in another
    order (``restore_module_seq_iter``, ``_pickle_iters.restore_module_deque_iter``): it yields
    the items it had still to visit (``todo``, this process's objects), then, over a list, the
    items appended to it since (from ``index``, the list's length at the checkpoint), as the
    list's own iterator would; over a deque, one that changed size raises as natively."""

    __slots__ = ("_todo", "_seq", "_index", "_kind")

    def __init__(self, todo: list[Any], seq: Any, index: int, kind: str) -> None:
        self._todo, self._seq, self._index, self._kind = list(todo), seq, index, kind

    def __iter__(self) -> Reordered:
        return self

    def __next__(self) -> Any:
        seq = self._seq
        if seq is None:
            raise StopIteration
        if self._kind == "deque" and len(seq) != self._index:
            self._seq = None
            raise RuntimeError("deque mutated during iteration")
        if self._todo:
            return self._todo.pop(0)
        if self._kind == "list" and self._index < len(seq):
            self._index += 1
            return seq[self._index - 1]
        self._seq = None  # exhausted for good, as natively
        raise StopIteration

    def __length_hint__(self) -> int:
        if self._seq is None:
            return 0
        extra = len(self._seq) - self._index if self._kind == "list" else 0
        return len(self._todo) + max(extra, 0)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Reordered, (self._todo, self._seq, self._index, self._kind))


def restore_seq_iter(make: Any, seq: Any, index: int) -> Any:
    """An iterator ``make(seq)`` at ``index``, as it was (past the end of ``seq`` now, too).
    ``make``: how the sequence's base class makes one (``list.__iter__``...)."""
    it = make(seq)
    if _in_range(make, seq, index):
        it.__setstate__(index)
    elif SUPPORTED:
        _index(it).value = index
    else:
        raise RuntimeError(
            f"an iterator of a {type(seq).__name__} at index {index} (length {len(seq)} now) "
            f"cannot be restored at that position on this interpreter ({sys.implementation.name} "
            f"{sys.version.split()[0]})"
        )
    return it


# --------------------------------------------------------------------------------------------
# memoryview iterators

MEMORY_ITER: type = type(iter(memoryview(b"")))


def _memory_layout_holds() -> bool:
    """Whether a memoryview iterator is laid out as CPython 3.11 to 3.13 lay it out
    (``Objects/memoryobject.c``: the object header, the index, the memoryview, all words)."""
    if not SUPPORTED or MEMORY_ITER.__basicsize__ < _OFFSET + 2 * ctypes.sizeof(ctypes.c_ssize_t):
        return False
    try:
        mv = memoryview(b"abc")
        it = builtins.iter(mv)
        next(it)
        seq = ctypes.c_ssize_t.from_address(id(it) + _OFFSET + ctypes.sizeof(ctypes.c_ssize_t))
        return _index(it).value == 1 and seq.value == id(mv) and list(it) == [98, 99]
    except Exception:
        return False


MEMORY_SUPPORTED = _memory_layout_holds()


def _memory_view_of(it: Any) -> memoryview | None:
    """The memoryview ``it`` iterates (None once it is exhausted: it lets go of it then)."""
    for r in gc.get_referents(it):
        if type(r) is memoryview:
            return r
    return None


def reduce_memory_iter(it: Any) -> Any:
    """An iterator of a memoryview (``iter(memoryview(b))``): its view (which a checkpoint keeps
    as a view of the same object) and its index, read by the layout; restored by stepping a new
    iterator of that view as far."""
    mv = _memory_view_of(it)
    if mv is None:
        return (_exhausted_memory_iter, ())
    if not MEMORY_SUPPORTED:
        raise RuntimeError(
            "a memoryview iterator cannot be checkpointed with its position on this interpreter "
            f"({sys.implementation.name} {sys.version.split()[0]}); iterate over "
            "mv.tolist() instead, or del the iterator before the await"
        )
    try:
        mv.obj  # noqa: B018 - raises ValueError if the view was released
    except ValueError:
        raise RuntimeError(
            "an iterator of a released memoryview (its next step raises ValueError natively) "
            "cannot be checkpointed; del the iterator before the await"
        ) from None
    return (restore_memory_iter, (mv, _index(it).value))


def _exhausted_memory_iter() -> Any:
    it = builtins.iter(memoryview(b""))
    next(it, None)
    return it


def restore_memory_iter(mv: memoryview, index: int) -> Any:
    """An iterator of ``mv`` that has yielded ``index`` items."""
    it = builtins.iter(mv)
    for _ in range(index):
        next(it)
    return it
