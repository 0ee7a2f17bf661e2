"""Corpus: corners of Python semantics that a lowering easily gets wrong."""

from __future__ import annotations

from workflows import Cancelled, ProcedureFailed, procedure, signal, timer, workflow

from .corpus_calls import leaf, middle
from .diffharness import C, add, boom
from .probes import Boom, Box, Oops, Recorder, double, explode, ident, is_even, log, tick

F0 = frozenset({0})
F1 = frozenset({1})


@workflow
async def assert_with_awaits(x):
    """assert's message is evaluated (and awaited) only when the test fails."""
    assert await procedure(is_even, 0), await procedure(ident, "never")
    assert await procedure(is_even, x), await procedure(ident, f"odd {x}")
    return x


add(assert_with_awaits, C(2, returns=2), C(3, raises=AssertionError))


@workflow
async def annotated_assignments(x):
    """Annotated assignment with an await binds; a bare annotation does not."""
    y: int = await procedure(double, x)
    z: int  # noqa: F842 - annotation only
    await timer("t", 1)
    if x > 1:
        return y, z  # noqa: F821
    return y


add(annotated_assignments, C(1, returns=2), C(2, raises=UnboundLocalError))


@workflow
async def closures_made_in_loop(n):
    """Closures made in a loop all see the loop variable's last value; defaults capture each."""
    late = []
    early = []
    for i in range(n):
        late.append(lambda: i)  # noqa: B023 - late binding is the point
        early.append(lambda i=i: i)
        await timer("t", i)
    return [f() for f in late], [f() for f in early]


add(closures_made_in_loop, C(3, returns=([2, 2, 2], [0, 1, 2])), C(0, returns=([], [])))


@workflow
async def assignment_target_after_value(x):
    """In `d[k] = v` the value (with its awaits) is evaluated before the target's subscript."""
    d = {}
    d[tick(await procedure(ident, "k"))] = tick(await procedure(double, x))
    box = Box()
    box.n = d[tick("k")] = await procedure(ident, [tick(1)])
    return d, box.n


add(assignment_target_after_value, C(1), C(4))


@workflow
async def delete_targets_with_awaits(x):
    """del of subscripts and attributes whose key expressions await."""
    d = {"a": 1, "b": 2, "c": 3}
    del d[await procedure(ident, "a")], d[tick("b")]
    box = Box(1, 2)
    del box.items
    await timer("t", 1)
    gone = "items" not in vars(box)
    return d, gone, box.n


add(delete_targets_with_awaits, C(0, returns=({"c": 3}, True, 1)))


@workflow
async def return_value_fixed_before_finally(xs):
    """`return xs` evaluates before finally runs; finally mutating the object is still visible."""
    n = 1
    try:
        return n, xs
    finally:
        n = 99
        xs.append(await procedure(ident, "fin"))


add(return_value_fixed_before_finally, C([], returns=(1, ["fin"])))


@workflow
async def with_in_loop_swallowing(n):
    """A `with` that swallows exceptions inside a loop; the loop continues after each swallow."""
    out = []
    for i in range(n):
        with Recorder(i, swallow=True):
            v = await procedure(explode if i % 2 else double, i)
            out.append(v)
        out.append(("after", i))
    return out


add(with_in_loop_swallowing, C(3), C(2, cancel_at=0))


@workflow
async def return_inside_with_inside_finally_loop(n):
    """A return from a `with` inside try/finally inside a loop exits the manager, then finally."""
    for i in range(n):
        try:
            with Recorder(("w", i)):
                if await procedure(is_even, i + 1):
                    return ("ret", i)
        finally:
            log(("fin", i))
            await timer("f", i)
    return "none"


add(return_inside_with_inside_finally_loop, C(3, returns=("ret", 1)), C(1, returns="none"))


@workflow
async def except_clause_raises(x):
    """An except clause whose type expression raises replaces the exception being matched."""
    try:
        await procedure(explode, x)
    except undefined_name:  # noqa: F821 - evaluated lazily, raises NameError
        return "unreachable"
    return "no error"


add(except_clause_raises, C(1, raises=NameError), C(1, results={}, fail_at=frozenset({5}), raises=NameError))


@workflow
async def cancel_inside_helper_finally(n):
    """Cancellation thrown at an await inside an inline helper's finally reaches the caller."""
    try:
        return await middle(n)
    except Cancelled as c:
        return ("cancelled", c.reason, await procedure(ident, "compensate"))


add(
    cancel_inside_helper_finally,
    C(1),
    C(1, cancel_at=1, returns=("cancelled", "cancelled at 1", "compensate")),
    C(1, cancel_at=3),
)


@workflow
async def inline_call_with_star_args(xs, kw):
    """Inline sub-workflow calls with *args and **kwargs built from awaits."""
    a = await middle(*(await procedure(ident, xs)), **kw)
    b = await leaf(*[await procedure(double, 1)])
    return a, b


add(inline_call_with_star_args, C([1], {"y": 0}), C([2, 0], {}), C([1, 2, 3], {}, raises=TypeError))


@workflow
async def fstring_debug_specifier(x):
    """f-string `=` debug specifiers keep their source text around an await."""
    return f"{(await procedure(double, x))=} {x=!s:>4}"


add(fstring_debug_specifier, C(1), C(21))


@workflow
async def class_body_reads_locals(x):
    """A class body reads workflow locals; methods reach them only through the closure."""
    factor = await procedure(double, x)

    class Scaled:
        base = factor * 10

        def scale(self, v):
            return v * factor

    factor += 1
    await timer("t", 1)
    return Scaled.base, Scaled().scale(2)


add(class_body_reads_locals, C(1, returns=(20, 6)), C(3))


@workflow
async def nested_nonlocal_chain(x):
    """Nonlocal through two nested function levels writes the workflow local."""
    total = 0

    def outer():
        def inner(v):
            nonlocal total
            total += v

        inner(1)
        return inner

    f = outer()
    f(await procedure(double, x))
    await timer("t", 1)
    f(10)
    return total


add(nested_nonlocal_chain, C(1, returns=13), C(5, returns=21))


@workflow
async def reraise_without_active_exception(x):
    """A bare raise outside any handler raises RuntimeError, like native code."""
    try:
        await procedure(explode, x)
    except ProcedureFailed:
        pass
    await timer("t", 1)
    if x:
        raise


add(reraise_without_active_exception, C(1, raises=RuntimeError), C(0, raises=None, returns=None))


@workflow
async def try_else_loop_leaps(n):
    """continue in an except and break in the else of a try inside a while loop with awaits."""
    i = 0
    out = []
    while i < n:
        i += 1
        try:
            v = await procedure(explode if i % 2 else double, i)
        except ProcedureFailed:
            out.append(("odd", i))
            continue
        else:
            if v > 6:
                break
            out.append(v)
        finally:
            out.append(await procedure(ident, ("fin", i)))
    else:
        out.append("exhausted")
    return out


add(try_else_loop_leaps, C(3), C(8), C(0, returns=["exhausted"]), C(4, cancel_at=3, raises=Cancelled))


@workflow
async def context_after_thrown_in_custom_error(x):
    """A custom error thrown in at an await becomes the context of an error raised in finally."""
    try:
        await signal("s")
    finally:
        if x:
            raise KeyError(await procedure(ident, "from finally"))


add(
    context_after_thrown_in_custom_error,
    C(1, error=boom, fail_at=F0, raises=KeyError),
    C(0, error=boom, fail_at=F0, raises=Boom),
    C(1, raises=KeyError),
)


@workflow
async def helper_walrus_in_comprehension(xs):
    """A walrus in a comprehension with awaits binds in the helper that runs it."""
    ys = [(last := await procedure(double, v)) for v in xs]
    return ys, last


@workflow
async def calls_walrus_helper(xs):
    """Calls a helper whose comprehension walrus binds in the helper, not the caller."""
    last = "mine"
    r = await helper_walrus_in_comprehension(xs)
    return r, last


add(calls_walrus_helper, C([1, 2], returns=(([2, 4], 4), "mine")), C([], raises=UnboundLocalError))


@workflow
async def delete_local_in_handler_then_reraise(x):
    """del of a local inside a handler, then a bare raise after an await."""
    temp = await procedure(ident, x)
    try:
        await procedure(explode, temp)
    except ProcedureFailed:
        del temp
        await timer("t", 1)
        raise
    finally:
        try:
            log(("temp bound", temp))
        except NameError as e:
            log(("temp unbound", type(e).__name__))


add(
    delete_local_in_handler_then_reraise,
    C(1, raises=ProcedureFailed),
    C(1, cancel_at=1, raises=Cancelled),
    C(1, cancel_at=2, raises=Cancelled),
)


@workflow
async def chained_comparison_failure(x):
    """An exception inside a comparison chain stops the chain; earlier operands were evaluated."""
    try:
        return tick(0) < await procedure(explode if x else double, 1) < tick(9)
    except ProcedureFailed:
        return "failed"


add(chained_comparison_failure, C(0, returns=True), C(1, returns="failed"))


@workflow
async def while_walrus_else(n):
    """while with a walrus-and-await condition, and an else clause that awaits."""
    seen = []
    i = 0
    while (v := await procedure(double, i)) < n:
        seen.append(v)
        i += 1
    else:
        seen.append(("else", v, await procedure(ident, i)))
    return seen


add(while_walrus_else, C(0), C(5), C(5, fail_at=F1, raises=ProcedureFailed))


@workflow
async def mutable_default_shared(x, acc=None):
    """A default argument evaluated once at definition; locals that alias it stay aliased."""
    acc = [] if acc is None else acc
    alias = acc
    acc.append(await procedure(double, x))
    acc += [await procedure(ident, "more")]
    return alias is acc, alias


add(mutable_default_shared, C(1), C(2, [0]))


@workflow
async def oops_attributes_after_restore(x):
    """Attributes of a caught exception stay readable after the handler awaits (and restores)."""
    try:
        raise Oops(x, "detail")
    except Oops as e:
        await timer("t", 1)
        e.extra = await procedure(ident, "note")
        return e.args, e.extra


add(oops_attributes_after_restore, C(1, returns=((1, "detail"), "note")))


@workflow
async def boom_pending_through_two_finally(code):
    """A custom error pending through two nested finally blocks that both await."""
    try:
        try:
            raise Boom(code, "deep")
        finally:
            await timer("inner", 1)
    finally:
        await timer("outer", 1)


add(boom_pending_through_two_finally, C(3, raises=Boom), C(3, cancel_at=1, raises=Cancelled))


@workflow
async def failing_helper(n):
    """An inline helper whose await fails (ProcedureFailed raised inside the helper)."""
    await timer("h", n)
    return await procedure(explode, n)


@workflow
async def helper_fails_in_finally(x):
    """An error raised inside an inline helper called from finally chains to the pending error."""
    try:
        raise Boom(x, "pending")
    finally:
        await failing_helper(x)


add(
    helper_fails_in_finally,
    C(1, raises=ProcedureFailed),
    C(2, cancel_at=0, raises=Cancelled),
    C(3, fail_at=F1, raises=ProcedureFailed),
)


@workflow
async def helper_fails_in_handler(x):
    """An error raised inside an inline helper called from a handler chains to the handled error."""
    try:
        await procedure(explode, x)
    except ProcedureFailed:
        await failing_helper(x + 1)


add(
    helper_fails_in_handler,
    C(1, raises=ProcedureFailed),
    C(1, fail_at=F1, error=boom, raises=Boom),
    C(2, cancel_at=1, raises=Cancelled),
)


@workflow
async def raising_helper(n):
    """An inline helper that raises from its own code after an await."""
    await timer("r", n)
    raise ValueError(n)


@workflow
async def two_level_helper(n):
    """An inline helper that calls another inline helper and has no handler of its own."""
    return await raising_helper(n)


@workflow
async def helper_two_deep_fails_in_handler(x):
    """An error raised two inline helpers deep, called from a handler, chains to the handled error."""
    try:
        raise KeyError(x)
    except KeyError:
        await two_level_helper(x)


add(
    helper_two_deep_fails_in_handler,
    C(1, raises=ValueError),
    C(2, fail_at=F0, error=boom, raises=Boom),
    C(3, cancel_at=0, raises=Cancelled),
)


@workflow
async def handling_helper(n):
    """An inline helper that handles its own failure and raises a new error from its handler."""
    try:
        await procedure(explode, n)
    except ProcedureFailed:
        if n > 5:
            raise Oops(n) from None
        raise Oops(n)


@workflow
async def helper_with_own_handler_in_finally(x):
    """Inside a helper called from finally, the helper's own handled error is the nearer context."""
    try:
        raise KeyError(x)
    finally:
        await handling_helper(x)


add(
    helper_with_own_handler_in_finally,
    C(1, raises=Oops),
    C(7, raises=Oops),
    C(2, cancel_at=0, raises=Cancelled),
)


@workflow
async def helper_bad_arguments_in_handler(x):
    """A helper called with wrong arguments from a handler: the TypeError chains to the handled error."""
    try:
        raise KeyError(x)
    except KeyError:
        await raising_helper(x, x)


add(helper_bad_arguments_in_handler, C(1, raises=TypeError))


@workflow
async def helper_after_handler_has_no_context(x):
    """A helper failing after the handler finished gets no context (the handled error is gone)."""
    try:
        raise KeyError(x)
    except KeyError:
        await timer("h", 1)
    await raising_helper(x)


add(helper_after_handler_has_no_context, C(1, raises=ValueError), C(2, fail_at=F1, error=boom, raises=Boom))


@workflow
async def raises_at_once(n):
    """An inline helper that raises before any await."""
    raise IndexError(n)


@workflow
async def context_probe_helper(n):
    """An inline helper that logs what fresh errors chain to, after an await that may be thrown into."""
    try:
        await timer("c", n)
    except Boom:
        log("caught")
    try:
        raise LookupError(n)
    except LookupError as e:
        log(type(e.__context__).__name__)
    try:
        await raises_at_once(n)
    except IndexError as e:
        log(type(e.__context__).__name__)
    raise ValueError(n)


@workflow
async def what_helpers_see_in_a_handler(x):
    """A helper called from a handler sees the handled error in a sent step, not in a thrown one."""
    try:
        raise KeyError(x)
    except KeyError:
        await context_probe_helper(x)


add(
    what_helpers_see_in_a_handler,
    C(1, raises=ValueError),
    C(2, fail_at=F0, error=boom, raises=ValueError),
)


# No reference to the harness module stays: a checkpoint walks the data of the user modules
# that a workflow's module imports, and the harness holds the whole corpus.
del C, add, boom
