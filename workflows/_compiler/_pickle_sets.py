"""Sets in a checkpoint: the table a set is recorded with, frozensets whose order a rebuild would
change, and the rebuild of sets of older checkpoints (their order and table size only).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from . import _settable

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
