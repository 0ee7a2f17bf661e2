"""Corpus: what CPython does to coroutines, kept by the compiled machine.

A StopIteration leaving a comprehension that awaits (on 3.11 a coroutine of its own, so PEP 479
turns it into a RuntimeError there; since 3.12 the comprehension is inlined and it stays a
StopIteration until it leaves the workflow), and inline calls of ``@workflow`` functions, which
are coroutines: nothing runs until they are awaited, and each is awaited once.
"""

from __future__ import annotations

from workflows import ProcedureFailed, procedure, timer, workflow

from .diffharness import C, add
from .probes import fetch, halt, ident, log

# --- StopIteration in a comprehension that awaits ------------------------------------------------


@workflow
async def stop_in_awaiting_comprehension(n):
    """A StopIteration raised in a list comprehension that awaits, caught around it."""
    try:
        r = [halt(await procedure(fetch, i), 2) // 2 for i in range(n)]
    except StopIteration as e:
        log(("stop", e.args, e.__context__))
        return "stop"
    except RuntimeError as e:
        log(("runtime", str(e), e.__cause__, e.__context__ is e.__cause__, e.__suppress_context__))
        return "runtime"
    return r


add(
    stop_in_awaiting_comprehension,
    C(0),
    C(2),
    C(4),
    C(4, fail_at=frozenset({1}), raises=ProcedureFailed),
)


@workflow
async def stop_leaving_the_workflow_from_a_comprehension(n):
    """Uncaught, it ends the workflow as a RuntimeError (at the comprehension's line on 3.11)."""
    await timer("t", 1)
    return {i: halt(await procedure(fetch, i), 0) for i in range(n)}


add(stop_leaving_the_workflow_from_a_comprehension, C(0), C(2, raises=RuntimeError))


@workflow
async def stop_in_a_nested_comprehension(n):
    """The innermost comprehension that awaits is where it becomes a RuntimeError on 3.11."""
    try:
        return [[halt(await procedure(fetch, i + j), 1) for j in range(2)] for i in range(n)]
    except (RuntimeError, StopIteration) as e:
        log((type(e).__name__, str(e), type(e.__cause__).__name__))
        return e.args


add(stop_in_a_nested_comprehension, C(0), C(1), C(3))


def _stop_thrown(cmd, index):
    return StopIteration(index)


@workflow
async def stop_thrown_at_an_await(n):
    """A StopIteration thrown in at an await leaves the awaited command as a RuntimeError
    ('generator raised StopIteration'), whose context is what the workflow handles there."""
    try:
        await procedure(ident, n)
    except RuntimeError as e:
        log(("plain", str(e), repr(e.__cause__), repr(e.__context__)))
    try:
        raise KeyError(n)
    except KeyError:
        try:
            return [await procedure(ident, i) for i in range(n)]
        except BaseException as e:
            log((type(e).__name__, str(e), repr(e.__cause__), repr(e.__context__)))
            return "caught"


add(
    stop_thrown_at_an_await,
    C(2, fail_at=frozenset({0, 2}), error=_stop_thrown),
    C(2, fail_at=frozenset({1}), error=_stop_thrown),
    C(2),
)


# --- inline calls are coroutines ------------------------------------------------------------------


@workflow
async def inner(x):
    """An inline helper that logs when it starts and ends."""
    log(("inner starts", x))
    v = await procedure(fetch, x)
    log(("inner ends", v))
    return v


@workflow
async def call_now_await_later(x):
    """Nothing of the helper runs at the call; it runs at ``await``, across a checkpoint."""
    c = inner(x)
    log("called")
    await timer("between", 1)
    log("awaiting")
    r = await c
    await timer("after", 1)
    try:
        await c
    except RuntimeError as e:
        log(("again", str(e)))
    return r


add(call_now_await_later, C(1), C(2, fail_at=frozenset({1}), raises=ProcedureFailed))


@workflow
async def call_never_awaited(x):
    """A call never awaited never runs."""
    c = inner(x)
    await timer("t", 1)
    if x > 1:
        c.close()
        try:
            await c
        except RuntimeError as e:
            log(("closed", str(e)))
    return x


add(call_never_awaited, C(1), C(2))


@workflow
async def call_with_wrong_arguments(x):
    """A call that cannot bind its arguments raises at the call, not at its await."""
    try:
        c = inner(x, x)
        log("bound")
        await c
    except TypeError as e:
        log(("at the call", str(e)))
    try:
        c = inner(y=x)
    except TypeError as e:
        log(("at the call", str(e)))
    return await inner(x)


add(call_with_wrong_arguments, C(1))


@workflow
async def call_awaited_again_in_a_handler(x):
    """Awaiting it again inside a handler: the RuntimeError's context is the handled error."""
    c = inner(x)
    first = await c
    try:
        raise KeyError(x)
    except KeyError:
        await c
    return first


add(call_awaited_again_in_a_handler, C(1, raises=RuntimeError), C(3, raises=RuntimeError))


@workflow
async def calls_made_in_a_loop_awaited_in_reverse(n):
    """Each call keeps the arguments bound at its call; they run in the order awaited."""
    calls = []
    for i in range(n):
        calls.append(inner(i))
    out = []
    while calls:
        out.append(await calls.pop())
    return out


add(calls_made_in_a_loop_awaited_in_reverse, C(0), C(3))
