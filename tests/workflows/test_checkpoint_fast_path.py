"""The fast path of a checkpoint (the C pickler, for plain locals) writes what the checkpoint
pickler writes, whatever the locals share.

Random locals (numbers held once or twice, strings, containers of them held by several locals
or items, a list and its bound method, the module's functions, the Event a select gives, module
data, sets holding range iterators or list methods, which hash by an identity a copy does not
have, instances and deques holding any of these) are checkpointed both ways: both refuse, or
where the fast path takes them, its payload is the checkpoint pickler's, byte for byte, or
(where the checkpoint pickler makes a second pass for a byte of its first that looks like a set)
restores to the same objects with the same sharing and the same order; and what is accepted
restores as the frames were (the same values, sharing and order), sets in their order.
"""

from __future__ import annotations

import collections
import math
import textwrap

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import workflows
from workflows import CheckpointError
from workflows._compiler import checkpoint, compile_workflow_source, step
from workflows._compiler._checkpoint import _plain_frames, _read_header, _spaces
from workflows._compiler._pickler import _REFS, ModuleData, dumps, loads

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_SOURCE = """
    def double(v):
        return 2 * v

    def triple(v):
        return 3 * v

    class Box:
        pass

    async def holder():
        while True:
            await signal("x")
"""
# Module data to walk (a module list), or none.
_MODULES = {"quiet": "", "walked": "REGISTRY = [[1], {'a': [2]}]\n"}


def _continuation(module: str):
    g = {n: getattr(workflows, n) for n in workflows.__all__}
    wf = compile_workflow_source(_MODULES[module] + textwrap.dedent(_SOURCE), f"fast_{module}.py", "holder", g)
    cont = wf.start()
    step(cont)
    return cont, g


_CONTS = {m: _continuation(m) for m in _MODULES}

# Leaves: each draw makes a new object where the type allows (a big int, a float), so that the
# pool holds distinct objects with equal values as well as one object held twice.
_leaves = st.one_of(
    st.integers(-10, 300),
    st.integers(10**18, 10**18 + 3).map(lambda n: n + 0),
    st.sampled_from([0.5, -0.0, math.inf]).map(lambda x: float(repr(x))),
    st.just(float("nan")),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.sampled_from([None, True, False, 1j]),
)


def _hashable(x) -> bool:
    """Whether ``x`` hashes by its value, the same after a restore (a set's order then comes
    back: an iterator hashed by its identity would put it in another)."""
    t = type(x)
    if t in (tuple, frozenset):
        return all(map(_hashable, x))
    if t is workflows.Event:
        return _hashable(x.value)
    return t in (int, float, str, bytes, bool, complex, type(None)) or t is type(_hashable)


def _hashes(x) -> bool:
    """Whether ``x`` can be a set's element at all: also a range iterator or a list's method,
    which hash by an identity (the iterator's, the list's) that the copy a restore makes does
    not have, so a set holding one must be refused."""
    try:
        hash(x)
    except TypeError:
        return False
    return True


@st.composite
def _locals(draw, module: str):
    """Up to six locals drawn from a pool of objects (so that some are held twice): leaves, then
    objects made of the pool's earlier ones."""
    _cont, g = _CONTS[module]
    pool: list = draw(st.lists(_leaves, min_size=2, max_size=6))
    for _ in range(draw(st.integers(1, 8))):
        kinds = ["list", "tuple", "dict", "set", "frozenset", "event", "fn", "method", "range"]
        kinds += ["by id", "instance", "deque"]
        kind = draw(st.sampled_from(kinds + (["module"] if "REGISTRY" in g else [])))
        items = draw(st.lists(st.sampled_from(pool), max_size=4))
        # Set elements and dict keys hashed by value, or sometimes by an identity too.
        hashable = [x for x in items if (_hashes if draw(st.booleans()) else _hashable)(x)]
        if kind == "by id":  # a set or frozenset holding elements hashed by an identity
            by_id = [x for x in pool if _hashes(x) and not _hashable(x)]
            if by_id:
                extra = draw(st.lists(st.sampled_from(by_id), min_size=1, max_size=2))
            else:
                extra = [iter(range(draw(st.integers(0, 5))))]
            if draw(st.booleans()):
                extra = [(x,) for x in extra]  # hashed by its item's identity
            elements = [x for x in hashable if _hashable(x)] + extra
            pool.append(draw(st.sampled_from([set, frozenset]))(elements))
            continue
        if kind == "list":
            pool.append(list(items))
        elif kind == "tuple":
            pool.append(tuple(items))
        elif kind == "dict":
            pool.append({k: v for k, v in zip(hashable, items, strict=False)})
        elif kind == "set":
            pool.append(set(x for x in hashable if not isinstance(x, float) or not math.isnan(x)))
        elif kind == "frozenset":
            pool.append(frozenset(hashable[: draw(st.integers(0, 2))]))
        elif kind == "instance":  # its attributes kept inline on 3.13
            box = g["Box"]()
            for i, v in enumerate(items):
                setattr(box, f"a{i}", v)
            pool.append(box)
        elif kind == "deque":
            pool.append(collections.deque(items))
        elif kind == "event":
            pool.append(workflows.Event(draw(st.sampled_from(["x", "y"])), draw(st.sampled_from(pool))))
        elif kind == "module":  # module data: by name, or by its path
            reg = g["REGISTRY"]
            pool.append(draw(st.sampled_from([reg, reg[0], reg[1], reg[1]["a"]])))
        elif kind == "fn":
            pool.append(g[draw(st.sampled_from(["double", "triple", "signal"]))])
        elif kind == "method":
            lists = [x for x in pool if type(x) is list]
            if lists:
                pool.append(draw(st.sampled_from(lists)).append)
        else:
            it = iter(range(draw(st.integers(0, 5))))
            next(it, None)
            pool.append(it)
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=6))
    return {f"v_l{i}": pool[k] for i, k in enumerate(picks)}


def _same(a, b, pairs: dict[tuple[str, int], int]) -> bool:
    """Whether ``a`` and ``b`` are the same values with the same sharing (one object in ``a`` for
    one in ``b``, and the other way round) and, for sets and dicts, the same order."""
    if ("a", id(a)) in pairs or ("b", id(b)) in pairs:
        return pairs.get(("a", id(a))) == id(b) and pairs.get(("b", id(b))) == id(a)
    pairs["a", id(a)] = id(b)
    pairs["b", id(b)] = id(a)
    if type(a) is not type(b):
        return False
    t = type(a)
    if t is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if t in (list, tuple, set, frozenset):
        return len(a) == len(b) and all(_same(x, y, pairs) for x, y in zip(a, b, strict=True))
    if t is dict:
        return len(a) == len(b) and all(
            _same(k, k2, pairs) and _same(v, v2, pairs)
            for (k, v), (k2, v2) in zip(a.items(), b.items(), strict=True)
        )
    if t is workflows.Event or t.__name__ == "Box":
        return _same(vars(a), vars(b), pairs)
    if t is collections.deque:
        return _same(list(a), list(b), pairs)
    if t.__name__ == "Frame":
        return a._af_code is b._af_code and _same(vars(a), vars(b), pairs)
    if t is type([].append):
        return a.__name__ == b.__name__ and _same(a.__self__, b.__self__, pairs)
    if t.__name__ == "range_iterator":
        return a.__reduce__() == b.__reduce__()
    if t is type(_same):
        return a is b
    return bool(a == b)


@pytest.mark.parametrize("module", list(_MODULES))
@SETTINGS
@given(data=st.data())
def test_the_fast_path_writes_what_the_checkpoint_pickler_writes(module, data) -> None:
    cont, _g = _CONTS[module]
    frame = cont._frames[0]
    base = {k: v for k, v in vars(frame).items() if not k.startswith("v_l")}
    local = data.draw(_locals(module))
    vars(frame).clear()
    vars(frame).update(base)
    vars(frame).update(local)
    note(repr(local))
    frames = cont._frames
    spaces = _spaces(frames)
    try:
        slow = dumps(frames, spaces, ModuleData(spaces, frames))
    except Exception:
        slow = None  # refused: so must the checkpoint be
    try:
        fast = _read_header(checkpoint(cont))[1]
    except CheckpointError:
        fast = None
    assert (fast is None) == (slow is None)
    if slow is None:
        return
    if _plain_frames(frames):
        assert fast == slow or slow[:1] == _REFS
    assert _same(loads(fast), loads(slow), {})
    # Both as the frames were: the same values, sharing (a number held by a local and by an
    # instance or a deque is one object) and order.
    assert _same(list(frames), loads(slow), {})
    # What is accepted comes back with its sets in their order (one holding an element hashed by
    # the identity of a copy is refused above).
    before, after = _sets(list(frames)), _sets(loads(slow))
    assert len(before) == len(after)
    assert all(_same(list(a), list(b), {}) for a, b in zip(before, after, strict=True))


def _sets(x) -> list:
    """The sets and frozensets ``x`` holds (through frames, containers and Events), in the order
    a walk meets them."""
    out: list = []
    seen: set[int] = set()
    stack = [x]
    while stack:
        o = stack.pop()
        t = type(o)
        if t in (list, tuple, dict, set, frozenset, workflows.Event) or t.__name__ in ("Frame", "Box"):
            if id(o) in seen:
                continue
            seen.add(id(o))
        if t in (set, frozenset):
            out.append(o)
            stack.extend(o)
        elif t in (list, tuple):
            stack.extend(o)
        elif t is dict:
            stack.extend(o.keys())
            stack.extend(o.values())
        elif t is workflows.Event:
            stack.append(o.value)
        elif t is collections.deque:
            stack.extend(o)
        elif t.__name__ in ("Frame", "Box"):
            stack.extend(vars(o).values())
    return out
