"""Corpus: more combined shapes: assignment targets, iterators that detect mutation, helpers,
context managers of the standard library, classes made in the workflow, and error messages."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
from collections import deque

from workflows import Cancelled, ProcedureFailed, procedure, signal, timer, workflow

from .diffharness import C, add, boom
from .probes import Boom, Box, Oops, Recorder, double, explode, ident, is_even, log, plus, tick

F0 = frozenset({0})
F1 = frozenset({1})
F2 = frozenset({2})


class Logged:
    """An object whose attribute reads and writes are logged (target evaluation order)."""

    def __init__(self, **kw):
        object.__setattr__(self, "d", dict(kw))

    def __getattr__(self, k):
        if k.startswith("__") or k == "d":
            raise AttributeError(k)
        log(("getattr", k))
        try:
            return self.d[k]
        except KeyError:
            raise AttributeError(k) from None

    def __setattr__(self, k, v):
        log(("setattr", k, v))
        self.d[k] = v


@workflow
async def multiple_targets_in_order(x):
    """``a = b[await k] = c.d = await v``: the value first, then each target left to right."""
    b = {}
    c = Logged()
    a = b[tick("k")] = c.d = await procedure(double, x)
    box = Box()
    box.n, b[tick("j")] = await procedure(ident, (1, 2))
    y = z = await procedure(ident, [x])
    return a, b, c.d, box.n, z, y is z


add(multiple_targets_in_order, C(1), C(2), C(3, fail_at=F1, raises=ProcedureFailed))


@workflow
async def slice_assignment_with_awaits(x):
    """Slice targets whose bounds await; the value first."""
    xs = list(range(6))
    xs[tick(1) : await procedure(ident, 3)] = await procedure(ident, ["a"] * x)
    xs[await procedure(ident, -1) :] = [tick("end")]
    del xs[:: await procedure(ident, 2)]
    return xs


add(slice_assignment_with_awaits, C(0), C(1), C(3))


@workflow
async def augassign_attribute_through_getattr(x):
    """``o.a += await v`` reads o.a once before the await and writes it after."""
    o = Logged(a=1, b="s")
    o.a += await procedure(double, x)
    o.b *= await procedure(ident, 2)
    try:
        o.zz += await procedure(ident, 1)
    except AttributeError as e:
        log(("attr", str(e)))
    return o.d


add(augassign_attribute_through_getattr, C(0), C(1), C(2))


@workflow
async def deque_iterator_mutated_before_await(x):
    """A deque mutated while a for loop iterates it raises at the loop's next turn."""
    q = deque(range(3))
    out = []
    try:
        for v in q:
            out.append(v)
            if v == x:
                q.append(await procedure(ident, 9))
            await timer("t", v)
    except RuntimeError as e:
        out.append(str(e))
    return out


add(deque_iterator_mutated_before_await, C(0), C(2), C(5))


@workflow
async def deque_iterator_in_a_variable(x):
    """A deque iterator held in a variable across awaits after its deque changed."""
    q = deque([1, 2, 3])
    it = iter(q)
    first = next(it)
    if x:
        q.appendleft(0)
    await timer("t", 1)
    try:
        return first, next(it)
    except RuntimeError as e:
        return first, str(e)


add(deque_iterator_in_a_variable, C(0), C(1), C(0, cancel_at=0, raises=Cancelled))


@workflow
async def string_bytes_range_tuple_iterators(x):
    """Iterators over str, bytes, range and tuple, each live across awaits."""
    its = [iter("ab"), iter(b"xy"), iter(range(x, x + 3)), iter((None, x))]
    out = [next(i) for i in its]
    await timer("t", 1)
    out += [next(i) for i in its]
    await timer("t", 2)
    out.append([list(i) for i in its])
    return out


add(string_bytes_range_tuple_iterators, C(0), C(2), C(1, cancel_at=1, raises=Cancelled))


@workflow
async def nested_loops_over_dict_views(x):
    """A loop over values with an inner loop over keys; values written during both."""
    d = {"a": 1, "b": 2}
    out = []
    for v in d.values():
        for k in d:
            out.append((v, k, d[k]))
            d[k] = await procedure(plus, d[k], x)
    return out, d


add(nested_loops_over_dict_views, C(0), C(1), C(2, fail_at=F2, raises=ProcedureFailed))


@workflow
async def sorted_with_lambda_keys_of_awaited(x):
    """sorted/min/max with lambda keys over awaited values; the key reads a local written later."""
    weight = {"a": x, "b": 1, "c": -x}
    items = await procedure(ident, ["a", "b", "c"])
    first = sorted(items, key=lambda k: weight[k])
    weight["b"] = await procedure(double, 5)
    key = lambda k: (weight[k], k)  # noqa: E731
    await timer("t", 1)
    return first, sorted(items, key=key), min(items, key=key), max(items, key=lambda k: -weight[k])


add(sorted_with_lambda_keys_of_awaited, C(0), C(1), C(7))


@workflow
async def dataclass_made_in_workflow(x):
    """A dataclass defined in the workflow: instances, replace and equality across awaits."""
    @dataclasses.dataclass
    class Item:
        name: str
        qty: int = 0
        tags: list = dataclasses.field(default_factory=list)

    a = Item("a", await procedure(ident, x))
    await timer("t", 1)
    b = dataclasses.replace(a, qty=a.qty + await procedure(double, x))
    b.tags.append(await procedure(ident, "t"))
    # Not repr(a): a class made in the workflow loses its __qualname__ in a fresh process.
    return a.qty, b.qty, b.tags, a == b, dataclasses.asdict(b), Item.__name__


add(dataclass_made_in_workflow, C(0), C(1), C(2, fail_at=F1, raises=Boom, error=boom))


@workflow
async def enum_made_in_workflow(x):
    """An Enum defined in the workflow; members compared by identity after restores."""
    class Color(enum.Enum):
        RED = 1
        BLUE = 2

    c = Color(await procedure(ident, 1 + x % 2))
    await timer("t", 1)
    same = c is Color(1 + x % 2)
    return c.name, same, [m.name for m in Color], c in Color


add(enum_made_in_workflow, C(0), C(1), C(1, cancel_at=1, raises=Cancelled))


@workflow
async def class_with_decorators_and_keywords(x):
    """Class decorators, a base evaluated before the body, and properties, around awaits."""
    def register(cls):
        log(("register", cls.__name__))
        cls.registered = True
        return cls

    base = await procedure(ident, x)

    @register
    class Base:
        def __init__(self, v):
            self._v = v

        @property
        def v(self):
            log("read v")
            return self._v

        @v.setter
        def v(self, value):
            log(("write v", value))
            self._v = value

    @register
    class Child(Base):
        scale = base

        def doubled(self):
            return self.v * 2 * self.scale

    c = Child(await procedure(double, x))
    c.v += await procedure(ident, 1)
    await timer("t", 1)
    return c.doubled(), Child.registered, isinstance(c, Base), Child.__mro__[1] is Base


add(class_with_decorators_and_keywords, C(0), C(1), C(3))


@workflow
async def exit_stack_across_awaits(x):
    """contextlib.ExitStack with callbacks and managers entered in a loop, held across awaits."""
    out = []
    with contextlib.ExitStack() as stack:
        for i in range(x):
            stack.enter_context(Recorder(("r", i)))
            stack.callback(log, ("callback", i))
            out.append(await procedure(ident, i))
        if x > 1:
            await procedure(explode, x)
    return out


add(exit_stack_across_awaits, C(0), C(1), C(2, raises=ProcedureFailed), C(2, cancel_at=1, raises=Cancelled))


@workflow
async def suppress_thrown_errors(x):
    """contextlib.suppress around awaits swallows an error thrown at the await."""
    out = []
    for i in range(3):
        with contextlib.suppress(ProcedureFailed, Boom):
            out.append(await procedure(explode if i == x else ident, i))
            out.append("after")
    return out


add(suppress_thrown_errors, C(0), C(1), C(5, fail_at=F1, error=boom), C(5, cancel_at=1, raises=Cancelled))


@workflow
async def with_enter_fails_after_await(x):
    """The context expression awaits, then ``__enter__`` fails: no ``__exit__``, native error."""
    class Bad:
        def __enter__(self):
            raise KeyError("enter")

        def __exit__(self, *a):
            log("never")

    try:
        with Recorder(await procedure(ident, "a")), (Bad() if x else Recorder("b")):
            await timer("t", 1)
    except KeyError as e:
        log(repr(e))
    try:
        with await procedure(ident, 5):
            pass
    except TypeError as e:
        log(str(e))
    return "ok"


add(with_enter_fails_after_await, C(0), C(1), C(1, fail_at=F0, raises=ProcedureFailed))


@workflow
async def reraise_grows_the_traceback(x):
    """Raising a kept exception again adds the new raise's line on top of the old ones."""
    try:
        await procedure(explode, x)
    except ProcedureFailed as e:
        kept = e
    for i in range(2):
        await timer("t", i)
        try:
            raise kept
        except ProcedureFailed as again:
            log([ln for _, ln in _lines(again)])
    raise kept


def _lines(e):
    """(function, line) of each traceback entry of ``e`` in this file; a comprehension's own frame
    (3.11 only: since 3.12 comprehensions are inlined) is left out, as the harness does."""
    import traceback

    return [
        (f.name, f.lineno)
        for f in traceback.extract_tb(e.__traceback__)
        if f.filename == __file__ and f.name not in ("<listcomp>", "<setcomp>", "<dictcomp>")
    ]


add(reraise_grows_the_traceback, C(1, raises=ProcedureFailed), C(2, cancel_at=1, raises=Cancelled))


@workflow
async def traceback_format_in_handler(x):
    """Handlers that format the exception being handled after awaits."""
    import sys
    import traceback

    try:
        {}[await procedure(ident, "k")]
    except KeyError:
        await timer("t", 1)
        t, v, tb = sys.exc_info()
        text = traceback.format_exception_only(t, v)
        log((t.__name__, text))
        try:
            raise ValueError(x)
        except ValueError:
            log(repr(sys.exc_info()[1].__context__))
    log(sys.exc_info())
    return "ok"


add(traceback_format_in_handler, C(0), C(1), C(1, fail_at=F1, error=boom, raises=Boom))


@workflow
async def exception_in_lowered_comprehension_condition(x):
    """An error in a comprehension's condition after an await keeps the comprehension's line."""
    try:
        ys = [v for v in range(3) if await procedure(ident, v) < 1 / (v - x)]
    except ZeroDivisionError as e:
        log(_lines(e))
        ys = None
    return ys


add(exception_in_lowered_comprehension_condition, C(1), C(5), C(0))


@workflow
async def dict_and_set_comprehensions_with_awaits(x):
    """Dict comprehensions (key before value) and set comprehensions with awaits in every part."""
    d = {tick(await procedure(ident, k)): tick(await procedure(double, k)) for k in range(x) if await procedure(is_even, k)}
    s = {await procedure(ident, k % 2) for k in range(x)}
    n = {k: {v for v in range(k) if v != await procedure(ident, 0)} for k in range(await procedure(ident, x))}
    return d, sorted(s), {k: sorted(v) for k, v in n.items()}


add(dict_and_set_comprehensions_with_awaits, C(0), C(3), C(4, cancel_at=3, raises=Cancelled))


@workflow
async def comprehension_walrus_and_condition(x):
    """A walrus in a comprehension's condition with awaits; the local is visible after."""
    picked = [y for v in range(x) if (y := await procedure(double, v)) > 1]
    total = 0
    got = [(total := total + v) for v in picked]
    return picked, got, total, y if x else None


add(comprehension_walrus_and_condition, C(0), C(1), C(3))


@workflow
async def mutual_recursion_helper_a(n):
    """An inline helper calling another one that calls it back."""
    if n <= 0:
        return ["a0"]
    return ["a", *(await mutual_recursion_helper_b(n - 1))]


@workflow
async def mutual_recursion_helper_b(n):
    """The other half of the mutual recursion; fails at n == 3."""
    if n == 3:
        raise Oops("b3")
    await timer("b", n)
    return ["b", *(await mutual_recursion_helper_a(n - 1))]


@workflow
async def mutual_recursion_through_helpers(x):
    """Mutual recursion through two inline helpers; errors are chained natively."""
    try:
        return await mutual_recursion_helper_a(x)
    except Oops as e:
        log(_lines(e))
        return "oops"


add(mutual_recursion_through_helpers, C(0), C(3), C(4), C(6, cancel_at=0, raises=Cancelled))


@workflow
async def kw_helper(a, /, b=2, *rest, c, d=None, **kw):
    """A helper with every kind of parameter."""
    await timer("h", 1)
    return a, b, rest, c, d, sorted(kw.items())


@workflow
async def helper_with_every_parameter_kind(x):
    """Calling an inline helper with star args, keyword-only, defaults and ** around awaits."""
    xs = [await procedure(ident, x), 5]
    r1 = await kw_helper(*xs, 7, c=await procedure(double, x), **{"e": tick(1)})
    r2 = await kw_helper(tick(0), c=1)
    try:
        await kw_helper(1, 2, d=await procedure(ident, 3))
    except TypeError as e:
        log(str(e))
    return r1, r2


add(helper_with_every_parameter_kind, C(0), C(1), C(2, cancel_at=2, raises=Cancelled))


@workflow
async def while_true_try_else_break(x):
    """while True with try/except/else/finally: break in else, continue in except, awaits in all."""
    n = 0
    out = []
    while True:
        n += 1
        try:
            v = await procedure(explode if n <= x else ident, n)
        except ProcedureFailed:
            out.append(("failed", n))
            if n > 5:
                raise
            continue
        else:
            out.append(("ok", await procedure(double, v)))
            break
        finally:
            out.append(("finally", await procedure(ident, n)))
    return out


add(while_true_try_else_break, C(0), C(2), C(7, raises=ProcedureFailed))


@workflow
async def for_else_continue_through_finally(x):
    """continue from a try/finally that awaits inside a for-else; the else runs at the end."""
    out = []
    for i in range(x):
        try:
            if await procedure(is_even, i):
                continue
            out.append(i)
        finally:
            out.append(("f", await procedure(ident, i)))
    else:
        out.append(("else", await procedure(ident, x)))
    return out


add(for_else_continue_through_finally, C(0), C(3), C(4, fail_at=F2, raises=ProcedureFailed))


@workflow
async def nonlocal_loop_variable(x):
    """A nested function rebinds the current for-loop variable through nonlocal."""
    out = []

    def bump():
        nonlocal i
        i += 100

    for i in range(x):
        bump()
        out.append(await procedure(ident, i))
    return out, i if x else None


add(nonlocal_loop_variable, C(0), C(2), C(3, cancel_at=1, raises=Cancelled))


@workflow
async def global_deleted_and_restored(x):
    """A global deleted in the workflow, then read (NameError), then bound again."""
    global SCRATCH
    SCRATCH = await procedure(ident, x)
    del SCRATCH
    try:
        log(SCRATCH)  # noqa: F821
    except NameError as e:
        log(str(e))
    SCRATCH = await procedure(double, x)
    v = SCRATCH
    return v


SCRATCH = None
add(global_deleted_and_restored, C(0), C(1), C(2))


@workflow
async def local_import_across_awaits(x):
    """Modules imported inside the workflow are locals kept by reference across awaits."""
    import json as j
    from math import floor as fl

    s = j.dumps({"x": await procedure(ident, x)})
    await timer("t", 1)
    return j.loads(s), fl(x / 2), j.__name__


add(local_import_across_awaits, C(0), C(3), C(5))


@workflow
async def percent_and_format_with_awaits(x):
    """%-formatting and str.format with awaited arguments, evaluated in order."""
    a = "%s-%d" % (tick("s"), await procedure(double, x))  # noqa: UP031
    b = "{}|{k}".format(tick(1), k=await procedure(ident, x))  # noqa: UP032
    c = ("%(n)s" % {"n": await procedure(ident, "n")}).upper()  # noqa: UP031
    try:
        "%d" % await procedure(ident, "str")  # noqa: UP031
    except TypeError as e:
        log(str(e))
    return a, b, c


add(percent_and_format_with_awaits, C(0), C(1), C(2))


@workflow
async def select_like_loop_with_signals(x):
    """Signals drive a loop whose state lives in a dict of lists; a None ends it."""
    state = {"seen": [], "count": 0}
    while (msg := await signal("msg")) is not None:
        state["seen"].append(msg)
        state["count"] += await procedure(ident, 1)
        if state["count"] > x:
            break
    else:
        state["ended"] = True
    return state


add(
    select_like_loop_with_signals,
    C(5, signals={"msg": [1, 2, 3]}),
    C(1, signals={"msg": ["a", "b", "c"]}),
    C(0, signals={"msg": []}),
)


@workflow
async def messages_of_native_errors(x):
    """Errors of unbound names, bad calls and bad operands inside expressions that await."""
    out = []
    try:
        y = later + await procedure(ident, 1)  # noqa: F821, F841
    except NameError as e:
        out.append(str(e))
    try:
        v = unbound_here + await procedure(ident, 1)  # noqa: F821, F841
        unbound_here = 1  # noqa: F841
    except UnboundLocalError as e:
        out.append(str(e))
    try:
        (await procedure(ident, 5))(1)
    except TypeError as e:
        out.append(str(e))
    try:
        await procedure(ident, "a") + await procedure(ident, x)
    except TypeError as e:
        out.append(str(e))
    try:
        for _ in await procedure(ident, x):
            await timer("t", 1)
    except TypeError as e:
        out.append(str(e))
    try:
        [*await procedure(ident, x)]
    except TypeError as e:
        out.append(str(e))
    return out


add(messages_of_native_errors, C(0), C(1), C(2))



@workflow
async def raise_from_awaited_cause(x):
    """``raise E(await a) from await b``: the exception, then the cause; both kept."""
    try:
        raise KeyError(await procedure(ident, x)) from Oops(await procedure(double, x))
    except KeyError as e:
        await timer("t", 1)
        log((repr(e.__cause__), e.__suppress_context__, _lines(e)))
    try:
        raise ValueError(x) from await procedure(ident, None)
    except ValueError as e:
        return e.__cause__, e.__suppress_context__


add(raise_from_awaited_cause, C(0), C(1), C(2, fail_at=F1, raises=ProcedureFailed))


@workflow
async def star_targets_in_for_loops(x):
    """Starred and nested targets of a for loop over an awaited list."""
    out = []
    for a, *b in await procedure(ident, [[1, 2, 3], [x]]):
        out.append((a, b))
        await timer("t", a)
    for i, (k, v) in enumerate(sorted((await procedure(ident, {"b": x, "a": 1})).items())):
        out.append((i, k, v))
    return out


add(star_targets_in_for_loops, C(0), C(2), C(1, cancel_at=1, raises=Cancelled))


@workflow
async def class_body_comprehension_reads_workflow_locals(x):
    """A comprehension in a class body made in the workflow reads workflow locals, not the
    class's own names."""
    n = await procedure(ident, x)
    k = "workflow"

    class Table:
        k = "class"
        rows = [k for _ in range(n)]
        both = [(k, m) for m in range(2)]

    await timer("t", 1)
    return Table.rows, Table.both, Table.k


add(class_body_comprehension_reads_workflow_locals, C(0), C(1), C(2))


@workflow
async def delete_attribute_of_awaited_object(x):
    """``del (await p(o)).attr`` and ``del o.a`` after awaits, with the native AttributeError."""
    box = Box(1, 2)
    del (box if await procedure(is_even, x) else Box()).n
    try:
        del (box if await procedure(ident, True) else None).n
    except AttributeError as e:
        log(str(e))
    await timer("t", 1)
    return vars(box)


add(delete_attribute_of_awaited_object, C(0), C(1), C(0, cancel_at=1, raises=Cancelled))


@workflow
async def sync_generator_made_and_used_up(x):
    """A generator function made in the workflow, each generator used up within a step."""
    def countdown(n):
        while n > 0:
            yield n
            n -= 1

    a = list(countdown(await procedure(ident, x)))
    b = sum(countdown(await procedure(double, x)))
    gen = countdown(3)
    first = next(gen)
    del gen  # a live generator cannot be checkpointed
    await timer("t", 1)
    return a, b, first, [v for v in countdown(2)]


add(sync_generator_made_and_used_up, C(0), C(2), C(3, fail_at=F1, raises=ProcedureFailed))


@workflow
async def match_local_dataclass_with_guard(x):
    """A class pattern on a dataclass made in the workflow, with an awaited guard."""
    @dataclasses.dataclass
    class Pt:
        x: int
        y: int

    p = Pt(await procedure(ident, x), 2)
    match p:
        case Pt(x=0, y=yy):
            r = ("origin", yy)
        case Pt(x=px) if await procedure(is_even, px):
            r = ("even", px)
        case Pt(x=px, y=py):
            r = ("other", px + py)
    await timer("t", 1)
    return r


add(match_local_dataclass_with_guard, C(0), C(2), C(3))


@workflow
async def except_tuple_of_local_classes_in_loop(x):
    """``except (A, B) as e`` with classes made in the workflow, in a loop with continue."""
    class A(Exception):
        pass

    class B(A):
        pass

    out = []
    for i in range(3):
        try:
            if i == x:
                raise B(i)
            if i < x:
                raise A(await procedure(ident, i))
            out.append(await procedure(ident, ("ok", i)))
        except (KeyError, A) as e:
            out.append((type(e).__name__, e.args))
            if isinstance(e, B):
                continue
            await timer("t", i)
    return out


add(except_tuple_of_local_classes_in_loop, C(0), C(1), C(3), C(2, cancel_at=2, raises=Cancelled))


@workflow
async def assert_in_while_with_awaited_message(x):
    """assert in a while loop, its message awaited, caught and counted."""
    n = 0
    fails = []
    while n < 4:
        n += 1
        try:
            assert n % (x + 2), f"n={await procedure(ident, n)}"
        except AssertionError as e:
            fails.append(str(e))
            await timer("t", n)
    return fails


add(assert_in_while_with_awaited_message, C(0), C(1), C(2))


@workflow
async def nonlocal_walrus_in_nested_def(x):
    """A nested def binds a workflow local with a walrus through nonlocal, between awaits."""
    v = 0

    def setv(n):
        nonlocal v
        return (v := n * 2) + 1

    a = setv(await procedure(ident, x))
    await timer("t", 1)
    b = v
    return a, b, setv(v)


add(nonlocal_walrus_in_nested_def, C(0), C(1), C(4))


@workflow
async def pending_exception_through_helper_in_finally(x):
    """A finally that calls an inline helper while an exception is pending; the helper awaits."""
    try:
        try:
            await procedure(explode if x else ident, x)
        finally:
            got = await mutual_recursion_helper_a(x % 2)
            log(got)
    except ProcedureFailed as e:
        log((e.error_type, repr(e.__context__)))
        return "failed"
    return "ok"


add(pending_exception_through_helper_in_finally, C(0), C(1), C(2), C(1, cancel_at=1, raises=Cancelled))



@workflow
async def functions_made_in_nested_lowered_comprehensions(x):
    """Lambdas and generator expressions in comprehensions nested in one that awaits see each
    comprehension's variables as natively, after they ended."""
    grid = [[lambda: (i, j) for j in range(await procedure(ident, 2))] for i in range(x)]  # noqa: B023
    gens = [(sum(i * v for v in range(3)), (i + v for v in range(2))) for i in [await procedure(ident, x)]]
    sums = [(s, list(g)) for s, g in gens]
    del gens  # the generators are used up; a live one cannot be checkpointed
    d = {k: (lambda: k * 10) for k in range(await procedure(ident, x))}  # noqa: B023
    await timer("t", 1)
    return [[f() for f in row] for row in grid], sums, {k: f() for k, f in d.items()}


add(functions_made_in_nested_lowered_comprehensions, C(0), C(1), C(3))


@workflow
async def with_inside_handler_chains_context(x):
    """A with statement inside an except clause: an error in its body chains to the handled one."""
    try:
        try:
            await procedure(explode, x)
        except ProcedureFailed:
            with Recorder(("in handler", x)):
                await timer("t", 1)
                if x:
                    raise KeyError(await procedure(ident, "k"))
            return "handled"
    except KeyError as e:
        log((repr(e), type(e.__context__).__name__, _lines(e)))
        return "key"


add(with_inside_handler_chains_context, C(0), C(1), C(1, cancel_at=1, raises=Cancelled))


@workflow
async def walrus_and_dict_keys_in_calls(x):
    """A walrus in an f-string, a ``**`` dict display with an awaited key, in calls."""
    def f(**kw):
        return sorted(kw.items())

    s = f"{(y := await procedure(ident, x))}-{y + 1}"
    r = f(**{await procedure(ident, "a"): tick(1)}, b=await procedure(ident, 2))
    return s, y, r


add(walrus_and_dict_keys_in_calls, C(0), C(1), C(2, cancel_at=1, raises=Cancelled))


@workflow
async def exception_held_by_a_closure(x):
    """An exception captured by a closure, raised by it after a restore with its chain."""
    try:
        try:
            await procedure(explode, x)
        except ProcedureFailed as e:
            raise ValueError("wrapped") from e
    except ValueError as e:
        err = e

    def again():
        raise err

    await timer("t", 1)
    try:
        again()
    except ValueError as e:
        log((type(e.__cause__).__name__, e.__cause__.error_type, [n for n, _ in _lines(e)]))
    return str(err)


add(exception_held_by_a_closure, C(0), C(1), C(1, cancel_at=1, raises=Cancelled))


del C, add, boom
