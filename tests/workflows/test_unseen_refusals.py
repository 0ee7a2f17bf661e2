"""Game-server programs whose state a checkpoint cannot keep are refused at the await, naming
the variable, its type and what to write instead; never accepted and then unrestorable.

Each holds across an await an object CPython itself cannot pickle (a regex match, a weak
reference, a generator, a traceback, an ``lru_cache`` made in the workflow, a key function of
``functools.cmp_to_key``, an ``itertools.pairwise``, an open ``decimal.localcontext()``), as the programs of
corpus_unseen would if written carelessly.
"""

from __future__ import annotations

import decimal
import functools
import itertools
import re
import sys
import weakref

import pytest

from workflows import CheckpointError, timer, workflow
from workflows.testing import WorkflowHarness

from .corpus_unseen import ITERTOOLS_HELD


class Mob:
    def __init__(self, name):
        self.name = name


@workflow
async def holds_match(line):
    """A chat command's match object over a buffer the next packet overwrites, kept for after
    the cooldown (a match over a str or bytes is kept)."""
    buf = bytearray(line.encode())
    m = re.match(rb"/(\w+)\s+(\d+)", buf)
    buf[:] = b"/take 7"
    await timer("cooldown", 1)
    return m.group(1)


@workflow
async def holds_weakref(n):
    """A weak reference to the current target, kept across a tick."""
    target = Mob("rat")
    ref = weakref.ref(target)
    await timer("tick", 1)
    return ref() is target


@workflow
async def holds_generator(n):
    """A wave generator consumed across awaits."""
    waves = (f"wave{i}" for i in range(n + 3))
    first = next(waves)
    await timer("between", 1)
    return first, list(waves)


@workflow
async def holds_local_lru_cache(n):
    """A damage table memoized with lru_cache inside the workflow."""

    @functools.lru_cache(maxsize=256)
    def dmg(level):
        return level * 3

    dmg(n)
    await timer("t", 1)
    return dmg(n + 1)


@workflow
async def holds_cmp_key(n):
    """A cmp_to_key sort key kept for a second sort after new scores arrive."""

    def by_score(a, b):
        return a[1] - b[1]

    key = functools.cmp_to_key(by_score)
    await timer("t", 1)
    return sorted([("a", 2), ("b", n)], key=key)


@workflow
async def holds_decimal_context(n):
    """A decimal.localcontext() open across an await (it sets the thread's context)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 3
        await timer("t", 1)
        return str(decimal.Decimal(1) / 7)


@workflow
async def holds_pairwise(n):
    """Route legs from itertools.pairwise (which never pickles) consumed across an await."""
    legs = itertools.pairwise(["gate", "bridge", "keep"])
    first = next(legs)
    await timer("t", 1)
    return first, list(legs)


REFUSED = [
    (holds_match, ("/give 5",), "m", "re.Match"),
    # The object a weak reference points to is refused first (its copy would not be followed).
    (holds_weakref, (1,), "target", "weak reference points to this Mob"),
    (holds_generator, (1,), "waves", "generator"),
    (holds_local_lru_cache, (1,), "dmg", "lru_cache"),
    (holds_cmp_key, (1,), "key", "KeyWrapper"),
    (holds_decimal_context, (1,), None, "decimal.ContextManager"),
    (holds_pairwise, (1,), "legs", "pairwise"),
]


@pytest.mark.parametrize(
    ("wf", "args", "variable", "type_part"), REFUSED, ids=lambda v: getattr(v, "__name__", None)
)
def test_an_unpicklable_local_is_refused_at_the_await_naming_it(wf, args, variable, type_part):
    """The checkpoint at the first await raises CheckpointError naming the variable (or the
    context manager's line), its type and a way out; the native run is unaffected."""
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(wf, *args, roundtrip=True)
    err = info.value
    msg = str(err)
    if variable is not None:
        assert err.variable == variable, msg
        assert f"'{variable}'" in msg
    assert type_part in (err.value_type or "") + msg
    assert err.location and "await timer(" in msg
    assert any(hint in msg for hint in ("del it", "list(", "keep the awaits out", "instead"))
    h = WorkflowHarness(wf, *args, native=True)
    assert not h.done


@pytest.mark.skipif(sys.version_info < (3, 12), reason="itertools objects pickle on 3.11")
def test_programs_holding_itertools_objects_are_refused_from_3_12():
    """corpus_unseen's patrols and streams that hold an itertools cycle, chain, islice,
    groupby, accumulate, repeat or tee across an await (exact on 3.11, corpus_unseen) are
    refused at their first such await from 3.12, naming the variable and list(...); an
    itertools.count is kept (those holding one are in corpus_unseen on every version)."""
    assert len(ITERTOOLS_HELD) >= 7
    for wf, case in ITERTOOLS_HELD:
        with pytest.raises(CheckpointError) as info:
            h = WorkflowHarness(wf, *case.args, roundtrip=True)
            for _ in range(20):
                if h.done:
                    break
                h.send(case.oracle(h.command, []).value)
        err = info.value
        assert err.variable and f"'{err.variable}'" in str(err), str(err)
        assert (err.value_type or "").startswith("itertools."), str(err)
        assert "list(...)" in str(err)


class Segment:
    def __init__(self, i, nxt):
        self.i = i
        self.next = nxt


@workflow
async def holds_long_trail(n):
    """A breadcrumb trail of 5,000 linked segments kept across an await."""
    trail = None
    for i in range(5000):
        trail = Segment(i, trail)
    await timer("t", 1)
    return trail.i


def test_a_chain_too_deep_for_pickle_is_refused_with_what_to_hold_instead():
    """A linked list deeper than pickle's recursion is refused naming the variable and saying to
    hold the nodes in a list."""
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(holds_long_trail, 1, roundtrip=True)
    assert info.value.variable == "trail"
    assert "hold the nodes in a list" in str(info.value)
