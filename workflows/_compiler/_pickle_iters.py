"""Iterators in a checkpoint: dict, dict-view, set and deque iterators kept as their container
and a position (``LiveIter`` for a compiled ``for`` loop's).
"""

from __future__ import annotations

import builtins
import collections
import gc
import itertools
import operator
import sys
import types
from collections import OrderedDict
from typing import Any

from . import _dequestate, _odictstate, _settable
from ._pickle_modules import reordered
from ._seqiter import Reordered

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
                kind = self._kind
                if kind == "values":
                    return c[x]
                if kind == "items":
                    return (x, c[x])
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


def restore_module_live_iter(
    c: Any, kind: str, used: int, pos: int, rest: Any, process: str, fps: list[str], digest: str
) -> LiveIter:
    """``_restore_live_iter`` of a loop over a dict of module data; in another process, where
    the module built that dict here with the same keys (by fingerprint) in another order, the
    loop goes on over the keys it had still to visit, in the order they had (not by its count
    of keys visited, which would visit some twice and others never)."""
    li = _restore_live_iter(c, kind, used, pos, rest)
    if rest is None and used == len(c) == len(fps):
        keys = reordered(c, "K", process, fps, digest, pos, len(fps))
        if keys is not None:
            li._it = None
            li._rest = keys
    return li


def restore_module_dict_iter(
    kind: str, c: Any, pos: int, process: str, fps: list[str], digest: str
) -> Any:
    """``_restore_native_dict_iter`` of an iterator of a dict of module data (``reversed(D)``,
    ``iter(D.items())``); in another process where the module built that dict in another order,
    one over the keys it had still to visit, as ``restore_module_live_iter``."""
    n = len(fps)
    if len(c) == n:
        backwards = kind.startswith("reversed ")
        keys = reordered(c, "K", process, fps, digest, *((0, n - pos) if backwards else (pos, n)))
        if keys is not None:
            if backwards:
                keys.reverse()
            li = LiveIter(None, c, kind.removeprefix("reversed "), n)
            li._rest = keys
            return li
    return _restore_native_dict_iter(kind, c, pos)


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


_NOT_FOLLOWED = (type, types.ModuleType, types.FunctionType, types.CodeType)


def _holds(c: Any, it: Any) -> bool:
    """Whether container ``c`` holds ``it`` among its items, or in what they hold."""
    seen = {id(c)}
    todo = [c]
    while todo:
        for r in gc.get_referents(todo.pop()):
            if r is it:
                return True
            if id(r) not in seen and not isinstance(r, _NOT_FOLLOWED):
                seen.add(id(r))
                todo.append(r)
    return False


def _refuse_held_by_its_container(c: Any, it: Any) -> None:
    """A restore makes an iterator before the items of a container that holds it are back
    (pickle puts them in once they are all written): it could not be put at its position."""
    if _holds(c, it):
        name = type(c).__name__
        raise RuntimeError(
            f"the {name} it iterates holds the iterator itself (among its items, or in what they "
            f"hold): a restore makes the iterator before the {name}'s items are back, so it "
            f"cannot be put at its position; hold the iterator outside its {name}"
        )


def _reduce_native_iter(it: Any) -> Any:
    t = type(it)
    if t is _ODictIter:
        return _reduce_odict_iter(it)
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
    _refuse_held_by_its_container(c, it)
    return (_restore_native_dict_iter, (kind, c, len(c) - len(rest)))


def _reduce_odict_iter(it: Any) -> Any:
    """An OrderedDict iterator (``iter(od)``, ``od.items()``, ``reversed(od)``...): its kind,
    its OrderedDict, the size it checks, the mutations of the OrderedDict since it was made and
    the key it yields next (``_odictstate``): the next key by its place in the OrderedDict
    when it is one of its keys (the restored OrderedDict's own key object), else itself."""
    if not _odictstate.SUPPORTED:
        raise RuntimeError(
            "an OrderedDict iterator cannot be checkpointed on this interpreter "
            f"({sys.implementation.name} {sys.version.split()[0]}): which of keys, values or "
            "items it yields, and whether its OrderedDict changed since it was made, cannot be "
            "read here; iterate over list(od.items()), or del the iterator before the await"
        )
    kind, od, size, mutations, current = _odictstate.iterator_state(it)
    if od is not None:
        _refuse_held_by_its_container(od, it)
    at = None
    if od is not None and current:
        for i, k in enumerate(OrderedDict.keys(od)):
            if k is current[0]:
                at, current = i, ()
                break
    return (restore_odict_iter, (kind, od, size, mutations, at, current))


def restore_odict_iter(kind: int, od: Any, size: int, mutations: int, at: int | None, current: Any) -> Any:
    """``_odictstate.restore``, with the key it yields next taken from the OrderedDict's place
    ``at`` if it was one of its keys."""
    if at is not None:
        current = (builtins.next(itertools.islice(OrderedDict.keys(od), at, None)),)
    return _odictstate.restore(kind, od, size, mutations, current)


def restore_module_odict_iter(
    kind: int, od: Any, size: int, mutations: int, at: int | None, current: Any,
    process: str, fps: list[str], digest: str,
) -> Any:
    """``restore_odict_iter`` of an iterator of an OrderedDict of module data; in another
    process, where the module built it with the same keys (by fingerprint) in another order,
    one over the keys it had still to visit, in the order they had (``restore_module_dict_iter``)."""
    n = len(fps)
    if not mutations and at is not None and size == len(od) == n:
        backwards = bool(kind & _odictstate.REVERSED)
        keys = reordered(od, "K", process, fps, digest, *((0, at + 1) if backwards else (at, n)))
        if keys is not None:
            if backwards:
                keys.reverse()
            li = LiveIter(None, od, _ODICT_KIND_NAMES[kind & ~_odictstate.REVERSED], n)
            li._rest = keys
            return li
    return restore_odict_iter(kind, od, size, mutations, at, current)


_ODICT_KIND_NAMES = {_odictstate.KEYS: "keys", _odictstate.VALUES: "values", _odictstate.ITEMS: "items"}


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
    _refuse_held_by_its_container(d, it)
    return (_restore_deque_iter, (type(it) is _dequestate.ITER_TYPES[1], d, mutations, counter))


def restore_module_deque_iter(
    reverse: bool,
    d: collections.deque[Any],
    mutations: int,
    counter: int,
    process: str,
    fps: list[str],
    digest: str,
) -> Any:
    """``_restore_deque_iter`` of an iterator of a deque of module data; in another process
    where the module built that deque in another order, one over the items it had still to
    visit, in the order they had."""
    n = len(fps)
    if not mutations and len(d) == n and 0 <= counter <= n:
        todo = reordered(d, "i", process, fps, digest, *((0, counter) if reverse else (n - counter, n)))
        if todo is not None:
            return Reordered(todo[::-1] if reverse else todo, d, n, "deque")
    return _restore_deque_iter(reverse, d, mutations, counter)


def _restore_deque_iter(
    reverse: bool, d: collections.deque[Any], mutations: int, counter: int
) -> Any:
    if not _dequestate.SUPPORTED:
        raise RuntimeError(
            "a checkpointed deque iterator cannot be restored on this interpreter "
            f"({sys.implementation.name} {sys.version.split()[0]}): its mutation check cannot be set"
        )
    return _dequestate.restore(_dequestate.ITER_TYPES[reverse], d, mutations, counter)
