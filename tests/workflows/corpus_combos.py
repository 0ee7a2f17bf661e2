"""Corpus: shapes that combine several constructs around awaits.

Evaluation order inside one expression with awaits in many positions, scopes that meet (class
bodies, lambdas, comprehensions, ``global`` and ``nonlocal``), exception state kept across
checkpoints, iterators and closures that live across an await, ``with`` and ``try`` nested in
loops, and the errors (with their messages and lines) that such code raises.
"""

from __future__ import annotations

import functools
import itertools
import sys
import traceback
from collections import defaultdict, deque

from workflows import Cancelled, ProcedureFailed, procedure, signal, timer, workflow

from .diffharness import C, add, boom
from .probes import (
    Boom,
    Box,
    Loud,
    Oops,
    Recorder,
    double,
    explode,
    ident,
    is_even,
    log,
    plus,
    tick,
)

F0 = frozenset({0})
F1 = frozenset({1})
F2 = frozenset({2})

_MISSING = object()
COUNTS: dict[str, int] = {}
TOTAL = 0


def _lines(e):
    """(function, line) of each traceback entry of ``e`` in this file."""
    return [(f.name, f.lineno) for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__]


class Seq:
    """An iterable whose iteration is logged item by item (unpacking order is visible)."""

    def __init__(self, *items):
        self.items = items

    def __iter__(self):
        for x in self.items:
            log(("next", x))
            yield x


class Mapping_:
    """A mapping whose ``keys`` and item reads are logged (``**m`` order is visible)."""

    def __init__(self, **kw):
        self.d = kw

    def keys(self):
        log("keys")
        return list(self.d)

    def __getitem__(self, k):
        log(("get", k))
        return self.d[k]


class Shown:
    """A value whose ``__repr__``/``__str__``/``__format__`` are logged."""

    def __init__(self, n):
        self.n = n

    def __repr__(self):
        log(("repr", self.n))
        return f"S{self.n}"

    def __str__(self):
        log(("str", self.n))
        return f"s{self.n}"

    def __format__(self, spec):
        log(("format", self.n, spec))
        return format(self.n, spec)


class Indexed:
    """A container whose item reads and writes are logged (augmented-assignment order)."""

    def __init__(self, **kw):
        self.d = dict(kw)

    def __getitem__(self, k):
        log(("getitem", k))
        return self.d[k]

    def __setitem__(self, k, v):
        log(("setitem", k, v))
        self.d[k] = v

    def __delitem__(self, k):
        log(("delitem", k))
        del self.d[k]


# ---------------------------------------------------------------------------------------------
# Evaluation order


@workflow
async def star_call_after_positional(x):
    """``f(a, *xs, k=await v)``: a and the unpacking of xs happen before the await."""
    def f(*args, **kw):
        return args, kw

    r = f(tick("a"), *Seq(1, 2), k=await procedure(double, x), **Mapping_(m=3))
    return r


add(star_call_after_positional, C(1), C(2, fail_at=F0, raises=ProcedureFailed), C(3))


@workflow
async def display_unpacking_each_side(x):
    """A list, set and dict display with unpacking on both sides of awaits."""
    a = [*Seq(1), await procedure(ident, x), *Seq(2, 3), await procedure(double, x)]
    b = {**Mapping_(p=1), "q": await procedure(ident, x), **Mapping_(r=2)}
    c = (*Seq("t"), *[await procedure(ident, "u")])
    return a, sorted(b.items()), c


add(display_unpacking_each_side, C(1), C(4), C(2, fail_at=F1, raises=ProcedureFailed))


@workflow
async def fstring_conversions_around_awaits(x):
    """Conversions and specs: each part is formatted where it stands."""
    s = Shown(x)
    t = f"{s!r}|{s!s}|{await procedure(ident, 7):>{await procedure(plus, 1, 2)}}|{s:03}|{s!r:>5}"
    u = f"{tick(x)=}, {s=}, {await procedure(double, x)=}"
    return t, u


add(fstring_conversions_around_awaits, C(1), C(12), C(3, fail_at=F1, raises=ProcedureFailed))


@workflow
async def boolop_value_truth_once(x):
    """``a and await b`` as a value: a's ``__bool__`` runs once; or-chains stop at the first truthy."""
    a = Loud(x) and await procedure(ident, Loud(x + 1))
    b = Loud(0) or Loud(x) or await procedure(ident, 5)
    c = (await procedure(ident, Loud(x))) and (await procedure(ident, Loud(0))) or Loud(9)
    d = ((Loud(x) and await procedure(ident, Loud(0))) or (Loud(x - 1) and Loud(x))) and await procedure(ident, Loud(7))
    e = not ((await procedure(ident, Loud(x))) and Loud(0) or Loud(x - 2))
    log(("results", int(a), int(b), int(c), int(d), e))
    if a and await procedure(is_even, x):
        log("both")
    return int(a), int(b), int(c)


add(boolop_value_truth_once, C(0), C(1), C(2), C(3, cancel_at=1, raises=Cancelled))


@workflow
async def annotated_subscript_and_attribute_targets(x):
    """Annotated targets with and without values, awaits in the value or in the subscript."""
    d = Indexed(k=0)
    box = Box()
    d[tick("k1")]: int = await procedure(double, x)
    d[await procedure(ident, "k2")]: int  # noqa: B032
    box.n: int = d[tick("k1")] + await procedure(ident, 1)
    box.items: list  # noqa: B032
    d[tick("a"):tick("b")]: int  # noqa: B032
    return d.d, box.n


add(annotated_subscript_and_attribute_targets, C(1), C(5), C(2, fail_at=F1, raises=ProcedureFailed))


@workflow
async def augassign_subscript_order(x):
    """``a[i()] += await v``: container, key, the current item, then the await, then the store."""
    a = Indexed(k=1, j=10)
    a[tick("k")] += await procedure(double, x)
    a[tick("j")] *= await procedure(ident, 3) + a[tick("k")]
    box = Box(Box(5))
    box.n.n -= await procedure(ident, x)
    lst = [1, 2, 3]
    lst[await procedure(ident, 1)] **= await procedure(ident, 2)
    return a.d, box.n.n, lst


add(augassign_subscript_order, C(1), C(2), C(3, fail_at=F1, raises=ProcedureFailed))


@workflow
async def augassign_missing_key_after_await(x):
    """``d[k] += await v`` on a missing key: the KeyError is raised before the await."""
    d = {"a": 1}
    try:
        d[tick("zz")] += await procedure(double, x)
    except KeyError as e:
        log(("keyerror", e.args))
    d["a"] += await procedure(ident, x)
    return d


add(augassign_missing_key_after_await, C(1), C(2), C(3))


@workflow
async def every_position_of_one_expression(x):
    """Awaits as callee, argument, subscript, attribute base, operand and slice bound."""
    table = {"f": lambda v: [v, v + 1, v + 2, v + 3]}
    r = table[await procedure(ident, "f")](await procedure(double, x))[
        await procedure(ident, 0) : await procedure(ident, 3)
    ][-await procedure(ident, 1)] * (tick(2) - await procedure(ident, x))
    s = (await procedure(ident, Box(x))).n ** await procedure(ident, 2)
    return r, s


add(every_position_of_one_expression, C(1), C(3), C(2, fail_at=F2, raises=ProcedureFailed))


@workflow
async def chained_comparisons_with_awaits(x):
    """Chains with awaits at each link; the middle operand is evaluated once."""
    out = []
    if tick(0) <= await procedure(ident, x) < tick(3) != await procedure(ident, 2):
        out.append("in")
    v = tick(1) < await procedure(ident, Loud(x)) == x
    out.append(v)
    while (n := await procedure(ident, len(out))) < x + 2 > tick(n):
        out.append(n)
    return out


add(chained_comparisons_with_awaits, C(0), C(1), C(2), C(5))


@workflow
async def conditional_expressions_nested(x):
    """Conditional expressions with awaits in the test and in each branch, nested."""
    a = await procedure(ident, "even") if await procedure(is_even, x) else tick("odd")
    b = (tick("big") if x > 2 else await procedure(ident, "small")) if Loud(x) else await procedure(ident, "zero")
    c = [await procedure(double, i) if i % 2 else i for i in range(x)]
    return a, b, c


add(conditional_expressions_nested, C(0), C(1), C(4), C(3, fail_at=F1, raises=ProcedureFailed))


@workflow
async def delete_subscripts_in_order(x):
    """``del`` of nested subscripts whose keys await; errors are the native ones."""
    d = Indexed(a=1, b=2, c=3)
    grid = [[1, 2], [3, 4]]
    del d[await procedure(ident, "a")]
    del grid[tick(0)][await procedure(ident, 1)]
    try:
        del d[await procedure(ident, "nope")]
    except KeyError as e:
        log(("missing", e.args))
    lst = list(range(6))
    del lst[tick(1) : await procedure(ident, x)]
    return d.d, grid, lst


add(delete_subscripts_in_order, C(3), C(5), C(4, fail_at=F2, raises=ProcedureFailed))


@workflow
async def assert_messages_awaited(x):
    """assert with awaits in the test and in the message; the message only when it fails."""
    assert x >= 0, f"negative {await procedure(ident, x)}"
    assert await procedure(is_even, x) or x == 1, [await procedure(ident, "odd"), tick(x)]
    return x


add(assert_messages_awaited, C(0), C(1), C(3, raises=AssertionError), C(-1, raises=AssertionError))


@workflow
async def star_assignment_targets(x):
    """Starred targets: the value with its awaits first, then unpacking (native errors)."""
    first, *mid, last = [await procedure(ident, 1), *range(x), await procedure(double, x)]
    (a, b), *rest = [(await procedure(ident, "p"), "q"), tick(3)]
    try:
        p, q = await procedure(ident, [1, 2, 3][:x])
    except ValueError as e:
        log(str(e))
        p = q = None
    return first, mid, last, a, b, rest, p, q


add(star_assignment_targets, C(0), C(2), C(3))


@workflow
async def call_star_of_non_iterable(x):
    """``f(*v, await w)`` with v not iterable: the native message names the callee."""
    def f(*a):
        return a

    try:
        f(*x, await procedure(ident, 1))
    except TypeError as e:
        log(str(e))
    try:
        f(tick(0), *x, await procedure(ident, 1))
    except TypeError as e:
        log(str(e))
    try:
        print(**x, sep=await procedure(ident, ""))
    except TypeError as e:
        log(str(e))
    return "ok"


add(call_star_of_non_iterable, C(5), C(None), C([1, 2]))


@workflow
async def keyword_duplicates_across_awaits(x):
    """Duplicate keywords from ``**`` merges around awaits raise the native TypeError."""
    def f(**kw):
        return sorted(kw)

    r = f(a=1, **{"b": await procedure(ident, 2)}, c=await procedure(ident, 3))
    try:
        f(a=1, **{"a": 2}, c=await procedure(ident, x))
    except TypeError as e:
        log(str(e))
    return r


add(keyword_duplicates_across_awaits, C(1), C(2), C(3))


# ---------------------------------------------------------------------------------------------
# Scopes


@workflow
async def walrus_global_in_comprehension_with_await(x):
    """A walrus to a global inside a comprehension whose element awaits."""
    global TOTAL
    TOTAL = 0
    ys = [(TOTAL := TOTAL + await procedure(ident, i)) for i in range(x)]
    await timer("t", 1)
    return ys, TOTAL


add(walrus_global_in_comprehension_with_await, C(0), C(3), C(4, fail_at=F1, raises=ProcedureFailed))


@workflow
async def walrus_in_nested_comprehensions(x):
    """A walrus in an inner comprehension binds the workflow local; awaits in both levels."""
    grid = [[(last := await procedure(plus, i, j)) for j in range(i)] for i in range(await procedure(ident, x))]
    await timer("t", 1)
    try:
        return grid, last
    except UnboundLocalError as e:
        return grid, str(e)


add(walrus_in_nested_comprehensions, C(0), C(1), C(3), C(3, fail_at=F2, raises=ProcedureFailed))


@workflow
async def lambda_in_lowered_comprehension_late_binding(x):
    """Lambdas made in a comprehension that awaits see the comprehension variable's last value."""
    fs = [(await procedure(ident, i), lambda: i) for i in range(x)]  # noqa: B023
    gs = [lambda i=i: i for i in range(await procedure(ident, x))]
    runs = []
    for r in range(2):
        runs.append([(lambda: (r, j, k)) for j in range(x) for k in [await procedure(ident, j)]])  # noqa: B023
    hs = [(await procedure(ident, i), sorted(i * j for j in range(i)), lambda: (lambda: i)) for i in range(x)]  # noqa: B023
    hs = [(g, f()()) for _, g, f in hs]
    await timer("t", 1)
    return [f() for _, f in fs], [g() for g in gs], [[f() for f in run] for run in runs], hs


add(lambda_in_lowered_comprehension_late_binding, C(0), C(1), C(3))


@workflow
async def lambda_params_shadow_comprehension_vars(x):
    """Lambda parameters named like the comprehension's variables, with awaits around."""
    i = "outer"
    r = [(lambda i, j=i: (i, j))(await procedure(ident, j), i) for j in range(x) for i in "ab"]
    s = [(lambda i: i * 2)(i) for i in [await procedure(ident, x)]]
    return r, s, i


add(lambda_params_shadow_comprehension_vars, C(0), C(1), C(2))


@workflow
async def class_body_nonlocal_and_methods(x):
    """A class body writes a workflow local through nonlocal; its methods read locals late."""
    count = 0
    await timer("t", 1)

    class Counter:
        nonlocal count
        count += 10
        base = count

        def bump(self, by):
            nonlocal count
            count += by
            return count

        def peek(self):
            return count, x

    c = Counter()
    c.bump(await procedure(ident, x))
    log(c.peek())
    x = await procedure(double, x)
    return c.peek(), Counter.base, count


add(class_body_nonlocal_and_methods, C(1), C(3), C(2, fail_at=F1, raises=ProcedureFailed))


@workflow
async def match_capture_declared_global(x):
    """Match captures bound to names declared global, with an await in the guard."""
    global COUNTS
    match await procedure(ident, {"n": x, "tag": "a"}):
        case {"n": 0}:
            COUNTS = {"zero": 1}
        case {"n": n, **COUNTS} if await procedure(is_even, x):  # noqa: F841
            pass
        case {"tag": COUNTS}:
            pass
    await timer("t", 1)
    return COUNTS


add(match_capture_declared_global, C(0), C(1), C(2))


@workflow
async def except_as_global_with_await(x):
    """``except ... as name`` for a name declared global: unbound after the handler."""
    global COUNTS
    try:
        await procedure(explode if x else ident, x)
        COUNTS = {"set": x}  # globals are not checkpointed: written and read in one step
    except ProcedureFailed as COUNTS:  # noqa: F811
        log(type(COUNTS).__name__)
        await timer("t", 1)
        log(COUNTS.error_type)
    try:
        return COUNTS
    except NameError as e:
        return str(e)


add(except_as_global_with_await, C(0), C(1), C(2))


@workflow
async def deleted_captured_variable(x):
    """A closure reading a local deleted (across an await) raises the free-variable NameError."""
    v = x
    get = lambda: v  # noqa: F821, E731

    def put(n):
        nonlocal v
        v = n

    del v
    await timer("t", 1)
    try:
        get()
    except NameError as e:
        log(str(e))
    put(await procedure(double, x))
    log(get())
    del v  # noqa: F821
    try:
        del v  # noqa: F821
    except UnboundLocalError as e:
        log(str(e))
    return "done"


add(deleted_captured_variable, C(1), C(2, fail_at=F1, raises=ProcedureFailed), C(3))


@workflow
async def builtin_named_locals_across_awaits(x):
    """Locals named like builtins the generated code could need: iter, next, len, isinstance."""
    iter = [await procedure(ident, x)]  # noqa: A001
    next = lambda it: "mine"  # noqa: A001, E731
    len = 3  # noqa: A001
    isinstance = "shadow"  # noqa: A001
    BaseException = KeyError  # noqa: A001
    out = []
    for v in iter:
        out.append((v, next(None), len, isinstance))
        await timer("t", 1)
    try:
        raise BaseException("k")
    except BaseException as e:
        out.append(repr(e))
    AssertionError = ValueError  # noqa: A001
    try:
        assert await procedure(is_even, x), "odd"
    except AssertionError:
        out.append("value error caught?!")
    except builtins_AssertionError as e:
        out.append(("real assert", str(e)))
    return out


builtins_AssertionError = AssertionError
add(builtin_named_locals_across_awaits, C(0), C(1), C(2))


@workflow
async def dunder_locals_in_class_and_lambda(x):
    """Locals named like dunders and mangled names, read from a class body and a lambda."""
    __v = await procedure(ident, x)
    __dict__ = {"d": x}
    __doc__ = "mine"  # noqa: A001
    __class__ = int  # noqa: A001
    __reduce__ = "r"

    class K:
        a = __dict__
        b = __doc__
        c = __reduce__

        def m(self):
            return __class__

        def n(self):
            return (lambda: __class__)(), super().__repr__

    await timer("t", 1)
    f = lambda: (__v, __dict__, __doc__, __class__, __reduce__)  # noqa: E731
    return f(), K.a, K.b, K.c, K().m() is K, K().n()[0] is K


add(dunder_locals_in_class_and_lambda, C(1), C(2), C(3))


@workflow
async def nonlocal_and_global_interplay(x):
    """Nested functions sharing a workflow local through nonlocal and a module global."""
    global TOTAL
    acc = [x]

    def outer():
        def inner(n):
            nonlocal acc
            global TOTAL
            acc = acc + [n]
            TOTAL += n
            return len(acc)

        return inner

    f = outer()
    v = await procedure(ident, 1)
    TOTAL = 100  # globals are not checkpointed: written and read in one step
    f(v)
    first = TOTAL
    await timer("t", 1)
    v = await procedure(double, x)
    TOTAL = first
    f(v)
    return acc, TOTAL


add(nonlocal_and_global_interplay, C(1), C(4), C(2, fail_at=F2, raises=ProcedureFailed))


# ---------------------------------------------------------------------------------------------
# Exception state across checkpoints


@workflow
async def exception_group_caught_and_kept(x):
    """An ExceptionGroup raised, caught, kept across awaits, split and re-raised."""
    try:
        errs = [Oops(x), KeyError(await procedure(ident, "k"))]
        raise ExceptionGroup("many", errs)
    except ExceptionGroup as eg:
        kept = eg
    kept.add_note(f"note {await procedure(ident, x)}")
    await timer("t", 1)
    match_, rest = kept.split(KeyError)
    log((repr(match_.exceptions), repr(rest.exceptions), kept.__notes__))
    log([_lines(e) for e in kept.exceptions])
    if x > 1:
        raise kept
    return str(kept)


add(exception_group_caught_and_kept, C(1), C(2, raises=ExceptionGroup), C(3, cancel_at=1, raises=Cancelled))


@workflow
async def except_star_without_awaits_in_a_loop(x):
    """try/except* with no await inside, in a loop whose other statements await."""
    out = []
    for i in range(x):
        v = await procedure(ident, i)
        try:
            if v % 2:
                raise ExceptionGroup("g", [Oops(v), KeyError(v)])
            raise ExceptionGroup("h", [KeyError(v)])
        except* Oops as g:
            out.append(("oops", len(g.exceptions)))
        except* KeyError as g:
            out.append(("key", len(g.exceptions)))
        await timer("t", i)
    return out


add(except_star_without_awaits_in_a_loop, C(0), C(2), C(3, cancel_at=2, raises=Cancelled))


@workflow
async def suppressed_context_and_cause_kept(x):
    """``raise ... from None`` and ``from e`` kept in locals across checkpoints, re-raised later."""
    saved = []
    for i in range(2):
        try:
            try:
                await procedure(explode, i)
            except ProcedureFailed as e:
                if i:
                    raise KeyError(i) from None
                raise ValueError(i) from e
        except (KeyError, ValueError) as e:
            saved.append(e)
    await timer("t", 1)
    log([(type(e.__cause__).__name__, type(e.__context__).__name__, e.__suppress_context__) for e in saved])
    log([_lines(e) for e in saved])
    raise saved[x % 2]


add(suppressed_context_and_cause_kept, C(0, raises=ValueError), C(1, raises=KeyError), C(2, raises=ValueError))


@workflow
async def notes_added_while_finally_awaits(x):
    """A pending exception gets notes in a finally that awaits; then it propagates."""
    try:
        try:
            await procedure(explode, x)
        finally:
            e = sys.exc_info()[1]
            if e is not None:
                e.add_note(f"in finally {await procedure(ident, x)}")
                e.retry = await procedure(double, x)
    except ProcedureFailed as err:
        log((err.__notes__, err.retry, err.error_type, err.procedure))
        err.add_note("outer")
        raise


add(notes_added_while_finally_awaits, C(1, raises=ProcedureFailed), C(2, raises=ProcedureFailed), C(3, raises=ProcedureFailed))


@workflow
async def finally_awaits_then_raises_new(x):
    """A finally that awaits and raises a new error: its context is the pending one."""
    try:
        try:
            raise Oops(x)
        finally:
            await timer("t", 1)
            if x:
                raise KeyError(await procedure(ident, "fin"))
    except KeyError as e:
        log((repr(e.__context__), _lines(e), _lines(e.__context__)))
        return "key"
    except Oops as e:
        log(_lines(e))
        return "oops"


add(finally_awaits_then_raises_new, C(0), C(1), C(1, cancel_at=0, raises=Cancelled))


@workflow
async def traceback_through_nested_defs(x):
    """An error raised in a nested def called from an awaited expression keeps every user line."""
    def inner(v):
        if v > 2:
            raise Oops(v)
        return v

    def outer(v):
        return inner(v + 1)

    try:
        outer(await procedure(double, x))
    except Oops as e:
        kept = e
        await timer("t", 1)
        log(_lines(kept))
    await timer("t", 2)
    return outer(x)


add(traceback_through_nested_defs, C(0), C(1), C(2, raises=Oops))


@workflow
async def stop_iteration_inside_try_finally(x):
    """StopIteration raised in the workflow body (through a finally that awaits) becomes RuntimeError."""
    it = iter(range(x))
    try:
        while True:
            v = next(it)
            await procedure(ident, v)
    finally:
        await timer("fin", 1)
        log("fin")


add(stop_iteration_inside_try_finally, C(0, raises=RuntimeError), C(2, raises=RuntimeError), C(1, raises=RuntimeError))


@workflow
async def stop_iteration_caught_after_await(x):
    """StopIteration caught by the workflow itself stays a StopIteration."""
    it = iter([await procedure(ident, x)])
    out = [next(it)]
    try:
        out.append(next(it))
    except StopIteration as e:
        await timer("t", 1)
        out.append(repr(e))
    return out


add(stop_iteration_caught_after_await, C(1), C(2), C(5))


@workflow
async def project_error_attributes_after_restore(x):
    """User attributes on a ProcedureFailed and a Cancelled, kept in a dict across awaits."""
    kept = {}
    try:
        await procedure(explode, x)
    except ProcedureFailed as e:
        e.tries = [x]
        kept["p"] = e
    try:
        await timer("t", 1)
    except Cancelled as c:
        c.where = "timer"
        kept["c"] = c
    await timer("t", 2)
    p = kept["p"]
    p.tries.append(await procedure(ident, 9))
    log((p.tries, p.error_type, p.error_message, p.attempts, str(p)))
    if "c" in kept:
        log((kept["c"].where, kept["c"].reason))
    raise ValueError("final") from p


add(
    project_error_attributes_after_restore,
    C(1, raises=ValueError),
    C(2, cancel_at=1, raises=ValueError),
    C(3, fail_at=F1, raises=Boom),
)


# ---------------------------------------------------------------------------------------------
# Iteration across checkpoints


@workflow
async def enumerate_over_dict_items_written_later(x):
    """``enumerate(d.items())`` across awaits: values written to later keys are seen."""
    d = {"a": 1, "b": 2, "c": 3}
    out = []
    for i, (k, v) in enumerate(d.items()):
        out.append((i, k, v))
        await timer("t", i)
        d["c"] = await procedure(double, x + i)
    return out


add(enumerate_over_dict_items_written_later, C(1), C(2), C(5))


@workflow
async def zip_over_list_mutated(x):
    """``zip`` over a list that grows during the loop: the list iterator is live."""
    xs = [1, 2]
    ys = ["a", "b", "c", "d"]
    out = []
    for a, b in zip(xs, ys):  # noqa: B905
        out.append((a, b))
        if len(xs) < x:
            xs.append(await procedure(double, a))
        await timer("t", a)
    return out


add(zip_over_list_mutated, C(1), C(3), C(4, fail_at=F2, raises=ProcedureFailed))


@workflow
async def map_filter_reversed_live(x):
    """map, filter and reversed objects held across awaits."""
    xs = [1, 2, 3, 4]
    m = map(lambda v: v * 10, xs)
    f = filter(None, [0, x, 0, x + 1])
    r = reversed(xs)
    out = [next(m), next(f), next(r)]
    await timer("t", 1)
    xs[1] = await procedure(ident, 99)
    out += [next(m), next(f), next(r), next(r)]
    await timer("t", 2)
    out += [list(m), list(f), list(r)]
    return out


add(map_filter_reversed_live, C(1), C(2), C(3, cancel_at=1, raises=Cancelled))


@workflow
async def list_iterator_while_list_shrinks(x):
    """A for loop over a list that loses items during the loop (indices shift, items skipped)."""
    xs = list(range(x))
    seen = []
    for v in xs:
        seen.append(v)
        if v % 2 == 0 and v in xs:
            xs.remove(v)
        await procedure(ident, v)
    return seen, xs


add(list_iterator_while_list_shrinks, C(0), C(4), C(7))


@workflow
async def deque_and_defaultdict_across_awaits(x):
    """A deque rotated and a defaultdict filled across awaits; a for loop over the deque."""
    q = deque(range(x), maxlen=4)
    dd = defaultdict(list)
    for v in list(q):
        dd[v % 2].append(await procedure(double, v))
        q.rotate(1)
    await timer("t", 1)
    q.append(await procedure(ident, 100))
    return list(q), dict(dd)


add(deque_and_defaultdict_across_awaits, C(0), C(3), C(6))


@workflow
async def generator_over_awaited_iterable_consumed(x):
    """A generator expression whose outermost iterable is awaited, consumed before the next await."""
    total = sum(v * v for v in await procedure(ident, list(range(x))))
    best = max((v for v in await procedure(ident, [x, 1, 7])), default=None)
    pairs = dict((k, v) for k, v in zip("abc", await procedure(ident, [x, x + 1])))  # noqa: B905
    await timer("t", 1)
    return total, best, pairs


add(generator_over_awaited_iterable_consumed, C(0), C(3), C(9))


@workflow
async def dict_keys_view_loop_with_writes(x):
    """A loop over ``d.keys()`` while other keys' values change (no size change)."""
    d = dict.fromkeys("abcd", 0)
    out = []
    for k in d.keys():
        out.append((k, d[k]))
        d["d"] = await procedure(ident, x)
        d[k] = await procedure(double, x)
    return out, d


add(dict_keys_view_loop_with_writes, C(1), C(2), C(3))


@workflow
async def itertools_islice_consumed_before_await(x):
    """itertools objects used up within a step are fine; only live ones must pickle."""
    firsts = list(itertools.islice(itertools.count(x), 3))
    pairs = list(itertools.pairwise(await procedure(ident, [1, 2, 4])))
    await timer("t", 1)
    grouped = [(k, len(list(g))) for k, g in itertools.groupby(await procedure(ident, "aabccc"))]
    return firsts, pairs, grouped


add(itertools_islice_consumed_before_await, C(0), C(5), C(2))


# ---------------------------------------------------------------------------------------------
# Closures and module globals


@workflow
async def lambda_reads_global_changed_by_nested_def(x):
    """A lambda reads a module global that a nested def writes between awaits."""
    read = lambda: COUNTS.get("n", _MISSING)  # noqa: E731

    def write(v):
        global COUNTS
        COUNTS = {"n": v}

    write(await procedure(ident, x))
    await timer("t", 1)
    a = read()
    write(await procedure(double, x))
    return a, read()


add(lambda_reads_global_changed_by_nested_def, C(1), C(3), C(0))


@workflow
async def sentinel_in_defaults_and_containers(x):
    """A module sentinel as a nested def's default and inside containers keeps its identity."""
    def get(d, k, default=_MISSING):
        v = d.get(k, default)
        return "missing" if v is _MISSING else v

    held = {"s": _MISSING, "t": [(_MISSING,)]}
    await timer("t", 1)
    a = get({"k": x}, "k"), get({}, "k")
    await timer("t", 2)
    return a, held["s"] is _MISSING, held["t"][0][0] is _MISSING, get.__defaults__[0] is _MISSING


add(sentinel_in_defaults_and_containers, C(1), C(2), C(0))


@workflow
async def class_defined_in_workflow_across_awaits(x):
    """A class made in the workflow: instances, class attributes and isinstance after restores."""
    class Acc:
        made = 0

        def __init__(self, v):
            Acc.made += 1
            self.v = v

        def __repr__(self):
            return f"Acc({self.v})"

    a = Acc(await procedure(ident, x))
    await timer("t", 1)
    b = Acc(a.v + await procedure(double, x))
    return repr(a), repr(b), Acc.made, isinstance(b, Acc), type(a) is type(b)


add(class_defined_in_workflow_across_awaits, C(1), C(2), C(3, fail_at=F2, raises=ProcedureFailed))


@workflow
async def local_exception_class_raised_and_caught(x):
    """An exception class defined in the workflow, raised before an await and caught after."""
    class Local(Exception):
        pass

    class Sub(Local):
        pass

    kept = None
    try:
        raise Sub(await procedure(ident, x))
    except Local as e:
        kept = e
    await timer("t", 1)
    try:
        raise kept
    except (KeyError, Local) as e:
        log((type(e).__name__, isinstance(e, Sub), e.args))
    if x > 1:
        try:
            raise Local("out")
        except Exception as e:
            kept = e
    return type(kept).__name__, kept.args


add(local_exception_class_raised_and_caught, C(1), C(2), C(3))


@workflow
async def decorators_made_in_the_workflow(x):
    """A decorator defined in the workflow wraps nested functions; calls span awaits."""
    calls = []

    def traced(fn):
        @functools.wraps(fn)
        def wrapper(*a):
            calls.append(fn.__name__)
            return fn(*a)

        return wrapper

    @traced
    def add1(v):
        return v + 1

    @traced
    @traced
    def twice(v):
        return v * 2

    r = add1(await procedure(ident, x))
    await timer("t", 1)
    r = twice(r) + add1(await procedure(double, x))
    return r, calls, add1.__name__, twice.__wrapped__.__name__


add(decorators_made_in_the_workflow, C(1), C(2), C(3))


@workflow
async def partial_and_closure_counter(x):
    """functools.partial over a nested function and a closure counter across awaits."""
    def counter():
        n = 0

        def inc(by=1):
            nonlocal n
            n += by
            return n

        return inc

    c = counter()
    p = functools.partial(plus_local, await procedure(ident, x))
    c()
    await timer("t", 1)
    c(await procedure(ident, 5))
    return c(), p(3)


def plus_local(a, b):
    return a + b


add(partial_and_closure_counter, C(1), C(2), C(3))


@workflow
async def recursive_nested_def_across_awaits(x):
    """A nested def that recurses through its own name (read from the frame)."""
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    a = fact(await procedure(ident, x))
    await timer("t", 1)
    old = fact

    def fact(n):  # noqa: F811 - rebinding changes what the old one's recursion calls
        return -n

    return a, old(3), fact(3)


add(recursive_nested_def_across_awaits, C(1), C(4), C(0))


# ---------------------------------------------------------------------------------------------
# with statements


class Exiting:
    """A context manager whose ``__exit__`` may raise its own error."""

    def __init__(self, tag, fail=False):
        self.tag = tag
        self.fail = fail

    def __enter__(self):
        log(("enter", self.tag))
        return self

    def __exit__(self, et, ev, tb):
        log(("exit", self.tag, et.__name__ if et else None))
        if self.fail:
            raise KeyError(self.tag)
        return False


@workflow
async def with_exit_raises_after_await(x):
    """An ``__exit__`` that raises replaces the body's error, chained to it."""
    try:
        with Exiting("a", fail=x > 0):
            await procedure(explode if x > 1 else ident, x)
    except KeyError as e:
        log((repr(e), repr(e.__context__)))
        return _lines(e)
    return "clean"


add(with_exit_raises_after_await, C(0), C(1), C(2), C(1, cancel_at=0))


@workflow
async def with_two_items_second_fails(x):
    """``with A() as a, B(a) as b``: B's failure exits A; awaits inside the body."""
    try:
        with Recorder("a") as a, Exiting(await procedure(ident, a)) if x else Recorder(None, None) as b:
            await timer("t", 1)
            log(("body", b.tag if hasattr(b, "tag") else b))
    except (KeyError, TypeError, AttributeError) as e:
        log(type(e).__name__)
    return "ok"


add(with_two_items_second_fails, C(0), C(1), C(0, cancel_at=0, raises=Cancelled))


@workflow
async def with_target_subscript_with_await(x):
    """The ``as`` target is a subscript whose key awaits: bound after __enter__."""
    d = Indexed()
    with Recorder("r") as d[await procedure(ident, "k")]:
        log(("in", d.d))
        await timer("t", 1)
    return d.d


add(with_target_subscript_with_await, C(0), C(0, fail_at=F0, raises=ProcedureFailed), C(1, cancel_at=1, raises=Cancelled))


@workflow
async def with_in_loop_over_dict_with_try_finally(x):
    """try/finally inside a loop over a dict inside a with: leaps, swallows and failures."""
    d = {"a": 1, "b": 2, "c": 3}
    out = []
    with Recorder("outer", swallow=x == 3):
        for k, v in d.items():
            try:
                if v == x:
                    continue
                r = await procedure(explode if v == 2 and x == 3 else double, v)
                out.append((k, r))
                if r > 4:
                    break
            finally:
                out.append(("fin", k))
                d[k] = await procedure(ident, -v)
    return out, d


add(with_in_loop_over_dict_with_try_finally, C(0), C(1), C(2), C(3))


@workflow
async def contextmanager_used_within_a_step(x):
    """@contextmanager managers whose body does not await are fine around awaits."""
    from contextlib import contextmanager, suppress

    @contextmanager
    def tag(n):
        log(("open", n))
        try:
            yield n
        finally:
            log(("close", n))

    v = await procedure(ident, x)
    with tag(v) as t:
        log(t)
    with suppress(KeyError):
        {}[await procedure(ident, "k")]
    await timer("t", 1)
    return v


add(contextmanager_used_within_a_step, C(1), C(2), C(3))


# ---------------------------------------------------------------------------------------------
# try/finally leaps


@workflow
async def return_in_finally_after_awaits(x):
    """A return in a finally after awaits overrides an exception and a pending return."""
    for i in range(3):
        try:
            if i == x:
                return ("body", i)
            await procedure(explode if i == 1 else ident, i)
        finally:
            v = await procedure(ident, i)
            if v == 2:
                return ("fin", v)  # noqa: B012
    return "end"


add(return_in_finally_after_awaits, C(0), C(1), C(2, raises=ProcedureFailed), C(5, raises=ProcedureFailed))


@workflow
async def break_and_continue_in_finally(x):
    """break and continue inside a finally that awaits discard the pending completion."""
    out = []
    for i in range(4):
        try:
            try:
                if i == 1:
                    raise Oops(i)
                if i == 2:
                    return "never"
                out.append(await procedure(ident, i))
            finally:
                await timer("t", i)
                if i == 1:
                    continue  # noqa: B012
                if i == x:
                    break  # noqa: B012
        except Oops:
            out.append("unreachable")
    return out


add(break_and_continue_in_finally, C(0), C(2), C(3), C(9))


@workflow
async def while_else_and_for_else_with_awaits(x):
    """while-else and for-else whose bodies and else clauses await."""
    out = []
    n = 0
    while n < x:
        n += await procedure(ident, 1)
        if n == 3:
            break
    else:
        out.append(("while-else", await procedure(ident, n)))
    for i in range(await procedure(ident, x)):
        if await procedure(is_even, i + 5):
            out.append(("break", i))
            break
    else:
        out.append(("for-else", await procedure(double, x)))
    return out


add(while_else_and_for_else_with_awaits, C(0), C(1), C(2), C(4))


@workflow
async def try_else_finally_each_awaiting(x):
    """Every clause of a try awaits; an error in else is not caught by its handlers."""
    out = []
    try:
        out.append(await procedure(ident, x))
    except ProcedureFailed:
        out.append(await procedure(ident, "handler"))
    else:
        out.append(await procedure(explode if x == 2 else ident, "else"))
    finally:
        out.append(await procedure(ident, "finally"))
        log(out)
    return out


add(try_else_finally_each_awaiting, C(1), C(2, raises=ProcedureFailed), C(3, fail_at=F0))


# ---------------------------------------------------------------------------------------------
# Inline helpers


@workflow
async def descend(n):
    """An inline helper recursing through itself; fails at depth 0 when n is negative."""
    if n <= 0:
        if n < 0:
            raise Oops(n)
        return [await procedure(ident, "leaf")]
    try:
        below = await descend(n - 1 if n < 10 else -1)
    except Oops as e:
        e.add_note(f"depth {n}")
        raise KeyError(n) from e
    return [n, *below]


@workflow
async def recursion_through_inline_helpers(x):
    """Recursion through an inline helper; an error at the bottom rechained at each level."""
    try:
        return await descend(x)
    except KeyError as e:
        chain = []
        c = e
        while c is not None:
            chain.append((type(c).__name__, c.args, getattr(c, "__notes__", None)))
            c = c.__cause__
        log(chain)
        log(_lines(e))
        await timer("t", 1)
        raise


add(recursion_through_inline_helpers, C(0), C(2), C(10, raises=KeyError), C(3, cancel_at=0, raises=Cancelled))


@workflow
async def pick(d, k, default=None):
    """A helper with a default and keyword-only use."""
    await timer("pick", 1)
    return d.get(k, default)


@workflow
async def helper_calls_in_expression_positions(x):
    """Inline helper calls as arguments, keys, in comprehensions and conditions."""
    d = {"a": x, "b": x + 1}
    r = [await pick(d, k) for k in "ab" if await pick(d, k, 0)]
    s = {await pick(d, "a"): await pick(d, "zz", default="dflt")}
    t = await pick(d, "b") if await pick(d, "a") else None
    return r, s, t


add(helper_calls_in_expression_positions, C(0), C(1), C(2, cancel_at=3, raises=Cancelled))


# ---------------------------------------------------------------------------------------------
# Signals and select around state


@workflow
async def signal_payloads_into_structures(x):
    """Signal payloads unpacked into targets and containers between awaits."""
    a, b = await signal("pair")
    store = {}
    store[a] = [await signal("item"), *(await signal("items") or [])]
    return a, b, store


add(
    signal_payloads_into_structures,
    C(0, signals={"pair": [("k", 2)], "item": [1], "items": [[2, 3]]}),
    C(0, signals={"pair": [("j", 0)], "item": [5]}),
    C(0, signals={"pair": [(1,)]}, raises=ValueError),
)


@workflow
async def loop_with_boom_handling(x):
    """Custom errors thrown at awaits inside a loop are caught, counted and kept."""
    errs = []
    for i in range(x):
        try:
            await procedure(ident, i)
        except Boom as e:
            errs.append(e)
            e.seen = i
    await timer("t", 1)
    return [(e.code, e.seen, str(e)) for e in errs]


add(
    loop_with_boom_handling,
    C(3, fail_at=frozenset({0, 2}), error=boom),
    C(2, fail_at=F1, error=boom),
    C(0),
)


@workflow
async def unbound_variable_read_in_comprehension_that_awaits(x):
    # Natively (3.11) the element and the filters run in the comprehension's own scope, where an
    # unbound workflow variable is a free one: NameError, not UnboundLocalError (3.12 inlines
    # the comprehension: UnboundLocalError). The first iterable is read in the workflow's scope.
    if x > 10:
        v = 1
    out = []
    for part in ("elt", "if", "iter"):
        try:
            if part == "elt":
                out.append([v + await procedure(ident, i) for i in range(2)])
            elif part == "if":
                out.append([await procedure(ident, i) for i in range(2) if i != v])
            else:
                out.append([await procedure(ident, i) for i in range(v)])
        except NameError as e:
            out.append((part, type(e).__name__, str(e)))
    return out


add(unbound_variable_read_in_comprehension_that_awaits, C(0), C(1), C(11))


# No reference to the harness module stays: a checkpoint walks the data of the user modules
# that a workflow's module imports, and the harness holds the whole corpus.
del C, add, boom
