"""Corpus: awaits inside expressions; evaluation order made visible with ``tick``/``log``."""

from __future__ import annotations

from workflows import Cancelled, ProcedureFailed, procedure, signal, timer, workflow

from .diffharness import C, add
from .probes import Box, double, explode, ident, is_even, log, plus, tick

F0 = frozenset({0})
F1 = frozenset({1})


@workflow
async def binop_order(x):
    """Operands left of an await are evaluated before it, operands right of it after."""
    r = tick(1) + (await procedure(double, tick(x))) * tick(3) - tick(4)
    s = [tick("a"), await procedure(ident, tick("b")), tick("c")]
    t = (tick(5), tick(6) + await procedure(double, 1), (await procedure(ident, tick(7))))
    return r, s, t


add(binop_order, C(2), C(5, results={"double": lambda v: v + 1}), C(2, fail_at=F1, raises=ProcedureFailed))


@workflow
async def call_argument_order(x):
    """Callee, positional args, *args, keywords and **kwargs evaluate in order around awaits."""

    def f(*a, **k):
        log(("f", a, sorted(k.items())))
        return len(a) + len(k)

    def pick(v):
        log(("pick", v))
        return f

    r1 = pick(1)(tick(1), await procedure(double, x), *[tick(2), tick(3)], k=tick(4))
    r2 = f(tick(5), *(await procedure(ident, [x, x])), **{"z": tick(6)}, w=await procedure(ident, 7))
    r3 = f(**(await procedure(ident, {"a": tick(8)})), b=tick(9))
    return r1, r2, r3


add(call_argument_order, C(1), C(4))


@workflow
async def method_call_bound_before_await(x):
    """`obj.meth(await ...)` looks the method up before the await, even if obj is rebound."""
    items = []
    holder = Box(0, items)
    holder.items.append(await procedure(double, x))
    other = []
    target = items
    target.append(await procedure(ident, (target := other) is other))
    log(("items", items, "other", other))
    s = "-"
    r = s.join(await procedure(ident, ["a", "b"]))
    return items, other, r


add(method_call_bound_before_await, C(1), C(3))


@workflow
async def augassign_name_read_first(x):
    """`t += await ...` reads t before the await; a closure rebinding t meanwhile is not seen."""
    t = 10

    def bump():
        nonlocal t
        t = 1000
        return 1

    t += await procedure(double, bump() + x)
    u = [1]
    alias = u
    u += await procedure(ident, [2])
    return t, u, alias is u, alias


add(augassign_name_read_first, C(1), C(2))


@workflow
async def augassign_attribute_and_subscript(x):
    """Augmented assignment on attributes and subscripts: target object and key evaluated first."""
    b = Box(1, [0, 0, 0])
    alias = b
    b.n += await procedure(double, x)
    b.items[tick(1)] += await procedure(double, tick(2))
    boxes = [b, Box(100)]
    i = 0

    def idx():
        nonlocal i
        i += 1
        return i - 1

    boxes[idx()].n *= await procedure(plus, x, 1)
    d = {"k": [1]}
    d[log("k")] += await procedure(ident, [2])
    return alias.n, alias.items, boxes[1].n, i, d


add(augassign_attribute_and_subscript, C(1), C(3))


@workflow
async def augassign_walrus_visible(x):
    """A walrus inside the right side of `+=` rebinds the target after it was read."""
    t = 5
    t += (t := await procedure(double, x)) + 1
    return t


add(augassign_walrus_visible, C(1, returns=5 + 2 + 1), C(4))


@workflow
async def and_or_short_circuit(x):
    """and/or with awaits keep short-circuit and return the deciding operand, not a bool."""
    a = tick(0) and await procedure(double, x)
    b = tick(x) and await procedure(ident, "") or await procedure(ident, "fallback")
    c = await procedure(ident, x) or tick("skip-me")
    d = (await procedure(is_even, x)) and (await procedure(double, x)) and tick("last")
    e = x > 2 or await procedure(ident, "small")
    return a, b, c, d, e


add(and_or_short_circuit, C(0), C(1), C(2), C(3))


@workflow
async def conditional_expression(x):
    """`a if t else b` with awaits in the test and in one branch only."""
    r = (await procedure(double, x)) if await procedure(is_even, x) else tick(-x)
    s = tick("yes") if x > 1 else await procedure(ident, "no")
    t = [await procedure(ident, i) if i % 2 else i for i in range(3)]
    return r, s, t


add(conditional_expression, C(2), C(3), C(0), C(1, fail_at=F0, raises=ProcedureFailed))


@workflow
async def comparison_chains(x):
    """`a < await b < c` evaluates each operand once and short-circuits."""
    r1 = tick(1) < await procedure(double, x) < tick(10)
    r2 = await procedure(ident, x) == tick(x) != await procedure(double, x)
    r3 = tick(100) < await procedure(ident, x) < tick("not evaluated")
    r4 = 0 <= (await procedure(ident, x)) in tick([0, 1, 2, 3])
    return r1, r2, r3, r4


add(comparison_chains, C(0), C(1), C(3), C(6))


@workflow
async def walrus_forms(xs):
    """Walrus at statement level, in conditions, and inside comprehensions (binds outside)."""
    if (n := len(await procedure(ident, xs))) > 2:
        log(("long", n))
    while (v := await procedure(double, n)) < 20:
        n += 3
    ys = [(last := await procedure(double, y)) for y in xs if (z := y) >= 0]
    try:
        zz = z
    except NameError:
        zz = "unbound"
    return n, v, ys, last if xs else None, zz


add(walrus_forms, C([1, 2, 3]), C([1, -1]), C([5]), C([], returns=(12, 24, [], None, "unbound")))


@workflow
async def comprehensions_with_await(n):
    """List, set and dict comprehensions with awaits in element, condition and nested loops."""
    lst = [await procedure(double, i) for i in range(n) if await procedure(is_even, i)]
    st = {await procedure(ident, i % 2) for i in range(n)}
    dct = {tick(f"k{i}"): await procedure(double, tick(i)) for i in range(n)}
    nested = [(i, j, await procedure(plus, i, j)) for i in range(n) for j in range(i) if j != 1]
    i = "outer i"
    inner = [i for i in [await procedure(ident, "x")]]
    return lst, sorted(st), dct, nested, i, inner


add(comprehensions_with_await, C(0), C(3), C(4, fail_at=frozenset({5}), raises=ProcedureFailed))


@workflow
async def comprehension_first_iterable_first(n):
    """The first iterable is evaluated before the element's awaits; later iterables per turn."""
    r = [
        (a, b, await procedure(ident, a * b))
        for a in tick([await procedure(double, n), 1])
        for b in tick(range(a % 3))
    ]
    return r


add(comprehension_first_iterable_first, C(1), C(2))


@workflow
async def fstrings(x):
    """f-strings with awaits in values, conversions and nested format specs."""
    w = 6
    s = f"{tick('a')}-{await procedure(double, x)!r}-{await procedure(ident, 'q')!s:>{w}}"
    t = f"{x:0{await procedure(double, 2)}d}|{(await procedure(ident, 3.14159)):.{x}f}"
    return s, t


add(fstrings, C(1), C(3))


@workflow
async def closures_late_binding(x):
    """Closures and lambdas see later writes to workflow locals (late binding), across awaits."""
    k = 1
    add_k = lambda v: v + k  # noqa: E731
    fns = [lambda i=i: i * k for i in range(3)]

    def outer():
        def inner():
            return k * 100

        return inner

    before = add_k(0)
    k = await procedure(double, x)
    after = add_k(0)
    r = [f() for f in fns]
    g = outer()
    k += 1
    await timer("t", 1)
    return before, after, r, g(), add_k(1)


add(closures_late_binding, C(1), C(5), C(1, cancel_at=1, raises=Cancelled))


@workflow
async def nonlocal_in_nested_def(x):
    """A nested def with `nonlocal` writes the workflow local; the write survives a checkpoint."""
    count = 0

    def incr(by):
        nonlocal count
        count += by
        return count

    incr(1)
    await timer("t", 1)
    incr(await procedure(double, x))
    await timer("t2", 1)
    return count, incr(0)


add(nonlocal_in_nested_def, C(1, returns=(3, 3)), C(4, returns=(9, 9)))


@workflow
async def nested_class(x):
    """A class defined in the workflow, instantiated and used across awaits; class scope rules."""
    base = await procedure(double, x)

    class Acc:
        start = 7  # class-level name, not visible inside methods as a bare name

        def __init__(self):
            self.total = base

        def add(self, v):
            self.total += v
            return self

        def peek(self):
            try:
                return start  # noqa: F821 - class scope is not enclosing
            except NameError:
                return ("no class scope", Acc.start)

    a = Acc()
    a.add(await procedure(double, 1))
    await timer("t", 1)
    a.add(Acc.start)
    return a.total, a.peek(), type(a).__name__


add(nested_class, C(1), C(2))


@workflow
async def unpacking_targets(x):
    """Tuple, starred, attribute and subscript assignment targets from awaited values."""
    a, (b, *c), d = await procedure(ident, [x, [1, 2, 3], 4])
    box = Box()
    arr = [0, 0]
    box.n, arr[tick(1)] = await procedure(ident, (tick("v1"), tick("v2")))
    first = second = await procedure(double, x)
    *head, tail = await procedure(ident, "abc")
    return a, b, c, d, box.n, arr, first, second, head, tail


add(unpacking_targets, C(1), C(2))


@workflow
async def subscript_and_slices(xs):
    """Awaits inside subscripts and slice bounds; containers built around awaits."""
    lo = await procedure(ident, 1)
    part = xs[lo : await procedure(double, 1)]
    d = {tick("k1"): tick(1), await procedure(ident, "k2"): tick(2), **{"k3": await procedure(double, 3)}}
    s = {tick(1), await procedure(ident, 2)}
    return part, d, sorted(s), xs[await procedure(ident, -1)]


add(subscript_and_slices, C([1, 2, 3, 4]), C(["a", "b"]), C([], raises=IndexError))


@workflow
async def unary_and_not(x):
    """Unary operators and `not` over awaits; `is`/`in` tests on awaited values."""
    a = -(await procedure(double, x))
    b = not await procedure(is_even, x)
    c = ~(await procedure(ident, x))
    d = (await procedure(ident, None)) is None
    e = x in await procedure(ident, [1, 2])
    return a, b, c, d, e


add(unary_and_not, C(1), C(2), C(3))


@workflow
async def await_result_reused(x):
    """An awaited value kept in a local is reused after later awaits (no re-evaluation)."""
    first = await procedure(double, x)
    log(first)
    second = await procedure(double, first)
    pair = (first, second, await procedure(plus, first, second))
    return pair


add(await_result_reused, C(1), C(2), C(1, fail_at=frozenset({2}), raises=ProcedureFailed))


@workflow
async def expression_statement_awaits(x):
    """Awaits as bare expression statements, discarded results, and await of await results."""
    await procedure(double, x)
    await timer("t", 1)
    (await procedure(ident, [1]))
    log(await procedure(ident, "logged"))
    return await procedure(double, await procedure(double, x))


add(expression_statement_awaits, C(1), C(3))


@workflow
async def lambda_sort_keys(xs):
    """A lambda over a workflow local used as a sort key after awaits."""
    weight = await procedure(ident, {v: -v for v in xs})
    order = sorted(xs, key=lambda v: weight[v])
    flip = await signal("flip")
    if flip:
        weight = {v: v for v in xs}
        order = sorted(xs, key=lambda v: weight[v])
    return order


add(lambda_sort_keys, C([3, 1, 2]), C([3, 1, 2], signals={"flip": [True]}))


@workflow
async def exception_inside_expression(x):
    """An await's exception interrupts an expression midway; earlier side effects remain."""
    try:
        r = tick("before") + (await procedure(explode, x)) + tick("after")
    except ProcedureFailed:
        r = "failed"
    try:
        q = [tick(1), 1 / (await procedure(ident, x)), tick(2)]
    except ZeroDivisionError:
        q = "zero"
    return r, q


add(exception_inside_expression, C(0), C(2))


@workflow
async def star_expressions(xs):
    """Starred expressions with awaits in lists, tuples, sets, calls and assignment."""
    a = [*await procedure(ident, xs), *[tick(1)]]
    b = (*(await procedure(ident, xs)), await procedure(double, 1))
    c = {*xs, *(await procedure(ident, [9]))}
    d = max(*a, await procedure(double, 10))
    return a, b, sorted(c), d


add(star_expressions, C([1, 2]), C([5]))


@workflow
async def chained_attribute_and_calls(x):
    """Awaited values used through chained attribute access, indexing and method calls."""
    s = (await procedure(ident, " Hello ")).strip().lower()
    n = (await procedure(ident, {"a": [1, 2, 3]}))["a"][await procedure(ident, x)]
    box = Box(await procedure(ident, [4, 5]))
    m = box.n.index(await procedure(ident, 5))
    return s, n, m


add(chained_attribute_and_calls, C(0), C(2), C(5, raises=IndexError))


@workflow
async def many_locals_and_temps(n):
    """Many locals and temporaries alive across many awaits (all restored correctly)."""
    a = b = c = d = e = 0
    for i in range(n):
        a += await procedure(double, i)
        b = a + (await procedure(ident, i)) * (c + 1)
        c, d = d + 1, c - 1
        e = [a, b, c, d, e if isinstance(e, int) else len(e)]
    return a, b, c, d, e


add(many_locals_and_temps, C(0), C(3), C(5))


@workflow
async def local_import_and_module_values(x):
    """A local import binds a module that survives checkpoints; its functions keep working."""
    import math

    v = await procedure(double, x)
    await timer("t", 1)
    return math.sqrt(v * v), math.pi > 3


add(local_import_and_module_values, C(3), C(0))


@workflow
async def bool_of_awaited_in_while(n):
    """while conditions made of and/or/not around awaits."""
    i = 0
    while i < n and not await procedure(is_even, i + 1) or i == 0:
        i += 1
        if i > 10:
            break
    return i


add(bool_of_awaited_in_while, C(0), C(1), C(5))


@workflow
async def generator_without_await(n):
    """A generator expression with no await stays native (and is consumed before suspending)."""
    total = sum(x * x for x in range(n))
    await timer("t", 1)
    ys = list(y for y in range(total % 5))
    return total, ys, await procedure(double, total)


add(generator_without_await, C(0), C(4))


# No reference to the harness module stays: a checkpoint walks the data of the user modules
# that a workflow's module imports, and the harness holds the whole corpus.
del C, add
