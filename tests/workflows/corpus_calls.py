"""Corpus: inline sub-workflows, spawn, select/gather, and effects (reducer/send/subscribe/now)."""

from __future__ import annotations

from workflows import (
    Cancelled,
    ChildFailed,
    Event,
    ProcedureFailed,
    broadcast,
    gather,
    now,
    procedure,
    reducer,
    select,
    send,
    signal,
    spawn,
    subscribe,
    timer,
    unsubscribe,
    workflow,
    workflow_id,
)

from .diffharness import C, add, boom
from .probes import Boom, Oops, double, explode, ident, log, note, show, tick

F0 = frozenset({0})
F1 = frozenset({1})

# --- inline sub-workflows ------------------------------------------------------------------------


@workflow
async def leaf(x):
    """Innermost helper: awaits twice and may raise."""
    log(("leaf", x))
    v = await procedure(double, x)
    if v > 100:
        raise Oops(v)
    await timer("leaf", 1)
    return v


@workflow
async def middle(x, y=1):
    """Middle helper: calls leaf inline twice, catching its failure once."""
    a = await leaf(x)
    try:
        b = await leaf(y * 100)
    except Oops as e:
        b = ("caught", e.args[0])
    reducer(note, "middle", a)
    return a, b


@workflow
async def top_inline(x):
    """Three levels of inline workflow calls; effects and log interleave in call order."""
    log("top start")
    r = await middle(x, y=0)
    r2 = await middle(tick(x + 1))
    reducer(show, r, r2)
    return r, r2


add(
    top_inline,
    C(1),
    C(2, fail_at=F0, raises=ProcedureFailed),
    C(1, fail_at=frozenset({3}), raises=Boom),
    C(1, cancel_at=5, raises=Cancelled),
    C(60, raises=Oops),
)


@workflow
async def raises_through(n):
    """Helper that raises a custom exception after awaiting, from inside a finally."""
    try:
        await timer("r", n)
    finally:
        log("raises_through finally")
    raise Boom(n, "from helper")


@workflow
async def inline_exception_crossing(n):
    """An exception raised in an inline helper is caught by the caller at the await line."""
    out = []
    for i in range(n):
        try:
            out.append(await raises_through(i))
        except Boom as b:
            out.append(("boom", b.code))
            await timer("after", 1)
    try:
        await raises_through(99)
    finally:
        out.append("outer finally")
        log(out)


add(
    inline_exception_crossing,
    C(2, raises=Boom),
    C(1, cancel_at=0, raises=Cancelled),
    C(2, error=boom, fail_at=F1, raises=Boom),
)


@workflow
async def recursive_helper(n):
    """A workflow awaiting itself inline (recursion through the frame stack)."""
    if n <= 0:
        return await procedure(ident, [])
    rest = await recursive_helper(n - 1)
    return rest + [await procedure(double, n)]


add(recursive_helper, C(0, returns=[]), C(3, returns=[2, 4, 6]), C(3, fail_at=frozenset({2}), raises=ProcedureFailed))


@workflow
async def helper_with_effects(tag):
    """Helper recording effects and reading the clock and the workflow id inside."""
    reducer(note, "helper", tag, now())
    await timer("h", 1)
    send("other", "ping", {"tag": tag, "at": now(), "from": workflow_id()})
    return now()


@workflow
async def effects_in_helpers(n):
    """Effects recorded by inline helpers go to the same steps, in order, as native."""
    times = []
    subscribe("news", n)
    for i in range(n):
        times.append(await helper_with_effects(i))
        broadcast("tick", i, {"t": now()})
    unsubscribe("news", n)
    return times


add(effects_in_helpers, C(0), C(2), C(3, cancel_at=2, raises=Cancelled))


@workflow
async def helper_returning_closure(k):
    """Helper returns a closure over its own locals; the caller calls it after more awaits."""
    base = await procedure(double, k)
    return lambda v: v + base


@workflow
async def closure_from_helper(k):
    """A closure made inside an inline helper survives checkpoints in the caller."""
    f = await helper_returning_closure(k)
    await timer("t", 1)
    return f(1), f(await procedure(ident, 10))


add(closure_from_helper, C(1, returns=(3, 12)), C(4))


@workflow
async def helper_arguments_evaluated_first(x):
    """Arguments of an inline call are evaluated (with ticks) before the helper runs."""
    r = await middle(tick(x), y=tick(0))
    s = [tick("pre"), await leaf(tick(x + 1)), tick("post")]
    return r, s


add(helper_arguments_evaluated_first, C(1), C(2))


# --- spawn, select, gather -----------------------------------------------------------------------


@workflow
async def child_task(delay, value):
    """A child: waits, then returns its value (as in the seed's parent/child example)."""
    await timer("complete", delay)
    return value


@workflow
async def parent_of_children(count):
    """Spawn children in a loop and sum their results (`total += await spawn(...)`)."""
    total = 0
    for i in range(count):
        total += await spawn(child_task, 1, 10 * (i + 1), id=f"task_{i}")
    return total


add(
    parent_of_children,
    C(3, child=lambda cmd: cmd.args[1], returns=60),
    C(0, returns=0),
    C(2, child=lambda cmd: cmd.args[1], fail_at=F1, raises=ChildFailed),
    C(3, child=lambda cmd: cmd.args[1], cancel_at=1, raises=Cancelled),
)


@workflow
async def select_arms_and_events(n):
    """select over timers, signals, procedures and children; Event fields drive the logic."""
    log_ = []
    for i in range(n):
        ev = await select(
            timer("tick", 5),
            signal("msg"),
            procedure(double, i, name="calc"),
            spawn(child_task, 1, i, name="kid"),
        )
        log_.append((ev.name, ev.kind, ev.value))
        if ev.kind == "signal" and ev.value == "stop":
            break
    return log_


add(
    select_arms_and_events,
    C(4, signals={"msg": ["hi", "stop"]}, choose=["calc", "msg", "kid", "msg"]),
    C(2),
    C(3, choose=["calc"], fail_at=F1, raises=Boom),
    C(3, choose=[3, 0, 1]),
)


@workflow
async def gather_results(xs):
    """gather returns results in order; a failure in gather raises at the await."""
    rs = await gather(*[procedure(double, x) for x in xs], timer("g", 1))
    try:
        more = await gather(procedure(explode, 1), procedure(double, 2))
    except ProcedureFailed as e:
        more = ("failed", e.error_type)
    return rs, more


add(gather_results, C([1, 2]), C([5]), C([1], fail_at=F0, raises=Boom))


@workflow
async def match_on_select_events(n):
    """match over select Events with captures, guards awaiting, and a default."""
    seen = []
    for _ in range(n):
        match await select(signal("a"), signal("b"), timer("t", 3)):
            case Event("a", v) if await procedure(ident, v) > 1:
                seen.append(("a-big", v))
            case Event("a", v):
                seen.append(("a", v))
            case Event("b", {"x": x, **rest}):
                seen.append(("b", x, sorted(rest)))
            case Event(name, None):
                seen.append(("none", name))
            case Event(name, value):
                seen.append(("other", name, value))
    return seen


add(
    match_on_select_events,
    C(5, signals={"a": [1, 2], "b": [{"x": 1, "y": 2}, 7]}, choose=["a", "b", "a", "t", "b"]),
    C(2),
    C(3, signals={"a": [5]}, choose=["a", "a"], cancel_at=2, raises=Cancelled),
)


@workflow
async def deadline_select_loop(deadline):
    """A loop of selects against an absolute deadline timer (timer(at=...)) and the clock."""
    start = now()
    got = []
    while True:
        ev = await select(timer("deadline", at=start + deadline), signal("item"))
        if ev.name == "deadline":
            break
        got.append((ev.value, now() - start))
    return got


add(
    deadline_select_loop,
    C(100, signals={"item": [1, 2, 3]}, choose=["item", "item", "item"]),
    C(5),
)


# --- effects in order ----------------------------------------------------------------------------


@workflow
async def effects_in_order(n):
    """reducer/send/broadcast/subscribe in one step keep call order; now() is the step's clock."""
    subscribe("price", "gold")
    reducer(note, "start", now())
    send("peer", "hello", n)
    for i in range(n):
        reducer(note, i, tick(i))
        got = await signal("go")
        reducer(show, got, now())
        broadcast("progress", "gold", i)
    unsubscribe("price", "gold")
    return now()


add(effects_in_order, C(0), C(3, signals={"go": ["a", "b", "c"]}), C(2, cancel_at=1, raises=Cancelled))


@workflow
async def effects_around_failures(n):
    """Effects recorded in handlers and finally blocks appear in the steps that ran them."""
    try:
        reducer(note, "try")
        await procedure(explode, n)
    except ProcedureFailed:
        reducer(note, "except")
        await timer("t", 1)
        send("x", "failed", n)
    finally:
        reducer(note, "finally")
    return workflow_id()


add(effects_around_failures, C(1), C(1, cancel_at=0, raises=Cancelled), C(1, cancel_at=1, raises=Cancelled))


# No reference to the harness module stays: a checkpoint walks the data of the user modules
# that a workflow's module imports, and the harness holds the whole corpus.
del C, add, boom
