"""Corpus: locals a checkpoint keeps by value and as views (issue 31's contract).

Live views of local containers stay views; floats and big ints shared between locals stay
shared; exception attributes outside ``args`` survive; set subclasses keep their order; records
whose ``__getattr__`` needs their state are restored; containers of the standard library come
back equal. (Objects shared with the module: corpus_modstate.)
"""

from __future__ import annotations

import collections
import dataclasses
import types
from collections import OrderedDict, deque

from workflows import Event, timer, workflow

from .diffharness import C, add
from .probes import log

# ---------------------------------------------------------------------------------------------
# 2. Live views


@workflow
async def views_follow_their_container(x):
    """Dict views, OrderedDict views, a mapping proxy and a memoryview of a local container."""
    d = {"a": 1}
    od = OrderedDict(b=2)
    keys, values, items = d.keys(), d.values(), d.items()
    okeys, oitems = od.keys(), od.items()
    proxy = types.MappingProxyType(d)
    buf = bytearray(b"abc")
    view = memoryview(buf)
    await timer("t", 1)
    d["c"] = x
    od["z"] = x
    buf[0] = ord("z")
    await timer("t", 1)
    log((list(keys), list(values), list(items)))
    log((list(okeys), list(oitems)))
    log((dict(proxy), proxy["c"]))
    log((bytes(view), view.readonly, len(view)))
    return len(keys)


add(views_follow_their_container, C(1), C(2))


# ---------------------------------------------------------------------------------------------
# 3. Shared floats and ints


@workflow
async def shares_floats(x):
    """A NaN and a big int held by a local and in a list: still the same objects."""
    nan = float("nan")
    big = 10**30 + x
    f = x + 0.5
    lst = [nan, big, f]
    pair = (f, f)
    await timer("t", 1)
    log((nan in lst, lst.index(nan), big is lst[1], f is lst[2], pair[0] is pair[1]))
    await timer("t", 1)
    log((nan in lst, f is pair[1]))
    return lst.index(nan)


add(shares_floats, C(1), C(2))


class Holder:
    """A plain class: on 3.13 its instances keep their attributes inline, in no dict."""


@dataclasses.dataclass(frozen=True)
class Pinned:
    value: object


@workflow
async def shares_numbers_with_instances(x):
    """A NaN and a big int held by locals and by an instance made in the workflow, a frozen
    dataclass and an Event: still the same objects (on 3.13 too, where the instance keeps its
    attributes inline)."""
    nan = float("nan")
    big = 2**70 + x
    box = Holder()
    box.nan, box.big = nan, big
    pin = Pinned(nan)
    ev = Event("e", big)
    await timer("t", 1)
    log((box.nan is nan, box.big is big, pin.value is nan, ev.value is big))
    await timer("t", 1)
    log((nan in [box.nan], pin.value is box.nan, ev.value is box.big))
    return box.big is big


add(shares_numbers_with_instances, C(1), C(2))


# ---------------------------------------------------------------------------------------------
# 4. Exception attributes


class SlotError(Exception):
    __slots__ = ("code",)

    def __init__(self, msg, code):
        super().__init__(msg, code)
        self.code = code


@workflow
async def keeps_exception_attributes(x):
    """AttributeError.name and .obj, NameError.name, an exception's __slots__ attributes."""
    target = types.SimpleNamespace(v=x)
    try:
        target.missing  # noqa: B018
    except AttributeError as e:
        attr_err = e
    try:
        undefined_name_here  # noqa: B018, F821
    except NameError as e:
        name_err = e
    slot_err = SlotError("bad", x)
    await timer("t", 1)
    log((attr_err.name, attr_err.obj is target, name_err.name, slot_err.code, slot_err.args))
    return str(attr_err), str(name_err)


add(keeps_exception_attributes, C(1), C(2))


# ---------------------------------------------------------------------------------------------
# 5. Checkpoints that must restore


class Record:
    """A record that forwards unknown attributes to its fields (needs ``fields`` set)."""

    def __init__(self, **fields):
        self.fields = fields

    def __getattr__(self, name):
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(name) from None


@workflow
async def record_with_getattr(x):
    """A record whose __getattr__ reads its own state: restored without calling it half-built."""
    r = Record(a=x, b=[x])
    await timer("t", 1)
    r.b.append(2)
    await timer("t", 1)
    return r.a, r.b


add(record_with_getattr, C(1), C(4))


class Tagged(set):
    """A set subclass with an attribute."""


@workflow
async def set_subclass_keeps_order(x):
    """A set subclass iterates in the same order after a restore."""
    s = Tagged()
    for i in range(40):
        s.add(i * 37 + x)
    for i in range(0, 40, 3):
        s.discard(i * 37 + x)
    s.label = "t"
    before = list(s)
    await timer("t", 1)
    log((list(s) == before, s.label, type(s).__name__))
    s.add(1000)
    await timer("t", 1)
    return list(s)


add(set_subclass_keeps_order, C(1), C(2))


@workflow
async def counter_of_views(x):
    """A Counter, a ChainMap and a deque with maxlen: values by value, equal after a restore."""
    c = collections.Counter("abca" * x)
    chain = collections.ChainMap({"a": 1}, {"b": 2})
    dq = deque(range(5), maxlen=3)
    await timer("t", 1)
    c["z"] += 1
    dq.append(9)
    return c.most_common(2), dict(chain), list(dq), dq.maxlen


add(counter_of_views, C(1), C(2))
