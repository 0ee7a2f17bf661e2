"""A set's hash table, read and rebuilt exactly, so that a restored set behaves as the original.

A set iterates in the order of its table's slots, and where a later ``add`` lands, when the table
resizes and what ``pop`` returns depend on more than its elements: the table's size, the slots of
removed elements (dummy entries, which an ``add`` reuses and which count towards the resize), and
the ``pop`` finger. Pickle keeps none of that. So a checkpoint records the table as it is: per
slot whether it is empty, a dummy or holds an element, the elements' hashes and the finger; a
restore builds a table that is the same in every slot, with ordinary set operations only:

1. the finger: one placeholder put at slot ``finger - 1`` of a table large enough and popped
   (``clear()`` keeps the finger);
2. the size: placeholders for a few of the table's used slots (the "keepers") and junk ones are
   added, the junk removed with ``difference_update``, which resizes a table with so many dummies
   to the smallest power of two above four times what is left (two times above 50000): the size
   recorded, holding only the keepers, each at its own slot;
3. a placeholder on every other used slot (each lands on its own slot, the first it probes);
4. per element: its slot's placeholder removed (the only dummy in the table), the element added:
   every slot its probe sequence passes before that one is used (CPython only ever puts an
   element on the first free slot of its probe sequence), so it takes that dummy;
5. the placeholders left, on the slots that were dummies, removed: they are dummies again.

The placeholders hash to their slot's index and compare equal to nothing else, so no user code
runs beyond what adding the elements to a set runs anyway. The result is read back and compared
with the record; a table that cannot be rebuilt so is refused when checkpointing. A set whose
elements hash otherwise in the restoring process (``str`` and ``bytes`` under another
``PYTHONHASHSEED``; objects hashed by their address, such as a module's functions and classes,
in any other process) can only be rebuilt for the hashes it had, which that process does not give:
it is restored with the same elements in that process's own order, as the same program run twice
natively would order them (failing the restore instead would fail, at every restart, each
workflow holding a set of strings across an await); a loop over it suspended mid-way then visits
the elements it had still to visit, which the checkpoint records with its slot. Fixing
``PYTHONHASHSEED`` for every process that runs workflows makes a set of strings exact too. A set
holding an element whose hash is made from the address of an object the checkpoint copies (an
iterator, an instance without ``__hash__``) has no table to rebuild anywhere: the checkpoint
refuses it (``_pickle_sets``).

Reading the table goes through ``ctypes``, by the layout of ``PySetObject`` in CPython 3.11 to
3.13 (``Include/cpython/setobject.h``: the object header, then ``fill``, ``used``, ``mask``,
``table``, ``hash``, ``finger``), and so does reading a set iterator's position (the header,
then ``si_set``, ``si_used``, ``si_pos``, in ``Objects/setobject.c``); it only reads, and is checked against the running interpreter
when this module loads (a set of known content read back). On another interpreter ``SUPPORTED``
is False and the checkpoint refuses sets whose table is not the plain one (see ``plain``).
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
from typing import Any

from . import _layouts
from ._pickle_modules import PROCESS as PROCESS_TOKEN

_MIN = 8  # PySet_MINSIZE

EMPTY, USED, DUMMY = 0, 1, 2  # the kinds of slot

# PySetObject after PyObject_HEAD: fill, used, mask, table, hash, finger (all word-sized).
_HEAD = ctypes.c_ssize_t * 6
# setiterobject after PyObject_HEAD: si_set, si_used, si_pos (then len).
_ITER = ctypes.c_ssize_t * 3
_USED_BYTE = bytes([1])
_HEAD_OFFSET = object.__basicsize__  # PyObject_HEAD: ob_refcnt, ob_type
_ENTRY = 2 * ctypes.sizeof(ctypes.c_ssize_t)  # setentry: key, hash
_WORD = ctypes.sizeof(ctypes.c_ssize_t)
_NONZERO = bytes([0] + [1] * 255)  # bytes.translate: 1 for a byte that is not 0
_ALL_ONES = bytes([0] * 255 + [1])  # 1 for the byte 0xff
_IS_WORD = bytes([1 if b == _WORD else 0 for b in range(256)])  # 1 for the byte 8
_SUM = int.from_bytes(b"\x01" * _WORD, "little")


class Placeholder:
    """An entry that hashes to a chosen slot and is equal only to itself."""

    __slots__ = ("h",)

    def __init__(self, h: int) -> None:
        self.h = h

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return self is other


# What this process's string hashing gives (PYTHONHASHSEED, or the random seed it drew): a table
# recorded under another can only be rebuilt for the hashes it had.
SEED = hash("actorflow: the hash seed of this process")
# This process: a table recorded in another one, whose rebuild here differs, is of elements whose
# hashes are made from addresses, which no process shares with another (a class in the tuple an
# element's own ``__hash__`` hashes: ``hash((type(self), self.key))``).
PROCESS = PROCESS_TOKEN


class Table:
    """A set's table as data: its size, its finger, per slot its kind (EMPTY, USED or DUMMY),
    a digest of every slot's hash field (which the elements' hashes determine), and the string
    hash seed of the process it was read in (``SEED``), or None where some element's hash is
    made from an address (a module's function, a class, ``None`` before 3.12: the same object
    after a restore in this process, hashed otherwise in another one)."""

    __slots__ = ("size", "finger", "kinds", "hashes", "seed", "process")

    def __init__(
        self,
        size: int,
        finger: int,
        kinds: bytes,
        hashes: bytes,
        seed: int | None = SEED,
        process: str | None = PROCESS,
    ) -> None:
        self.size = size
        self.finger = finger
        self.kinds = kinds
        self.hashes = hashes
        self.seed = seed
        self.process = process

    def __eq__(self, other: object) -> bool:  # the same table (wherever it was read)
        return isinstance(other, Table) and self.record()[:4] == other.record()[:4]

    def __repr__(self) -> str:
        return (
            f"Table(size={self.size}, finger={self.finger}, used={self.kinds.count(USED)}, "
            f"dummies={self.kinds.count(DUMMY)})"
        )

    def record(self) -> tuple[Any, ...]:
        return (self.size, self.finger, self.kinds, self.hashes, self.seed, self.process)

    @classmethod
    def from_record(cls, rec: tuple[Any, ...]) -> Table:
        return cls(*rec)


def read(s: set[Any] | frozenset[Any]) -> Table:
    """The table of ``s`` (read, never written). Whole-table work is done on bytes and ints, not
    per slot in Python: a key that is not NULL marks a used or dummy slot, a hash of -1 (all
    bytes 0xff) a dummy one; multiplying by 0x0101010101010101 sums each entry's 8 key (or
    hash) bytes into its top one, with no carry between entries."""
    _fill, _used, mask, table, _hash, finger = _HEAD.from_address(id(s) + _HEAD_OFFSET)[:]
    size = mask + 1
    raw = ctypes.string_at(table, size * _ENTRY)
    n = len(raw) + _WORD
    keys = (int.from_bytes(raw.translate(_NONZERO), "little") * _SUM).to_bytes(n, "little")
    ones = (int.from_bytes(raw.translate(_ALL_ONES), "little") * _SUM).to_bytes(n, "little")
    taken = keys[_WORD - 1 :: _ENTRY][:size].translate(_NONZERO)
    dummy = ones[_ENTRY - 1 :: _ENTRY][:size].translate(_IS_WORD)
    kinds = (int.from_bytes(taken, "little") + int.from_bytes(dummy, "little")).to_bytes(size, "little")
    hashes = memoryview(raw).cast("q")[1::2].tobytes()
    return Table(size, finger, kinds, hashlib.blake2b(hashes, digest_size=16).digest())


def plain(s: set[Any] | frozenset[Any]) -> bool:
    """True if any rebuild gives ``s``'s table: the smallest table, no dummies, finger 0, and
    every element on the first slot it probes (so the order elements are added in is moot)."""
    fill, used, mask, table, _hash, finger = _HEAD.from_address(id(s) + _HEAD_OFFSET)[:]
    if mask != _MIN - 1 or fill != used or finger != 0:
        return False
    if used <= 1:
        return True
    entries = (ctypes.c_ssize_t * (2 * _MIN)).from_address(table)[:]
    for i in range(_MIN):
        if entries[2 * i] and entries[2 * i + 1] & mask != i:
            return False
    return True


def next_used(s: set[Any], start: int) -> tuple[int, int]:
    """The first used slot of ``s``'s table at or after ``start`` and how many used slots come
    before it, as a set iterator at slot ``start`` finds it; (-1, 0) if there is none."""
    kinds = read(s).kinds
    j = kinds.find(_USED_BYTE, start)
    if j < 0:
        return -1, 0
    return j, kinds.count(_USED_BYTE, 0, j)


def elements_from(s: set[Any] | frozenset[Any], slot: int) -> list[Any]:
    """The elements on the used slots of ``s``'s table at or after ``slot``, in slot order: what
    a set iterator at slot ``slot`` yields (none for a slot of -1: exhausted)."""
    if slot < 0:
        return []
    return list(itertools.islice(s, read(s).kinds.count(_USED_BYTE, 0, slot), None))


def iterator_state(it: Any) -> tuple[bool, int, int]:
    """A set iterator's state (``setiterobject``: the set, or NULL once exhausted; the size it
    checks, -1 once it raised; the slot it goes on from): (not exhausted, size, slot)."""
    si_set, si_used, si_pos = _ITER.from_address(id(it) + _HEAD_OFFSET)[:]
    return bool(si_set), si_used, si_pos


def _keepers(size: int) -> int:
    """How many entries a table must hold for a dummy purge to resize it to ``size`` slots."""
    if size <= _MIN:
        return 0
    u = size // 8  # resized to the smallest power of two above 4 * used ...
    if u > 50000:
        u = size // 4  # ... or above 2 * used, past 50000 entries
    return u


def problem(t: Table) -> str | None:
    """Why ``rebuild`` could not make table ``t``, or None.

    That every element's probe sequence passes only used slots before its own holds for every
    table CPython makes (an element is only ever put on the first free slot, or on the first
    dummy before it; a slot once used stays used until the table is rebuilt), so it is not
    walked here; the restore reads its result back and fails loudly if it differs.
    """
    fill = t.size - t.kinds.count(EMPTY)
    if t.size > _MIN and fill * 5 >= (t.size - 1) * 3:
        return f"its table of {t.size} slots has {fill} used, more than a set keeps unresized"
    if fill < _keepers(t.size):
        return f"its table of {t.size} slots has only {fill} used, fewer than a set shrinks at"
    return None


def _set_finger(s: set[Any], finger: int) -> None:
    # pop() takes the first element at or after the finger and leaves the finger after it: a
    # table holding one entry, at slot finger - 1, popped, leaves it at ``finger``.
    target = Placeholder(finger - 1)
    if finger <= _MIN:
        s.add(target)
    else:
        # Presized by update() to the smallest power of two above twice the entries (> finger).
        junk = [Placeholder(finger + i) for i in range(finger // 2)]
        s.update(dict.fromkeys([target, *junk]))
        for p in junk:
            s.discard(p)  # discard never resizes
    popped = s.pop()
    assert popped is target
    s.clear()  # keeps the finger


def _set_size(s: set[Any], size: int, keepers: list[Placeholder]) -> None:
    u = len(keepers)
    j = max(3 * u, 8)
    while True:  # enough junk that removing it leaves more than a quarter of the slots dummies
        m = 8
        while m <= 2 * (u + j):
            m <<= 1
        if j > (m - 1) // 4:
            break
        j += 1
    junk = [Placeholder(size + i) for i in range(j)]
    s.update(dict.fromkeys([*keepers, *junk]))
    s.difference_update(junk)


def rebuild(s: set[Any], elements: list[Any], t: Table) -> str | None:
    """Make the empty set ``s`` hold ``elements`` (in slot order) in table ``t``; None, or why
    the table made differs (then ``s`` holds the elements, in another table)."""
    s.update(elements)  # often enough, a plain rebuild makes the same table
    if t.finger == 0 and read(s) == t and _in_order(s, elements):
        return None
    s.clear()
    if t.finger:
        _set_finger(s, t.finger)
    size, kinds = t.size, t.kinds
    taken = [i for i in range(size) if kinds[i] != EMPTY]
    holders = [Placeholder(i) for i in range(size)] if taken else []
    u = _keepers(size)
    if u:
        _set_size(s, size, [holders[i] for i in taken[:u]])
    for i in taken[u:]:
        s.add(holders[i])
    for e, i in zip(elements, (i for i in taken if kinds[i] == USED), strict=True):
        s.discard(holders[i])
        s.add(e)
    for i in taken:
        if kinds[i] == DUMMY:
            s.discard(holders[i])
    got = read(s)
    if got == t and _in_order(s, elements):  # the same slots, with the same elements on them
        return None
    s.clear()
    s.update(elements)
    if t.seed != SEED or t.process != PROCESS:
        # Recorded where strings hash otherwise (another PYTHONHASHSEED), or with elements
        # hashed by their address (seed None) where they may be at others (another process),
        # or in another process whose elements hashed otherwise there (an element's own
        # __hash__ over its class, which is at another address here): no table of these hashes
        # is the recorded one. The same elements, in this process's order.
        return None
    return f"its table could not be rebuilt: made {got!r}, recorded {t!r}"


def _in_order(s: set[Any], elements: list[Any]) -> bool:
    return all(a is b for a, b in zip(s, elements, strict=True))


def _self_test() -> bool:
    """Read back sets of known tables; False if this interpreter lays them out otherwise."""
    if not _layouts.known():  # (free-threaded builds lay objects out otherwise)
        return False
    try:
        a, b = Placeholder(3), Placeholder(11)
        s = {a, b}  # both hash to slot 3 of 8: b goes on to slot (3 * 5 + 1) & 7 = 0
        s.discard(a)
        t = read(s)
        if t.size != 8 or t.kinds != bytes([USED, 0, 0, DUMMY, 0, 0, 0, 0]):
            return False
        head = _HEAD.from_address(id(s) + _HEAD_OFFSET)[:]
        if head[0] != 2 or head[1] != 1 or head[2] != 7:
            return False
        s.pop()
        if read(s).finger != 1:
            return False
        pair = {Placeholder(1), Placeholder(4)}
        it = iter(pair)
        next(it)
        if iterator_state(it) != (True, 2, 2) or next_used(pair, 2) != (4, 1):
            return False
        next(it)
        next(it, None)
        if iterator_state(it)[0]:
            return False
        big = set(range(100))
        if read(big).kinds.count(USED) != 100:
            return False
        for x in range(0, 100, 3):
            big.discard(x)
        big.pop()
        t = read(big)
        back: set[Any] = set()
        return rebuild(back, list(big), t) is None and list(back) == list(big) and read(back) == t
    except Exception:
        return False


SUPPORTED = _self_test()

__all__ = [
    "SUPPORTED",
    "Placeholder",
    "Table",
    "elements_from",
    "iterator_state",
    "next_used",
    "plain",
    "problem",
    "read",
    "rebuild",
]
