"""Sets in a checkpoint: the table a set is recorded with, frozensets whose order a rebuild
would change, and the elements whose hash a restore would not give back.

A set's order follows its elements' hashes. An element whose hash is made from the address of
an object (its own, where its class keeps ``object.__hash__``: an iterator, a function, a class,
an instance without ``__hash__`` of its own; a NaN's; the object a method is bound to; those of
the items of a tuple or frozenset) hashes as it did only where that object comes back as
itself: a copy hashes otherwise, so a set or frozenset holding it is refused at the checkpoint
(``hash_identities``, ``element_refused``). An object that comes back as itself (a module's
function or class, a singleton, module data) hashes the same in this process, and otherwise in
another, as strings do under another ``PYTHONHASHSEED``: such a set's table is recorded as this
process's (``_set_record``), exact here and, elsewhere, restored in that process's own order.
"""

from __future__ import annotations

import dataclasses
import decimal
import itertools
import operator
import sys
import types
from collections.abc import Iterator
from typing import Any

from .._commands import Event
from . import _settable
from ._pickle_modules import slot_names
from ._pickle_values import ValueRefused, eq_reading_workflow


def _same_order(s: set[Any] | frozenset[Any], order: list[Any]) -> bool:
    return len(s) == len(order) and all(a is b for a, b in zip(s, order, strict=True))


class SetNotRestorable(Exception):
    """A set of a checkpoint whose table cannot be rebuilt in this process; ``frames`` is what
    was unpickled (the set holds its elements in another table), to name the variable by."""

    def __init__(self, reason: str, the_set: set[Any], frames: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.the_set = the_set
        self.frames = frames


def _set_record(s: set[Any], by_address: bool = False) -> Any:
    """What a checkpoint records of set ``s`` beside its elements: its exact table; TypeError
    if a restore could not rebuild it. ``by_address``: some element's hash is made from an
    address (an object kept as itself), so the table is this process's alone (``Table.seed``
    None: another process restores the elements in its own order)."""
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
    if by_address:
        table.seed = None
    return table.record()


def _frozenset_problem(f: frozenset[Any]) -> str | None:
    order = list(f)
    again = frozenset(order)  # what pickle rebuilds it as
    if _settable.SUPPORTED:
        if _settable.read(again) == _settable.read(f):
            return None
    elif _same_order(again, order):
        return None
    return (
        f"a frozenset of {len(f)} elements whose iteration order a restore cannot reproduce (a "
        "rebuilt frozenset lays its elements out anew, in another table); hold a set, or a "
        "tuple(sorted(...)), across the await"
    )


# --------------------------------------------------------------------------------------------
# Elements whose hash is made from an address

_IDENTITY_HASH: Any = object.__hash__
_TUPLE_HASH: Any = tuple.__hash__
_FROZENSET_HASH: Any = frozenset.__hash__
# Hashed by their value, in every process (str and bytes by its seed: ``Table.seed``). Not
# floats, complex numbers and Decimals: a NaN hashes by its identity (3.10+).
BY_VALUE = frozenset(
    {int, bool, str, bytes, range, types.CodeType}
    | ({type(None)} if type(None).__hash__ is not _IDENTITY_HASH else set())  # 3.12+
)
_NUMBERS = (float, complex, decimal.Decimal)
_FLOATS = frozenset({float, complex})
_FLAT = _FLOATS | {tuple}
# Hashed by the address of the object they are bound to (``__self__``).
_BOUND = (types.BuiltinFunctionType, types.MethodWrapperType, types.MethodType)


def hashed_by_value(s: Any, alike: frozenset[type] = BY_VALUE) -> bool:
    """True if every element of ``s`` is of a type of ``alike``, a float or complex number that
    is not a NaN (a NaN is not equal to itself), or a tuple of those: nothing to look into
    (``hash_identities``), checked at C speed but for picking the tuples out."""
    kinds = set(map(type, s))
    if kinds <= alike:
        return True
    rest = kinds - alike
    if not rest <= _FLAT:
        return False
    if tuple in rest:
        items = list(itertools.chain.from_iterable([x for x in s if type(x) is tuple]))
        inner = set(map(type, items)) - alike
        if not inner <= _FLOATS or inner and not all(map(operator.eq, items, items)):
            return False
    return not rest & _FLOATS or all(map(operator.eq, s, s))


def hash_identities(e: Any, *, into_fields: bool = True) -> Iterator[tuple[Any, Any]]:
    """(part, obj) for each object ``obj`` whose address the hash of ``e`` is made from, and the
    part of ``e`` that takes it: ``e`` itself where its class keeps ``object.__hash__`` (an
    iterator, a function, a class, an instance without ``__hash__`` of its own, ``None`` before
    3.12) and where it is a NaN; the ``__self__`` of a method (``[].append``, ``obj.meth``: by
    its address, whatever its hash); and those of the items of a tuple or frozenset, of the
    fields of an Event, of the origin and arguments of a generic alias, of the hashed fields of
    a dataclass whose ``__hash__`` ``@dataclass`` made. A class with a ``__hash__`` of its own
    over a field holding such an object is the part, if its hash reads that field (seen on a
    copy); otherwise it is taken at its word. ``into_fields=False``: neither of the last two is
    looked into."""
    stack = [e]
    seen: set[int] = set()  # the dataclasses looked into (one may hold itself)
    while stack:
        o = stack.pop()
        t = type(o)
        if t in BY_VALUE:
            continue
        if t in _NUMBERS:
            if o != o:  # a NaN
                yield o, o
            continue
        h = t.__hash__
        if h is _IDENTITY_HASH:
            yield o, o
        elif h is _TUPLE_HASH or h is _FROZENSET_HASH:
            stack.extend(o)
        elif t in _BOUND:
            yield o, o.__self__
            if t is types.MethodType:
                stack.append(o.__func__)
        elif t is Event:
            stack.extend((o.name, o.value, o.kind))
        elif t is types.GenericAlias:
            stack.append(o.__origin__)
            stack.extend(o.__args__)
        elif t is types.UnionType:
            stack.extend(o.__args__)
        elif not into_fields:
            continue
        elif _generated_hash(t):
            # A dataclass's own __hash__: the hash of the tuple of its hashed fields.
            if id(o) in seen:
                continue
            seen.add(id(o))
            stack.extend(getattr(o, f.name) for f in t.__dataclass_fields__.values()
                         if f._field_type is _FIELD and (f.hash if f.hash is not None else f.compare))
        else:
            # A __hash__ of its own over the instance's fields: where a field hashes by identity,
            # whether the hash reads it is seen on a copy (it is taken at its word otherwise).
            suspects = list(_identity_fields(o))
            if suspects:
                names = (t, tuple(sorted({name for name, _ in suspects})))
                reads = _HASH_READS.get(names)
                if reads is None:  # tried once per class and fields (a copy is not cheap)
                    reads = not _same_hash_on_a_copy(o)
                    if len(_HASH_READS) > 4096:
                        _HASH_READS.clear()
                    _HASH_READS[names] = reads
                if reads:
                    for _, v in suspects:
                        yield o, v
            elif _hash_made_from_address(t, o):
                # Its own __hash__ reads no such field, yet a copy hashes otherwise: it is made
                # from an address (``id(self)``), which a restored copy does not have.
                yield o, o


_FIELD = dataclasses._FIELD  # type: ignore[attr-defined]  # (not an InitVar or a ClassVar)


def _generated_hash(t: type) -> bool:
    """Whether ``t``'s ``__hash__`` is the one ``@dataclass`` made (over its fields)."""
    if "__dataclass_fields__" not in t.__dict__:
        return False
    code = getattr(t.__dict__.get("__hash__"), "__code__", None)
    return code is not None and code.co_filename == "<string>"


# Per (class, the names of its fields that hold objects hashed by identity): whether its own
# __hash__ reads them (seen on a copy of the first such instance).
_HASH_READS: dict[tuple[type, tuple[str, ...]], bool] = {}


def _identity_fields(o: Any) -> Iterator[tuple[str, Any]]:
    """(attribute, object) for the objects hashed by identity that ``o``'s attributes (its
    ``__dict__`` and slots) hold (``hash_identities`` of each, not into their own fields)."""
    try:
        fields = list(vars(o).items())
    except TypeError:
        fields = []
    fields.extend((k, getattr(o, k, None)) for k in slot_names(type(o)))
    for name, v in fields:
        for _, obj in hash_identities(v, into_fields=False):
            yield name, obj


def _same_hash_on_a_copy(o: Any) -> bool:
    """Whether a copy of ``o`` as a checkpoint makes one hashes as ``o`` does."""
    import cloudpickle  # type: ignore[import-untyped]  # ships no type information

    try:
        return bool(hash(cloudpickle.loads(cloudpickle.dumps(o))) == hash(o))
    except Exception:
        return False


# Per class with a __hash__ of its own, whose instances' fields hold nothing hashed by identity:
# whether a copy of an instance hashes otherwise (seen on the first instance met).
_HASH_BY_ADDRESS: dict[type, bool] = {}


def _hash_made_from_address(t: type, o: Any) -> bool:
    """Whether instances of ``t`` (a class with a ``__hash__`` of its own) hash by an address,
    as ``o`` does if a copy of it, as a checkpoint makes one, hashes otherwise. A copy that
    cannot be made says nothing (False: taken at its word)."""
    known = _HASH_BY_ADDRESS.get(t)
    if known is None:
        import cloudpickle

        try:
            known = bool(hash(cloudpickle.loads(cloudpickle.dumps(o))) != hash(o))
        except Exception:
            known = False
        if len(_HASH_BY_ADDRESS) > 4096:
            _HASH_BY_ADDRESS.clear()
        _HASH_BY_ADDRESS[t] = known
    return known


class ElementHashRefused(ValueRefused):
    """A set or frozenset refused for an element whose hash a restore would not give back."""


class StaleKeyRefused(ValueRefused):
    """A dict, set or frozenset refused for a key (element) that its table files under another
    hash than the key has now, or that now equals another of its keys: a restore, which puts
    the keys in again, would file it otherwise (or keep only one of the two)."""


def restore_eq_problem(c: Any) -> str | None:
    """Why a restore could not put the keys of dict, set or frozenset ``c`` back: two of them hash
    alike, so putting the second in calls ``__eq__``, and the class of one of them, made in the
    workflow, has an ``__eq__`` that reads variables of the workflow, which come back only after
    the objects that hold them. None otherwise (keys hashed by value are not looked at)."""
    t = type(c)
    if (t is dict or t is set or t is frozenset) and hashed_by_value(c):
        return None
    base = dict if isinstance(c, dict) else set if isinstance(c, set) else frozenset
    keys = list(base.__iter__(c))
    suspects = {}
    for kt in set(map(type, keys)):
        found = eq_reading_workflow(kt)
        if found is not None:
            suspects[kt] = found
    if not suspects:
        return None
    by_hash: dict[int, Any] = {}
    try:
        for k in keys:
            h = hash(k)
            other = by_hash.setdefault(h, k)
            if other is k:
                continue
            culprit = k if type(k) in suspects else other if type(other) in suspects else None
            if culprit is None:
                continue
            cls, names = suspects[type(culprit)]
            kind = type(c).__name__
            what = "key" if base is dict else "element"
            return (
                f"{_article(kind)} {kind} that cannot be rebuilt at restore: its {what}s "
                f"{_short(other)} and {_short(k)} hash alike, so putting them in again calls "
                f"{cls.__qualname__}.__eq__, "
                f"made in the workflow, and it reads variables of the workflow "
                f"({', '.join(names)}) that come back only after the {kind}. Define the class at "
                "module level, or keep what __eq__ needs on the instance or the class (compare "
                "with type(self), not the class's name)"
            )
    except Exception:
        return None  # stale_key_problem says why the keys cannot be hashed again
    return None


def stale_key_problem(c: Any) -> str | None:
    """Why a restore could not give back dict, set or frozenset ``c`` as it is, if a key of it
    was changed since it was put in: its hash is not the one the table filed it under (a lookup
    of it, which natively misses, would find it after the restore), or it now equals another
    key (natively two entries, one after the restore). None where every key is found again
    through its hash, and no two keys are equal: then putting them in again, in their order,
    gives a table whose lookups find what this one finds. Runs the keys' ``__hash__`` (and
    ``__eq__`` where hashes meet), as the restore does; keys hashed by value are not looked at."""
    t = type(c)
    if (t is dict or t is set or t is frozenset) and hashed_by_value(c):
        return None  # most: an instance's __dict__, a set of ids
    base = dict if isinstance(c, dict) else set if isinstance(c, set) else frozenset
    keys = list(base.__iter__(c))  # an OrderedDict's own iterator fails on a key changed
    if hashed_by_value(keys):
        return None
    contains = base.__contains__
    kind = type(c).__name__
    what = "key" if base is dict else "element"
    try:
        for k in keys:
            if not contains(c, k):
                return (
                    f"{_article(kind)} {kind} whose {what} {_short(k)} was changed after it was "
                    f"put in: it no longer hashes as when the {kind} filed it (a lookup of it "
                    f"finds nothing now, and would find it after a restore)"
                )
        if len(dict.fromkeys(keys)) != len(keys):
            again = dict.fromkeys(keys)
            dup = next(k for k in keys if again.pop(k, _GONE) is _GONE)
            first = next(k for k in keys if k == dup)
            return (
                f"{_article(kind)} {kind} two of whose {what}s, {_short(first)} and "
                f"{_short(dup)}, now equal each other: one was changed after it was put in "
                f"(natively the {kind} holds both, a restore would keep only one)"
            )
    except Exception as e:
        return (
            f"{_article(kind)} {kind} whose {what}s cannot be hashed or compared again "
            f"({type(e).__name__}: {e}), as a restore must"
        )
    return None


_GONE = object()


def _short(x: Any) -> str:
    try:
        r = repr(x)
    except Exception:
        r = f"<{type(x).__qualname__}>"
    return r if len(r) <= 60 else r[:57] + "..."


def element_refused(s: Any, e: Any, part: Any, obj: Any) -> ElementHashRefused:
    """The refusal of set (or frozenset) ``s``: its element ``e`` hashes by the address of
    ``obj`` (taken by ``part`` of it), which a restore gives back as a copy."""
    kind = type(s).__name__
    t = type(obj)
    name = f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__
    user_class = False
    if part is not obj and type(part) in _BOUND:  # hashed by the address of what it is bound to
        what = f"a method ({getattr(part, '__qualname__', type(part).__qualname__)}) bound to {_article(name)} {name}"
        how = "a method hashes by the identity of the object it is bound to"
    elif part is not obj:  # its own __hash__ reads a field holding ``obj``
        owner = type(part).__qualname__
        what = f"{_article(owner)} {owner} whose own __hash__ reads a field holding {_article(name)} {name}"
        how = f"{_article(name)} {name} hashes by its identity"
        user_class = t.__module__ != "builtins"
    else:
        how = "it hashes by its identity"
        if t in _NUMBERS:
            what = f"a NaN ({name})"
        elif t is types.FunctionType:
            what = f"a function made in the workflow ({obj.__qualname__})"
        elif isinstance(obj, type):
            what = f"a class made in the workflow ({obj.__qualname__})"
        elif hasattr(t, "__next__"):
            what = f"an iterator ({name})"
        elif t.__hash__ is not _IDENTITY_HASH:
            what = f"an instance of {name} whose own __hash__ is made from its identity (id(self))"
            how = "it hashes by its address"
            user_class = t.__module__ != "builtins"
        else:
            what = f"an instance of {name}, which has no __hash__ of its own"
            user_class = t.__module__ != "builtins"
    if e is not part:
        what = f"{_article(type(e).__qualname__)} {type(e).__qualname__} holding {what}"
    fix = (
        f"give {name} __eq__ and __hash__ over its fields (@dataclass(frozen=True) does), or "
        if user_class
        else ""
    )
    if isinstance(s, frozenset):
        fix += "hold a list, a tuple, or a dict keyed by a name, across the await"
    else:
        fix += "hold a list, or a dict keyed by a name, across the await"
    return ElementHashRefused(
        f"a {kind} of {len(s)} elements holds {what}: {how}, and the copy a restore makes "
        f"hashes otherwise, so the {kind} cannot come back in its order; {fix}",
        s,
    )


def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"
