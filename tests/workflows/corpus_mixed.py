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


del C, add, boom
