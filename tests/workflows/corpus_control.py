"""Corpus: control flow with awaits (the seed's three unsupported patterns first).

Each workflow is registered with several cases (arguments and oracle variants) and runs natively
and compiled in ``test_differential.py``.
"""

from __future__ import annotations

from workflows import (
    Cancelled,
    Event,
    ProcedureFailed,
    procedure,
    reducer,
    select,
    signal,
    timer,
    workflow,
)

from .diffharness import C, add
from .probes import (
    Boom,
    double,
    explode,
    fetch,
    ident,
    is_even,
    log,
    note,
    plus,
    tick,
)

# --- seed pattern 1: nested if/elif/else with awaits in inner branches ------------------------


@workflow
async def nested_if_inner_awaits(x, y):
    """Awaits only in the innermost branches of a three-level if/elif/else."""
    out = []
    if x > 0:
        if y > 0:
            out.append(await procedure(double, x))
        elif y == 0:
            if x > 5:
                out.append(await procedure(double, y + 100))
            else:
                await timer("small", 1)
                out.append("small")
        else:
            out.append(log("neg-y"))
    elif x == 0:
        if await signal("zero"):
            out.append("zero-yes")
        else:
            out.append("zero-no")
    else:
        out.append(await procedure(ident, "negative"))
    log(out)
    return out


add(
    nested_if_inner_awaits,
    C(3, 4, returns=[6]),
    C(7, 0, returns=[200]),
    C(2, 0, returns=["small"]),
    C(1, -1, returns=["neg-y"]),
    C(0, 0, signals={"zero": [True]}, returns=["zero-yes"]),
    C(0, 0, returns=["zero-no"]),
    C(-5, 1, returns=["negative"]),
    C(3, 4, fail_at=frozenset({0}), raises=ProcedureFailed),
)


@workflow
async def elif_chain_after_await(n):
    """An elif chain whose tests each await, evaluated only until one is true."""
    if await procedure(is_even, log(n)):
        kind = "even"
    elif await procedure(is_even, log(n + 1)) and n > 10:
        kind = "odd-big"
    elif (await procedure(double, n)) > 10:
        kind = "odd-mid"
    else:
        kind = "odd-small"
    await timer("after", 1)
    return kind


add(
    elif_chain_after_await,
    C(4, returns="even"),
    C(13, returns="odd-big"),
    C(7, returns="odd-mid"),
    C(1, returns="odd-small"),
    C(7, cancel_at=2, raises=Cancelled),
)


@workflow
async def nested_if_in_loop(limit):
    """Nested conditionals with awaits inside a while loop that also awaits in its test."""
    i = 0
    acc = []
    while i < limit:
        if i % 2 == 0:
            if i % 4 == 0:
                acc.append(await procedure(double, i))
            else:
                acc.append(-(await procedure(double, i)))
        else:
            if await signal("odd"):
                acc.append("sig")
        i += 1
    return acc


add(
    nested_if_in_loop,
    C(0, returns=[]),
    C(5, signals={"odd": [1, 0]}),
    C(6, signals={"odd": [1, 1, 1]}),
    C(6, cancel_at=3, raises=Cancelled),
)

# --- seed pattern 2: match with awaits in subject, guards and bodies ---------------------------


@workflow
async def match_subject_guard_body(x):
    """match whose subject, guards and bodies await; captures stay bound when a guard fails."""
    match await procedure(ident, x):
        case [a, *rest] if await procedure(is_even, a):
            r = ("even-head", a, rest, await procedure(double, a))
        case [a, *rest]:
            r = ("head", a, rest)
        case {"k": v} if v > await procedure(double, 1):
            r = ("big-k", v)
        case {"k": v}:
            r = ("k", v, await signal("more"))
        case int(n) if n > 0:
            await timer("pos", n)
            r = ("pos", n)
        case str() | bytes():
            r = "text"
        case _:
            r = "other"
    log(r)
    return r


add(
    match_subject_guard_body,
    C([2, 3, 4], returns=("even-head", 2, [3, 4], 4)),
    C([1, 3], returns=("head", 1, [3])),
    C({"k": 5}, returns=("big-k", 5)),
    C({"k": 1}, signals={"more": ["m"]}, returns=("k", 1, "m")),
    C(3, returns=("pos", 3)),
    C("s", returns="text"),
    C(-1, returns="other"),
    C([2], fail_at=frozenset({1}), raises=ProcedureFailed),
)


@workflow
async def match_capture_survives_failed_guard(x):
    """A name bound by a pattern whose guard fails stays bound (CPython's behaviour)."""
    match x:
        case (a, b) if await procedure(is_even, a + b):
            return ("even-sum", a, b)
        case _:
            pass
    try:
        return ("fallthrough", a, b)  # noqa: F821 - bound by the failed case
    except NameError as e:
        return ("unbound", type(e).__name__)


add(
    match_capture_survives_failed_guard,
    C((1, 1), returns=("even-sum", 1, 1)),
    C((1, 2), returns=("fallthrough", 1, 2)),
    C(5, returns=("unbound", "UnboundLocalError")),
)


@workflow
async def match_event_loop(rounds):
    """match on select Events with value captures (case Event("bid", bid))."""
    price = 10
    bidder = None
    for _ in range(rounds):
        match await select(timer("end", 60), signal("bid"), signal("cancel")):
            case Event("end"):
                return {"winner": bidder, "price": price}
            case Event("bid", bid) if bid["amount"] > price:
                bidder, price = bid["who"], bid["amount"]
                reducer(note, "bid", bidder, price)
            case Event("bid", bid):
                reducer(note, "low", bid["who"])
            case Event("cancel") if bidder is None:
                return {"cancelled": True}
            case Event("cancel"):
                log("cannot cancel")
    return {"rounds-out": price}


bids = {"bid": [{"who": "a", "amount": 20}, {"who": "b", "amount": 15}, {"who": "c", "amount": 30}]}
add(
    match_event_loop,
    C(5, signals=bids, choose=["bid", "bid", "cancel", "bid"]),
    C(5, choose=["cancel"], returns={"cancelled": True}),
    C(2, signals=bids, choose=["bid", "bid"], returns={"rounds-out": 20}),
    C(5, signals=bids, choose=["bid", "cancel", "bid", "end"]),
    C(5, signals=bids, choose=["bid"], cancel_at=1, raises=Cancelled),
)


@workflow
async def match_class_and_value_patterns(p):
    """Class patterns with keyword captures, value patterns and or-patterns, awaiting in bodies."""
    from .probes import Point

    match p:
        case Point(x=0, y=yy):
            r = ("on-y", yy, await procedure(double, yy))
        case Point(x=px) if px < 0:
            r = ("left", px)
        case Point(x=px, y=0) | Point(x=0, y=px):
            r = ("axis", px)
        case Point(x=px, y=py):
            await timer("p", 1)
            r = ("pt", px + py)
        case _:
            r = None
    return r


def _pts():
    from .probes import Point

    return [Point(0, 4), Point(-3, 1), Point(5, 0), Point(2, 3)]


add(match_class_and_value_patterns, *[C(p) for p in _pts()], C(None, returns=None))

# --- seed pattern 3: several awaits in one branch / expression ---------------------------------


@workflow
async def several_awaits_one_branch(n):
    """Three awaits in one branch, and `total += await ...` in a loop."""
    total = 0
    if n > 0:
        a = await procedure(double, n)
        b = await procedure(double, a)
        await timer("pause", 1)
        total += a + b
    for i in range(n):
        total += await procedure(double, i)
    if not await procedure(is_even, total):
        total = -total
    return total


add(
    several_awaits_one_branch,
    C(0, returns=0),
    C(1, returns=6),
    C(3, returns=24),
    C(3, fail_at=frozenset({4}), raises=ProcedureFailed),
    C(2, results={"double": lambda v: v + 1}),
)


@workflow
async def if_not_await(n):
    """`if not await procedure(...)` with continue, inside a loop (the production workflow's shape)."""
    done = []
    for i in range(n):
        if not await procedure(is_even, i):
            continue
        done.append(i)
        if len(done) > 2:
            break
    else:
        done.append("no-break")
    return done


add(
    if_not_await,
    C(0, returns=["no-break"]),
    C(3, returns=[0, 2, "no-break"]),
    C(9, returns=[0, 2, 4]),
    C(5, results={"is_even": lambda v: not v}),
)

# --- loops --------------------------------------------------------------------------------------


@workflow
async def while_else_break_continue(n):
    """while/else with break and continue decided by awaited values."""
    i = 0
    seen = []
    while i < n:
        i += 1
        v = await procedure(double, i)
        if v % 3 == 0:
            continue
        if v > 12:
            break
        seen.append(v)
    else:
        seen.append(("else", i))
    return seen


add(
    while_else_break_continue,
    C(0, returns=[("else", 0)]),
    C(5, returns=[2, 4, 8, 10, ("else", 5)]),
    C(9, returns=[2, 4, 8, 10]),
    C(4, results={"double": lambda v: v * 5}),
)


@workflow
async def for_else_nested_loops(rows):
    """Nested for loops with else clauses, breaks in the inner loop, awaits in both."""
    out = []
    for r in rows:
        for c in r:
            if c < 0:
                out.append(("neg", c))
                break
            out.append(await procedure(double, c))
        else:
            out.append(await signal("row-done"))
            continue
        out.append("after-break")
    else:
        out.append("all-rows")
    return out


add(
    for_else_nested_loops,
    C([], returns=["all-rows"]),
    C([[1, 2], [3, -1, 4], []], signals={"row-done": ["d1", "d2"]}),
    C([[-1]], returns=[("neg", -1), "after-break", "all-rows"]),
)


@workflow
async def for_over_iterables(d):
    """for loops over dict items, enumerate, zip and reversed range, each resumed mid-loop."""
    out = []
    for k, v in d.items():
        out.append((k, await procedure(double, v)))
    for i, k in enumerate(sorted(d), start=1):
        await timer(f"t{i}", i)
        out.append((i, k))
    for a, b in zip(range(3), "xyz", strict=False):
        out.append(a * (await procedure(double, 1)) * b)
    for j in reversed(range(2)):
        out.append(await procedure(ident, j))
    return out


add(for_over_iterables, C({"a": 1, "b": 2}), C({}), C({"z": 0}, cancel_at=2, raises=Cancelled))


@workflow
async def loop_var_after_loop(n):
    """The loop variable keeps its last value after the loop and after a break."""
    for i in range(n):
        await timer("t", 1)
        if i == 2:
            break
    try:
        last = i
    except NameError:
        last = "unbound"
    j = 99
    for j in []:  # noqa: B007 - an empty loop leaves j untouched
        await timer("never", 1)
    return last, j


add(
    loop_var_after_loop,
    C(0, returns=("unbound", 99)),
    C(2, returns=(1, 99)),
    C(5, returns=(2, 99)),
)


@workflow
async def loop_mutating_list(xs):
    """A for loop over a list the body appends to (the iterator sees the growth)."""
    for x in xs:
        if x < 3:
            xs.append(await procedure(double, x + 1) // 2)
        log(x)
    return xs


add(loop_mutating_list, C([0]), C([2, 5]), C([]))


@workflow
async def while_true_with_return(limit):
    """while True that leaves only by return from inside a nested if."""
    n = 0
    while True:
        n += await procedure(double, 1)
        if n >= limit:
            if n % 4 == 0:
                return ("four", n)
            return ("other", n)


add(while_true_with_return, C(1, returns=("other", 2)), C(8, returns=("four", 8)), C(5))


@workflow
async def deep_nesting(a, b):
    """Four levels of nested loops and conditionals with a continue that skips an await."""
    res = []
    for i in range(a):
        j = 0
        while j < b:
            j += 1
            if (i + j) % 2:
                if j == b:
                    res.append(await procedure(plus, i, j))
                    continue
                res.append(tick(j))
            else:
                for k in range(2):
                    if k:
                        await timer("k", k)
                    else:
                        continue
                    res.append((i, j, k))
    return res


add(deep_nesting, C(2, 3), C(0, 4, returns=[]), C(3, 2), C(3, 3, cancel_at=4, raises=Cancelled))


@workflow
async def early_returns(x):
    """Returns from several depths, with awaits before and after."""
    if x is None:
        return "none"
    v = await procedure(ident, x)
    for i in range(3):
        if v == i:
            return ("loop", i, await procedure(double, i))
    while v > 10:
        if await procedure(is_even, v):
            return ("even", v)
        v -= 1
    return ("end", v)


add(
    early_returns,
    C(None, returns="none"),
    C(1, returns=("loop", 1, 2)),
    C(13, returns=("even", 12)),
    C(5, returns=("end", 5)),
)


@workflow
async def del_and_rebind(n):
    """del of a local across awaits; reading it after del raises UnboundLocalError."""
    x = await procedure(double, n)
    y = x
    del x
    await timer("t", 1)
    if n > 2:
        x = "again"
        return (x, y)
    return x  # noqa: F821 - deliberately unbound


add(
    del_and_rebind,
    C(3, returns=("again", 6)),
    C(1, raises=UnboundLocalError),
)


@workflow
async def global_counter(n):
    """A module global read and written around awaits (late-bound, not checkpointed)."""
    global COUNTER
    COUNTER = 0
    for i in range(n):
        COUNTER += await procedure(double, i)
    return COUNTER


COUNTER = 0
add(global_counter, C(3, returns=6), C(0, returns=0))


@workflow
async def unbound_local_read(flag):
    """Reading a local assigned only on one path raises UnboundLocalError like native."""
    if flag:
        v = await procedure(ident, "set")
    await timer("t", 1)
    return v  # noqa: F821


add(unbound_local_read, C(True, returns="set"), C(False, raises=UnboundLocalError))


@workflow
async def raise_from_await(x):
    """raise with awaited exception arguments and an awaited cause."""
    if x == 1:
        raise ValueError(await procedure(double, 21))
    if x == 2:
        raise KeyError(await procedure(ident, "k")) from Boom(await procedure(double, 2), "c")
    if x == 3:
        raise Boom(await procedure(ident, 7), "direct") from None
    return await procedure(explode, x)


add(
    raise_from_await,
    C(1, raises=ValueError),
    C(2, raises=KeyError),
    C(3, raises=Boom),
    C(4, raises=ProcedureFailed),
)


@workflow
async def arguments_and_defaults(a, b=2, *rest, c=3, **kw):
    """Arguments bound like the native function: defaults, *args, keyword-only and **kwargs."""
    r = await procedure(ident, (a, b, rest, c, sorted(kw.items())))
    return r


add(
    arguments_and_defaults,
    C(1),
    C(1, 5, 6, 7),
    C(raises=TypeError, label="missing argument"),
)


@workflow
async def fetch_each(keys):
    """A simple loop of procedure calls (also used as a spawned child and an inline helper)."""
    return [await procedure(fetch, k) for k in keys]


add(fetch_each, C([1, 2, 3]), C([]), C([5], fail_at=frozenset({0}), raises=ProcedureFailed))


# No reference to the harness module stays: a checkpoint walks the data of the user modules
# that a workflow's module imports, and the harness holds the whole corpus.
del C, add
