"""Checkpoints take the standard pickler for plain locals and cloudpickle for the rest.

Both paths must give continuations that restore and resume identically; for plain locals the
bytes must be exactly what cloudpickle writes, so the choice never shows in a stored file.
"""

from __future__ import annotations

import textwrap

import pytest

import workflows
from workflows import CheckpointError, signal, workflow
from workflows._compiler import _pickle_modules, checkpoint, compile_workflow_source, restore, step
from workflows._compiler._checkpoint import _dumps, _plain_frames, _read_header
from workflows._compiler._pickler import _REFS
from workflows._step import Finished


@workflow
async def plain_locals(n: int) -> list:
    seen: list = []
    names = {"a": (1, 2.5, None)}
    while len(seen) < n:
        seen.append(await signal("x"))  # the bound method is held across the await
    return [seen, names]


@workflow
async def range_loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * await signal("x")
    return total


@workflow
async def closure_local(k: int) -> int:
    scale = lambda v: v * k  # noqa: E731 - a local function, which only cloudpickle can carry
    got = await signal("x")
    return scale(got)


@workflow
async def iterator_local() -> list:
    out = []
    for v in iter([10, 20, 30]):
        out.append(v + await signal("x"))
    return out


def _run_restoring_each_time(wf, args, replies):
    cont = wf.start(*args)
    r = step(cont)
    for reply in replies:
        cont = restore(checkpoint(cont))
        r = step(cont, send=reply)
    return cont, r


def test_plain_locals_take_the_fast_path_with_cloudpickles_bytes() -> None:
    cont = plain_locals.start(3)
    step(cont)
    step(cont, send="first")
    assert _plain_frames(cont._frames)
    assert checkpoint(cont).endswith(_dumps(cont._frames))
    _, r = _run_restoring_each_time(plain_locals, (2,), ["a", "b"])
    assert isinstance(r, Finished) and r.value == [["a", "b"], {"a": (1, 2.5, None)}]


def test_a_loop_over_a_range_takes_the_fast_path_with_cloudpickles_bytes() -> None:
    """A range iterator holds no object: the C pickler writes it as cloudpickle does."""
    for n in (3, 1 << 64):
        cont = range_loop.start(n)
        step(cont)
        step(cont, send=2)
        assert _plain_frames(cont._frames)
        assert checkpoint(cont).endswith(_dumps(cont._frames))
    _, r = _run_restoring_each_time(range_loop, (3,), [1, 2, 3])
    assert isinstance(r, Finished) and r.value == 0 * 1 + 1 * 2 + 2 * 3


def test_a_local_function_goes_through_cloudpickle_and_resumes() -> None:
    cont = closure_local.start(3)
    step(cont)
    assert not _plain_frames(cont._frames)
    _, r = _run_restoring_each_time(closure_local, (3,), [7])
    assert isinstance(r, Finished) and r.value == 21


def test_a_live_iterator_goes_through_cloudpickle_and_resumes() -> None:
    cont = iterator_local.start()
    step(cont)
    assert not _plain_frames(cont._frames)
    _, r = _run_restoring_each_time(iterator_local, (), [1, 2, 3])
    assert isinstance(r, Finished) and r.value == [11, 22, 33]


@workflow
async def numbers_in_locals(x: int) -> list:
    nan = twin = float("nan")
    big = other = 10**30 + x
    zero = also_zero = 0  # small ints: one object per value anyway
    out = []
    for v in iter([1, 2]):  # a live iterator: not plain locals
        out.append((nan is twin, big is other, zero is also_zero, v + await signal("x")))
    return out


@workflow
async def numbers_in_plain_locals(x: int) -> list:
    nan = twin = float("nan")
    big = other = 10**30 + x
    out = []
    while len(out) < 2:
        out.append((nan is twin, big is other, await signal("x")))
    return out


@workflow
async def numbers_in_locals_and_a_list(x: int) -> list:
    nan = float("nan")
    big = 10**30 + x
    held = [nan, big]
    out = []
    for v in iter([1, 2]):
        out.append((held[0] is nan, held[1] is big, v + await signal("x")))
    return out


def test_a_float_and_a_big_int_held_by_two_locals_stay_one_object_each() -> None:
    """Two locals holding one NaN, two holding one big int: the same object again after each
    restore (written by cloudpickle, not the slower checkpoint pickler), beside repeated small
    ints."""
    cont = numbers_in_locals.start(1)
    step(cont)
    assert not _plain_frames(cont._frames)
    assert not _read_header(checkpoint(cont))[1].startswith(_REFS)
    _, r = _run_restoring_each_time(numbers_in_locals, (1,), [10, 20])
    assert isinstance(r, Finished) and r.value == [(True, True, True, 11), (True, True, True, 22)]
    cont = numbers_in_plain_locals.start(1)
    step(cont)
    assert _plain_frames(cont._frames)  # the C pickler's, the restore making them one again
    _, r = _run_restoring_each_time(numbers_in_plain_locals, (1,), [10, 20])
    assert isinstance(r, Finished) and r.value == [(True, True, 10), (True, True, 20)]


def test_a_float_and_a_big_int_held_by_a_local_and_a_list_stay_one_object_each() -> None:
    """A NaN and a big int held by a local and by a list beside a live iterator: the list holds
    the locals' objects after each restore."""
    _, r = _run_restoring_each_time(numbers_in_locals_and_a_list, (1,), [10, 20])
    assert isinstance(r, Finished) and r.value == [(True, True, 11), (True, True, 22)]


@workflow
async def appending_numbers(n: int) -> list:
    xs: list = []
    pair = (2.5, 10**20)
    pairs = [pair, pair]  # one tuple held twice: written once, its numbers with it
    while len(xs) < n:
        xs.append(await signal("x"))  # the list, and its bound method, held across the await
    return [xs, pairs[0] is pairs[1], pair[0] is pairs[1][0]]


def test_a_list_and_its_method_held_across_an_await_take_the_fast_path_with_cloudpickles_bytes() -> None:
    """A container reached twice (a local and a bound method, or two places in a list) is
    written once: its floats and big ints are not held twice."""
    cont = appending_numbers.start(3)
    step(cont)
    step(cont, send=1.5)
    step(cont, send=10**30)
    assert _plain_frames(cont._frames)
    assert checkpoint(cont).endswith(_dumps(cont._frames))
    _, r = _run_restoring_each_time(appending_numbers, (3,), [1.5, 10**30, 2.5])
    assert isinstance(r, Finished) and r.value == [[1.5, 10**30, 2.5], True, True]


def _compile(src: str, name: str):
    g = {n: getattr(workflows, n) for n in workflows.__all__}
    return compile_workflow_source(textwrap.dedent(src), f"{name}.py", name, g)


_FUNCTIONS = """
    def double(v):
        return 2 * v

    def triple(v):
        return 3 * v

    async def apply(x):
        steps = [double, triple]  # a list of the module's functions
        total = x
        while True:
            # `double` is held across the await (the callee is evaluated before the arguments),
            # as `procedure` and the function are in `await procedure(f, await ...)`.
            total = double(await signal("x")) + steps[1](total)
            if total > 100:
                return [total, steps[0] is double, steps[1] is triple]
"""


def test_functions_of_the_module_held_across_an_await_take_the_fast_path_with_cloudpickles_bytes() -> None:
    """A function bound to a global of the workflow's module is written as that global, by the
    C pickler as by the checkpoint pickler: the same bytes, restored as the module's function."""
    wf = _compile(_FUNCTIONS, "apply")
    cont = wf.start(1)
    step(cont)
    step(cont, send=2)
    d = cont._frames[0].__dict__
    assert any(v is wf.__wrapped__.__globals__["double"] for v in d.values())
    assert _plain_frames(cont._frames)
    assert checkpoint(cont).endswith(_dumps(cont._frames))
    _, r = _run_restoring_each_time(wf, (1,), [2, 5, 10])  # totals 7, 31, 113
    assert isinstance(r, Finished) and r.value == [113, True, True]


def test_a_function_held_where_module_data_is_too_large_to_walk_is_still_refused(monkeypatch) -> None:
    """As the checkpoint pickler does, the fast path does not write a function where the walk of
    module data stopped before it could tell whether it is part of it."""
    wf = _compile("BIG = [[i] for i in range(50)]\n" + textwrap.dedent(_FUNCTIONS), "apply")
    cont = wf.start(1)
    step(cont)
    assert _plain_frames(cont._frames)
    assert checkpoint(cont).endswith(_dumps(cont._frames))
    monkeypatch.setattr(_pickle_modules, "_PATH_BUDGET", 10)
    assert not _plain_frames(cont._frames)
    with pytest.raises(CheckpointError, match="more than 10 objects"):
        checkpoint(cont)


def test_a_function_of_another_module_goes_through_cloudpickle_and_resumes() -> None:
    """A function not bound to a global of the workflow's module (reached through another
    module) is cloudpickle's to write: not the fast path."""
    wf = _compile(
        """
        import textwrap

        async def wraps(x):
            return textwrap.indent(await signal("x"), x)
        """,
        "wraps",
    )
    cont = wf.start("> ")
    step(cont)
    assert not _plain_frames(cont._frames)
    _, r = _run_restoring_each_time(wf, ("> ",), ["a"])
    assert isinstance(r, Finished) and r.value == "> a"


@workflow
async def select_loop(n: int) -> list:
    got = []
    while len(got) < n:
        # The Event is held across the next await: written by its own reduce.
        ev = await workflows.select(workflows.timer("idle", 60), signal("x"))
        got.append((ev.name, ev.value))
    return [got, ev]


def _select_replies(values):
    return [workflows.Event("x", v) for v in values]


def test_an_event_held_across_an_await_takes_the_fast_path_with_cloudpickles_bytes() -> None:
    """What `await select(...)` gives is written by the C pickler as cloudpickle writes it,
    its class by reference (here, where the module does not bind Event) or as the module's
    global (below)."""
    cont = select_loop.start(3)
    step(cont)
    step(cont, send=workflows.Event("x", "a"))
    assert type(cont._frames[0].__dict__["v_ev"]) is workflows.Event
    assert _plain_frames(cont._frames)
    assert checkpoint(cont).endswith(_dumps(cont._frames))
    _, r = _run_restoring_each_time(select_loop, (2,), _select_replies([1, [2, 3]]))
    assert isinstance(r, Finished)
    assert r.value == [[("x", 1), ("x", [2, 3])], workflows.Event("x", [2, 3])]


_EVENTS = """
    SEEN = []
    LAST = Event("last", 0)

    async def events(mode):
        got = []
        while True:
            ev = await select(timer("idle", 60), signal("x"))
            if mode == "module":
                SEEN.append(ev)  # module data: kept by its path
            elif mode == "global":
                ev = LAST  # a module global: kept by its name
            elif mode == "apart":
                held = vars(ev)  # its __dict__ held apart from it
            got.append(ev.value)
            if len(got) == 3:
                return [got, ev is LAST, ev in SEEN, mode != "apart" or held is vars(ev)]
"""


@pytest.mark.parametrize("mode", ["plain", "module", "global", "apart"])
def test_an_event_held_across_an_await_restores_as_the_checkpoint_pickler_keeps_it(mode) -> None:
    """The fast path writes an Event only where the checkpoint pickler writes it by its own
    reduce: not where it is module data, a module global, or holds its __dict__ apart."""
    wf = _compile(_EVENTS, "events")
    cont = wf.start(mode)
    step(cont)
    step(cont, send=workflows.Event("x", 1))
    assert _plain_frames(cont._frames) == (mode == "plain")
    if mode == "plain":  # Event is a global of this module: written as that global
        assert checkpoint(cont).endswith(_dumps(cont._frames))
    _, r = _run_restoring_each_time(wf, (mode,), _select_replies([1, 2, 3]))
    assert isinstance(r, Finished)
    got = [1, 2, 3] if mode != "global" else [0, 0, 0]
    assert r.value == [got, mode == "global", mode == "module", True]
