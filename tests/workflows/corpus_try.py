"""Corpus: try/except/else/finally, with, and cancellation, awaiting in every part."""

from __future__ import annotations

from workflows import (
    Cancelled,
    ChildFailed,
    ProcedureFailed,
    procedure,
    signal,
    timer,
    workflow,
)

from .diffharness import C, add, boom, oops
from .probes import Boom, Oops, Recorder, double, explode, ident, log

F0 = frozenset({0})
F1 = frozenset({1})


@workflow
async def try_every_part(x):
    """Awaits in try, except, else and finally; the oracle decides which path runs."""
    out = []
    try:
        out.append(await procedure(double, x))
        if x < 0:
            raise Oops(x)
    except Oops as e:
        out.append(("oops", e.args, await procedure(ident, "handled")))
    except ProcedureFailed as e:
        out.append(("pf", e.error_type, await timer("back-off", 1)))
    else:
        out.append(("else", await procedure(double, 100)))
    finally:
        out.append(("finally", await signal("fin")))
    return out


add(
    try_every_part,
    C(1, signals={"fin": ["f"]}),
    C(-2),
    C(3, fail_at=F0),
    C(3, fail_at=frozenset({2}), raises=Boom),
    C(3, fail_at=frozenset({1}), raises=ProcedureFailed),
    C(3, cancel_at=0, raises=Cancelled),
    C(3, cancel_at=1, raises=Cancelled),
    C(3, error=boom, fail_at=F0, raises=Boom),
)


@workflow
async def return_through_nested_finally(n):
    """A return crossing two nested finally blocks that both await runs each once, inner first."""
    try:
        try:
            await timer("a", 1)
            if n > 0:
                return ("ret", await procedure(double, n))
        finally:
            log("inner")
            await timer("inner", 1)
        log("between")
    finally:
        log("outer")
        await timer("outer", 1)
    return "end"


add(
    return_through_nested_finally,
    C(2, returns=("ret", 4)),
    C(0, returns="end"),
    C(2, fail_at=F1, raises=ProcedureFailed),
    C(2, cancel_at=2, raises=Cancelled),
)


@workflow
async def break_continue_through_finally(n):
    """break and continue inside a try inside a loop run the finally (which awaits) each time."""
    out = []
    for i in range(n):
        try:
            try:
                v = await procedure(double, i)
                if v == 2:
                    continue
                if v >= 6:
                    break
                out.append(v)
            finally:
                out.append(("in-fin", i))
                await timer("fin", i)
        finally:
            out.append(("out-fin", i))
    else:
        out.append("else")
    return out


add(
    break_continue_through_finally,
    C(2),
    C(5),
    C(0, returns=["else"]),
    C(5, fail_at=frozenset({2}), raises=ProcedureFailed),
)


@workflow
async def return_in_finally_overrides_exception(x):
    """A return in finally replaces an exception raised (or thrown in) in the try body."""
    try:
        await procedure(double, x)
        raise ValueError("lost")
    finally:
        await timer("f", 1)
        return ("overridden", x)  # noqa: B012


add(
    return_in_finally_overrides_exception,
    C(1, returns=("overridden", 1)),
    C(1, fail_at=F0, returns=("overridden", 1)),
    C(1, cancel_at=0, returns=("overridden", 1)),
)


@workflow
async def return_in_finally_overrides_return(x):
    """A return in finally replaces the try body's return value."""
    try:
        return await procedure(double, x)
    finally:
        if x > 1:
            return -(await procedure(double, x))  # noqa: B012


add(return_in_finally_overrides_return, C(1, returns=2), C(3, returns=-6))


@workflow
async def break_in_finally_swallows_return(n):
    """A break inside finally swallows a pending return (and a pending exception)."""
    out = []
    for i in range(n):
        try:
            if i == 1:
                return "returned"
            if i == 2:
                await procedure(explode, i)
            out.append(await procedure(double, i))
        finally:
            await timer("f", i)
            if i >= 1:
                break  # noqa: B012
    return ("swallowed", out)


add(
    break_in_finally_swallows_return,
    C(3, returns=("swallowed", [0])),
    C(1, returns=("swallowed", [0])),
    C(3, fail_at=F0, raises=ProcedureFailed),
)


@workflow
async def continue_in_finally(n):
    """continue inside finally discards an exception and keeps looping."""
    out = []
    for i in range(n):
        try:
            if i % 2:
                raise Oops(i)
            out.append(await procedure(double, i))
        finally:
            out.append(await procedure(ident, ("fin", i)))
            continue  # noqa: B012
    return out


add(continue_in_finally, C(4), C(0, returns=[]), C(3, error=boom, fail_at=F0))


@workflow
async def lazy_except_clauses(x):
    """Except clause type expressions are evaluated lazily, in order, only until one matches."""

    def kind(name, t):
        log(("eval", name))
        return t

    try:
        await procedure(double, x)
        if x == 1:
            raise KeyError(x)
        if x == 2:
            raise Oops(x)
        return "no error"
    except kind("first", KeyError):
        r = ("key", await timer("k", 1))
    except kind("second", (TypeError, ValueError)) as e:
        r = ("value", type(e).__name__, await procedure(ident, str(e)))
    except kind("third", ProcedureFailed):
        r = "pf"
    return r


add(
    lazy_except_clauses,
    C(0, returns="no error"),
    C(1, returns=("key", None)),
    C(2, returns=("value", "Oops", "2")),
    C(0, fail_at=F0, returns="pf"),
    C(0, error=boom, fail_at=F0, raises=Boom),
)


@workflow
async def except_name_deleted(x):
    """The `as` name is deleted when the handler ends (even if it awaited); reading it fails."""
    e = "before"
    try:
        await procedure(explode, x)
    except ProcedureFailed as e:
        await timer("h", 1)
        log(e.error_type)
    try:
        return e
    except NameError as ne:
        return ("deleted", type(ne).__name__)


add(
    except_name_deleted,
    C(1, returns=("deleted", "UnboundLocalError")),
    C(2, error=oops, fail_at=F0, raises=Oops),
)


@workflow
async def except_name_deleted_on_leap(n):
    """Leaving a handler by continue/break/return also deletes the `as` name."""
    out = []
    for i in range(n):
        try:
            await procedure(explode, i)
        except ProcedureFailed as err:
            out.append(await procedure(ident, err.error_message))
            if i == 0:
                continue
            break
    try:
        out.append(err)  # noqa: F821
    except NameError:
        out.append("gone")
    return out


add(except_name_deleted_on_leap, C(3), C(0, returns=["gone"]))


@workflow
async def bare_raise_after_inner_try(x):
    """A bare raise in a handler re-raises the handler's exception even after an inner try/except."""
    try:
        await procedure(explode, x)
    except ProcedureFailed:
        try:
            await procedure(double, x)
            raise KeyError("inner")
        except KeyError:
            log("inner handled")
        await timer("between", 1)
        raise
    return "unreached"


add(
    bare_raise_after_inner_try,
    C(1, raises=ProcedureFailed),
    C(1, fail_at=F1, raises=ProcedureFailed),
    C(1, cancel_at=2, raises=Cancelled),
)


@workflow
async def raise_in_handler_chains_context(x):
    """An exception raised in a handler gets the handled one as __context__ (or __cause__)."""
    try:
        try:
            await procedure(explode, x)
        except ProcedureFailed as e:
            if x == 1:
                raise KeyError("ctx")
            raise KeyError("cause") from e
    except KeyError as k:
        r = (str(k), type(k.__context__).__name__, type(k.__cause__).__name__)
    await timer("t", 1)
    if x == 3:
        try:
            raise Oops("a")
        except Oops:
            raise Boom(3, "chained") from None
    return r


add(
    raise_in_handler_chains_context,
    C(1, returns=("'ctx'", "ProcedureFailed", "NoneType")),
    C(2, returns=("'cause'", "ProcedureFailed", "ProcedureFailed")),
    C(3, raises=Boom),
)


@workflow
async def for_else_break_in_nested_try(xs):
    """A break inside a nested try inside a for loop skips the loop's else; finally still runs."""
    out = []
    for x in xs:
        try:
            try:
                if await procedure(double, x) > 10:
                    break
            finally:
                out.append(("f", x))
        except Exception:
            out.append("never")
    else:
        out.append(await procedure(ident, "else"))
    return out


add(for_else_break_in_nested_try, C([1, 2]), C([1, 6, 2]), C([]), C([1], fail_at=F0))


@workflow
async def exception_in_finally_replaces(x):
    """An exception raised inside finally replaces the pending one."""
    try:
        try:
            await procedure(explode, x)
        finally:
            await timer("f", 1)
            if x:
                raise KeyError("from finally")
    except KeyError as e:
        return ("key", str(e), type(e.__context__).__name__)
    except ProcedureFailed:
        return "pf"


add(
    exception_in_finally_replaces,
    C(1, returns=("key", "'from finally'", "ProcedureFailed")),
    C(0, returns="pf"),
)


@workflow
async def thrown_exceptions_caught(n):
    """Exceptions thrown in at awaits (ProcedureFailed, custom, ValueError) caught by type."""
    caught = []
    for i in range(n):
        try:
            caught.append(await procedure(double, i))
        except ProcedureFailed as e:
            caught.append(("pf", e.procedure))
        except Boom as b:
            caught.append(("boom", b.code, b.detail))
        except ValueError as v:
            caught.append(("value", type(v).__name__, v.args))
    return caught


add(
    thrown_exceptions_caught,
    C(3, fail_at=frozenset({0, 2})),
    C(3, error=boom, fail_at=frozenset({1})),
    C(3, error=oops, fail_when=lambda cmd, i: i % 2 == 0),
    C(2, cancel_at=1, raises=Cancelled),
)


@workflow
async def cancellation_cleanup(n):
    """Cancelled at an await: except Cancelled and finally both await compensation, then re-raise."""
    done = []
    try:
        for i in range(n):
            done.append(await procedure(double, i))
    except Cancelled as c:
        log(("cancelled", c.reason))
        done.append(await procedure(ident, "compensated"))
        raise
    finally:
        await timer("cleanup", 1)
        log(("finally", done))
    return done


add(
    cancellation_cleanup,
    C(2, returns=[0, 2]),
    C(3, cancel_at=0, raises=Cancelled),
    C(3, cancel_at=2, raises=Cancelled),
    C(3, cancel_at=3, raises=Cancelled),
    C(3, cancel_at=4, returns=[0, 2, 4]),
    C(3, cancel_at=1, fail_at=frozenset({2}), raises=ProcedureFailed),
)


@workflow
async def cancellation_swallowed(n):
    """A workflow may catch Cancelled and return normally (or keep awaiting)."""
    try:
        await timer("long", 100)
    except Cancelled:
        r = await signal("ack")
        return ("stopped", r, n)
    return ("ran", n)


add(
    cancellation_swallowed,
    C(1, returns=("ran", 1)),
    C(1, cancel_at=0, signals={"ack": ["ok"]}, returns=("stopped", "ok", 1)),
    C(1, cancel_at=0, fail_at=F1, raises=Boom, error=boom),
)


@workflow
async def except_exception_does_not_catch_cancel(n):
    """`except Exception` does not catch Cancelled; bare `except` does."""
    out = []
    try:
        try:
            await timer("a", 1)
        except Exception:
            out.append("exception")
        out.append("after-inner")
        await timer("b", 1)
    except:  # noqa: E722
        out.append(("bare", await procedure(ident, n)))
    return out


add(
    except_exception_does_not_catch_cancel,
    C(1, returns=["after-inner"]),
    C(1, cancel_at=0, returns=[("bare", 1)]),
    C(1, error=oops, fail_at=F0, returns=["exception", "after-inner"]),
    C(1, cancel_at=1, returns=["after-inner", ("bare", 1)]),
)


@workflow
async def with_swallows_thrown(tag):
    """A sync `with` whose __exit__ swallows an exception thrown in at an await in its body."""
    out = []
    with Recorder(tag, swallow=True) as r:
        out.append(r)
        out.append(await procedure(double, 1))
        out.append("not reached if thrown")
    out.append(await procedure(ident, "after"))
    with Recorder("plain") as p:
        out.append(await procedure(ident, p))
    return out


add(
    with_swallows_thrown,
    C("t", returns=["t", 2, "not reached if thrown", "after", "plain"]),
    C("t", fail_at=F0, returns=["t", "after", "plain"]),
    C("t", cancel_at=0, returns=["t", "after", "plain"]),
    C("t", fail_at=frozenset({2}), raises=ProcedureFailed),
)


@workflow
async def with_exit_on_leaps(n):
    """break, continue and return out of a `with` body that awaits call __exit__ once each."""
    for i in range(n):
        with Recorder(i):
            v = await procedure(double, i)
            if v == 0:
                continue
            if v == 4:
                break
            log(("body", i))
    with Recorder("ret"), Recorder("ret2"):
        if await procedure(ident, n) > 2:
            return "from-with"
    return "end"


add(with_exit_on_leaps, C(0, returns="end"), C(2, returns="end"), C(4, returns="from-with"))


@workflow
async def with_item_awaits(n):
    """A `with` item expression awaits; nested items enter in order and exit in reverse."""
    with Recorder(await procedure(double, n)) as a, Recorder(await procedure(ident, "b")) as b:
        log((a, b))
        if n < 0:
            raise Oops(n)
    return (a, b)


add(with_item_awaits, C(1, returns=(2, "b")), C(-1, raises=Oops), C(1, fail_at=F1, raises=ProcedureFailed))


@workflow
async def try_in_handler_in_finally(x):
    """Deeply nested try statements: handlers and finally blocks containing try statements."""
    out = []
    try:
        try:
            await procedure(explode, x)
        except ProcedureFailed:
            try:
                out.append(await procedure(double, x))
            finally:
                try:
                    await procedure(explode, x + 1)
                except ProcedureFailed as e2:
                    out.append(("e2", e2.error_message))
    finally:
        try:
            out.append(await signal("s"))
        except Boom:
            out.append("boom in finally")
    return out


add(
    try_in_handler_in_finally,
    C(1),
    C(1, error=boom, fail_at=frozenset({3})),
    C(1, fail_at=F1, raises=ProcedureFailed),
    C(1, cancel_at=2, raises=Cancelled),
)


@workflow
async def child_failure_caught(n):
    """A failing child (ChildFailed) caught around await spawn, with retries in a loop."""
    from workflows import spawn

    from .corpus_control import fetch_each

    for attempt in range(n):
        try:
            return ("ok", attempt, await spawn(fetch_each, [attempt]))
        except ChildFailed as e:
            log(("child failed", e.child_type))
            await timer("retry", attempt)
    return "gave up"


add(
    child_failure_caught,
    C(3),
    C(3, fail_at=F0),
    C(2, fail_when=lambda cmd, i: i % 2 == 0, returns="gave up"),
)


@workflow
async def try_else_with_return_and_finally(x):
    """A return in the else clause runs finally; an exception in else is not caught by the handlers."""
    try:
        v = await procedure(double, x)
    except ProcedureFailed:
        return "pf"
    else:
        if x == 1:
            return ("else-ret", v)
        if x == 2:
            raise Oops(v)
    finally:
        log(("finally", x))
        await timer("f", 1)
    return "end"


add(
    try_else_with_return_and_finally,
    C(1, returns=("else-ret", 2)),
    C(2, raises=Oops),
    C(3, returns="end"),
    C(1, fail_at=F0, returns="pf"),
)


@workflow
async def exception_survives_checkpoint_in_finally(code):
    """A pending custom exception (own __reduce__) survives checkpoints while finally awaits."""
    try:
        raise Boom(code, "pending")
    finally:
        await timer("one", 1)
        await timer("two", 1)


add(exception_survives_checkpoint_in_finally, C(5, raises=Boom), C(5, cancel_at=1, raises=Cancelled))


@workflow
async def handler_awaits_then_inspects(n):
    """A handler awaits several times and still reads its exception's fields afterwards."""
    try:
        await procedure(explode, n)
    except ProcedureFailed as e:
        a = await procedure(double, n)
        b = await signal("x")
        return (e.error_type, e.error_message, a, b)


add(handler_awaits_then_inspects, C(4, signals={"x": [9]}), C(4, cancel_at=1, raises=Cancelled))


# No reference to the harness module stays: a checkpoint walks the data of the user modules
# that a workflow's module imports, and the harness holds the whole corpus.
del C, add, boom, oops
