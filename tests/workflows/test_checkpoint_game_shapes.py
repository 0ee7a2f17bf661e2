"""Values and shapes of game-server code that a checkpoint keeps exactly, each checked natively,
restored at every await in this process, and restored in a new interpreter."""

from __future__ import annotations

import heapq
import itertools
import re
import sys
import traceback

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

from .diffharness import Oracle, compare, resume_in_a_new_interpreter, run_compiled, run_native


def _in_a_new_process(wf, blob):
    """What the workflow returns, restored from ``blob`` in a new interpreter and run to its end
    (with a checkpoint and restore at each await there too)."""
    return resume_in_a_new_interpreter(blob, module=__name__, workflow_type=wf.__workflow_key__,
                                       steps=None, roundtrip=True)


def _same_as_native(wf, *args):
    """The workflow's value, after checking that a restore at every await changes nothing."""
    native = run_native(wf, args, Oracle())
    restored = run_compiled(wf, args, Oracle(), roundtrip=True)
    diffs = compare(native, restored, with_chain=True, label="restored")
    assert not diffs, "\n".join(diffs)
    return native.outcome[1]


@workflow
async def held_traceback(n):
    """The traceback of a failed step kept for a report, beside its exception and alone."""
    try:
        {}[n]
    except KeyError:
        et, ev, tb = sys.exc_info()
        await timer("report", 1)
        same = tb is ev.__traceback__ and sys.exc_info()[2] is tb
    alone = ev.__traceback__
    del ev
    await timer("later", 1)
    return (et.__name__, same, alone.tb_lineno, alone.tb_frame.f_code.co_name,
            [(f.lineno, f.name, f.line) for f in traceback.extract_tb(alone)])


class Jam(Exception):
    pass


def dig(n):
    if n == 0:
        raise Jam("stuck")
    return dig(n - 1)


@workflow
async def raised_again(depth):
    """An error kept and raised again after awaits: each raise puts an entry before the
    traceback it had, which the workflow holds too."""
    try:
        dig(depth)
    except Jam as e:
        saved, first = e, e.__traceback__
    await timer("a", 1)
    tbs = [first]
    for _ in range(2):
        try:
            raise saved
        except Jam as again:
            tbs.append(again.__traceback__)
        await timer("b", 1)
    inner = first.tb_next
    await timer("c", 1)
    return ([len(traceback.extract_tb(t)) for t in tbs], tbs[2].tb_next is tbs[1],
            tbs[1].tb_next is first, first.tb_next is inner, saved.__traceback__ is tbs[2])


def test_a_traceback_raised_again_shares_its_entries_after_a_restore():
    """The entries of a traceback that two held tracebacks share (an error raised again, a
    traceback's tb_next) are one object after a restore, also for a chain far longer than
    pickle's recursion."""
    assert _same_as_native(raised_again, 3) == ([5, 6, 7], True, True, True, True)
    assert _same_as_native(raised_again, 800) == ([802, 803, 804], True, True, True, True)
    h = WorkflowHarness(raised_again, 3, roundtrip=False)
    h.fire_timer("a")
    assert _in_a_new_process(raised_again, h.checkpoint()) == ([5, 6, 7], True, True, True, True)


def test_a_traceback_held_in_a_variable_is_kept():
    """A traceback object held across an await (``sys.exc_info()``'s third item, an exception's
    ``__traceback__``) comes back with its entries, and as its exception's own traceback (it
    was refused: a traceback object does not pickle)."""
    line = held_traceback.__wrapped__.__code__.co_firstlineno + 4  # (the decorator's line first)
    want = ("KeyError", True, line, "held_traceback", [(line, "held_traceback", "{}[n]")])
    assert _same_as_native(held_traceback, 5) == want
    h = WorkflowHarness(held_traceback, 5, roundtrip=False)
    h.fire_timer("report")
    assert _in_a_new_process(held_traceback, h.checkpoint()) == want


@workflow
async def numbered_queue(n):
    """Orders numbered by ``itertools.count`` (a heap's tie-breaker), held across awaits."""
    seq = itertools.count()
    ids = itertools.count(100, 5)
    weights = itertools.count(0.5, 0.25)
    again = seq
    pq = []
    for i in range(n):
        heapq.heappush(pq, (i % 2, next(seq), f"order{next(ids)}"))
        await timer("queued", 1)
    done = []
    while pq:
        prio, k, name = heapq.heappop(pq)
        await timer("made", 1)
        done.append((prio, k, name, next(weights)))
    return done, next(seq), next(ids), next(weights), again is seq


def test_an_itertools_count_is_kept_on_every_python():
    """An ``itertools.count`` held across awaits goes on from its next value with its step, in
    this process and in a new one (from 3.12, where its own pickling is deprecated, it was
    refused)."""
    done, *rest = _same_as_native(numbered_queue, 3)
    assert [k for _, k, _, _ in done] == [0, 2, 1]
    assert rest == [3, 115, 1.25, True]
    h = WorkflowHarness(numbered_queue, 3, roundtrip=False)
    for _ in range(3):
        h.fire_timer("queued")
    blob = h.checkpoint()
    while not h.done:
        h.fire_timer("made")
    assert _in_a_new_process(numbered_queue, blob) == h.result()


COMMAND = re.compile(r"/(?P<verb>\w+)(?:\s+(?P<arg>\w+))?")
ALTERNATIVES = re.compile(r"a|ab")


@workflow
async def chat_commands(lines):
    """Chat commands parsed by a regular expression, the match kept for after a cooldown."""
    out = []
    for line in lines:
        m = COMMAND.match(line)
        if m is None:
            continue
        await timer("cooldown", 1)
        out.append((m.group("verb"), m["arg"], m.span(), m.lastgroup, m.string is line, m.re is COMMAND))
    hits = list(re.finditer(r"\d+", "hp 10 mp 20 xp 30"))
    third = hits[2]
    whole = ALTERNATIVES.fullmatch("ab")
    first = ALTERNATIVES.match("ab")
    raw = re.compile(rb"(\x00+)(\x01)?").search(b"ab\x00\x00c", 1)
    await timer("scan", 1)
    out.append((third.group(), third.span(), hits[2] is third, whole.group(), first.group(),
                raw.groups(), raw.pos, raw.lastindex, re.match("x", "y")))
    return out


def test_a_match_object_held_across_an_await_is_kept():
    """A ``re.Match`` held across an await (a command's match kept past a cooldown, one of a
    ``finditer``, a ``fullmatch`` and a ``match`` that differ, one of a bytes pattern) comes back
    with its groups, spans, bounds, pattern and string, in this process and in a new one (it
    was refused as unpicklable)."""
    lines = ["/say hi", "hello", "/quit"]
    value = _same_as_native(chat_commands, lines)
    assert value == [
        ("say", "hi", (0, 7), "arg", True, True),
        ("quit", None, (0, 5), "verb", True, True),
        ("30", (15, 17), True, "ab", "a", (b"\x00\x00", None), 1, 1, None),
    ]
    h = WorkflowHarness(chat_commands, lines, roundtrip=False)
    h.fire_timer("cooldown")
    blob = h.checkpoint()
    assert _in_a_new_process(chat_commands, blob) == value
