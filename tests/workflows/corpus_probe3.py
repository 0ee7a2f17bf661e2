"""Corpus: state a checkpoint keeps that pickle's own rebuild gives back otherwise.

Fields of the builtin exceptions set after the exception was made (``SyntaxError.lineno``,
``StopIteration.value``, ``OSError.strerror``, ``BlockingIOError.characters_written``, the
fields of a ``UnicodeError``...), which their reduce leaves out; subclasses of ``dict``, ``list``,
``deque``, ``OrderedDict``, ``defaultdict`` and ``Counter`` with a ``__setitem__``, ``append``,
``extend`` or ``__init__`` of their own, which pickle's rebuild would call (reading attributes
not set yet, or changing the items as they are put back).
"""

from __future__ import annotations

import collections
import typing

from workflows import timer, workflow

from .diffharness import C, add


def tick(n: int = 1):
    return timer("t", n)


@workflow
async def exception_fields_set_after_construction(n):
    s = SyntaxError("m")
    s.lineno, s.msg, s.offset = 5 + n, "changed", 2
    stop = StopIteration(1)
    stop.value = 9 + n
    exit_ = SystemExit(1)
    exit_.code = "bye"
    imp = ImportError("no", name="a")
    imp.msg, imp.name, imp.path = "missing", "b", "/x"
    await tick()
    return (s.lineno, s.msg, s.offset, str(s), stop.value, exit_.code, imp.msg, imp.name, imp.path,
            str(imp))


add(exception_fields_set_after_construction, C(0), C(3), C(-7))


@workflow
async def os_error_fields(n):
    e = FileNotFoundError(2, "No such", "a.txt")
    e.filename2 = "b.txt"
    e.strerror = "changed"
    f = OSError("just a message")
    f.errno = 5 + n  # no strerror: str(f) stays the message
    b = BlockingIOError(11, "again")
    b.characters_written = 3 + n
    unset = BlockingIOError(11, "again")  # characters_written never set: reading it raises
    await tick()
    try:
        unset.characters_written  # noqa: B018 - reading it is the check
        raised = False
    except AttributeError:
        raised = True
    return (type(e).__name__, e.errno, e.strerror, e.filename, e.filename2, str(e), f.errno, str(f),
            b.characters_written, raised)


add(os_error_fields, C(0), C(1), C(40))


@workflow
async def unicode_error_fields(n):
    try:
        "é".encode("ascii")
    except UnicodeEncodeError as caught:
        e = caught
    e.object = "xyz" * (n + 1)
    e.start, e.end, e.reason = 1, 2, "because"
    n_err = NameError("x")
    n_err.name = "foo"
    await tick()
    return e.object, e.start, e.end, e.reason, str(e), n_err.name


add(unicode_error_fields, C(0), C(2), C(5))


class Tracked(dict):
    """Its __setitem__ reads an attribute its __init__ sets."""

    def __init__(self, *a, **kw):
        self.dirty = set()
        super().__init__(*a, **kw)

    def __setitem__(self, k, v):
        self.dirty.add(k)
        super().__setitem__(k, v)


class Doubling(dict):
    def __setitem__(self, k, v):
        super().__setitem__(k, v * 2)


class Appending(list):
    def __init__(self, tag):
        super().__init__()
        self.tag = tag
        self.count = 0

    def append(self, x):
        self.count += 1
        super().append((self.tag, x))

    def extend(self, xs):
        for x in xs:
            self.append(x)


class Front(collections.OrderedDict):
    def __setitem__(self, k, v):
        super().__setitem__(k, v)
        self.move_to_end(k, last=False)


class Tens(collections.defaultdict):
    def __init__(self, label):
        super().__init__(int)
        self.label = label

    def __setitem__(self, k, v):
        super().__setitem__(k, v * 10)


class Scaled(collections.deque):
    def __init__(self, factor, maxlen=None):
        super().__init__((), maxlen)
        self.factor = factor

    def append(self, x):
        super().append(x * self.factor)

    def extend(self, xs):
        for x in xs:
            self.append(x)


class Loot(collections.Counter):
    def __init__(self, owner, **counts):
        super().__init__(**counts)
        self.owner = owner


@workflow
async def container_subclasses_with_own_mutators(n):
    t = Tracked(a=1, b=2)
    t["c"] = 3 + n
    d = Doubling()
    d["a"] = 1 + n
    a = Appending("x")
    a.append(n)
    a.extend([1, 2])
    f = Front()
    f["a"] = 1
    f["b"] = 2
    dd = Tens("ten")
    dd["a"] = 1 + n
    q = Scaled(3, maxlen=2)
    q.extend([1, 2, 3])
    loot = Loot("me", gold=2 + n)
    loot["gem"] += 1
    await tick()
    t["a"] = 10
    f["c"] = 3
    q.append(4)
    dd["z"] += 1
    await tick()
    return (sorted(t.dirty), dict(t), dict(d), list(a), a.count, a.tag, list(f), dict(dd), dd.label,
            dd["missing"], list(q), q.maxlen, q.factor, dict(loot), loot.owner)


add(container_subclasses_with_own_mutators, C(0), C(5), C(-1))


@workflow
async def container_subclass_sharing(n):
    """A subclass with its own mutators that holds itself, shares its __dict__ with a local and
    is held twice."""
    t = Tracked(x=n)
    t["self"] = t
    attrs = vars(t)
    both = [t, t]
    a = Appending("y")
    a.append(a)
    await tick()
    attrs["late"] = True
    t["y"] = 1
    return (t["self"] is t, both[0] is both[1] is t, t.late, sorted(t.dirty), a[0][1] is a,
            a.count)


add(container_subclass_sharing, C(0), C(1), C(2))


@workflow
async def typeddict_made_in_the_workflow(n):
    """TypedDict's functional form, which on 3.11 sets no __orig_bases__ (its bases are dict)."""
    # (One key: a class's frozenset of two keys is refused on 3.12+, where it is pickled by
    # value and its order depends on the string hash seed.)
    TD = typing.TypedDict("TD", {"a": int}, total=False)  # noqa: UP013 - the form under test
    value = TD(a=n)
    await tick()
    return TD.__name__, sorted(TD.__optional_keys__), TD.__total__, value


add(typeddict_made_in_the_workflow, C(0), C(1), C(2))
