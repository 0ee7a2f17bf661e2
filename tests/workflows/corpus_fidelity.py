"""Corpus: programs where a lowering easily disagrees with CPython without any checkpoint.

Names declared ``global``, scopes of lambdas and comprehensions, the work CPython does at a
position before a later await (unpacking, merging, formatting), how often ``__bool__`` runs,
``StopIteration`` leaving the workflow, and locals named like the names generated code uses.
"""

from __future__ import annotations

from workflows import Cancelled, ProcedureFailed, procedure, timer, workflow

from .diffharness import C, add, boom
from .probes import Box, Loud, Oops, Recorder, double, explode, ident, log, tick

G = None  # module globals the workflows below declare ``global`` (each sets them first)
H = None
GX = None


def grow(xs):
    """Append to ``xs`` and return its new length (mutation visible to earlier unpacking)."""
    xs.append("added")
    return len(xs)


def mutate(d, key="k"):
    """Set ``d[key]`` (visible to an earlier ``**d`` only if the merge was deferred)."""
    d[key] = "mutated"
    return key


def pairs(*args, **kwargs):
    """Return what a call received."""
    return args, kwargs


class Shouty:
    """An object whose str/format logs, so formatting order is observable."""

    def __init__(self, tag):
        self.tag = tag

    def __format__(self, spec):
        log(("format", self.tag, spec))
        return f"<{self.tag}>"


# --- names declared global ----------------------------------------------------------------------


@workflow
async def walrus_to_global_with_await(x):
    """A walrus binding a global from an awaited value, in a condition and in a comprehension.

    Module globals are not checkpointed, so each is read in the step that wrote it.
    """
    global G, H
    G = H = None
    if (G := await procedure(double, x)) > 2:
        log(("big", G))
    g = globals()["G"]
    ys = [(H := await procedure(ident, i)) for i in range(x)]
    h = H if ys else "no items"
    return g, h, ys


add(
    walrus_to_global_with_await,
    C(1, returns=(2, 0, [0])),
    C(3, returns=(6, 2, [0, 1, 2])),
    C(0, returns=(0, "no items", [])),
)


@workflow
async def except_as_global_name(x):
    """``except ... as G`` with G global binds the global and deletes it after the handler."""
    global G
    G = "before"
    try:
        await procedure(explode, x)
    except Exception as G:  # noqa: F811, F841 - the global is the point
        log(("in handler", type(G).__name__))
        await timer("h", 1)
        log(("still bound", type(G).__name__))
    return "G" in globals()


add(
    except_as_global_name,
    C(1, returns=False),
    C(2, cancel_at=1, raises=Cancelled),
    C(3, fail_at=frozenset({0}), error=boom, returns=False),
)


@workflow
async def except_as_global_left_by_break(n):
    """A handler binding a global left by ``break``: the global is deleted on the way out."""
    global G
    G = "before"
    for i in range(n):
        try:
            await procedure(explode, i)
        except Exception as G:  # noqa: F811, F841
            await timer("h", i)
            if i >= 1:
                break
    return "G" in globals(), i


add(
    except_as_global_left_by_break,
    C(3, returns=(False, 1)),
    C(1, returns=(False, 0)),
    C(3, cancel_at=1, raises=Cancelled),
)


@workflow
async def match_capture_global(x):
    """Match captures declared global bind the module global, also when a guard awaits."""
    global G, H
    G = H = None
    match await procedure(ident, [x, x + 1]):
        case [G, H] if log(("guard sees", globals()["G"], H)) and await procedure(ident, G + H) > 3:
            where = "guarded"
        case [G, *rest]:
            where = ("rest", rest, G, globals()["G"])
    return where


add(
    match_capture_global,
    C(1, returns=("rest", [2], 1, 1)),
    C(2, returns="guarded"),
    C(5, cancel_at=1, raises=Cancelled),
)


# --- scopes ------------------------------------------------------------------------------------


@workflow
async def lambda_param_named_like_comprehension_variable(n):
    """A lambda parameter (and a nested comprehension variable) named like the loop variable."""
    a = [(lambda x: x * 100)(await procedure(double, x)) for x in range(n)]
    b = [[x for x in range(x)] + [await procedure(ident, x)] for x in range(n)]
    c = [(lambda y, x=x: x + y)(await procedure(ident, x)) for x in range(n)]
    return a, b, c


add(
    lambda_param_named_like_comprehension_variable,
    C(3),
    C(0, returns=([], [], [])),
    C(1, returns=([0], [[0]], [0])),
)


@workflow
async def class_body_nonlocal(x):
    """``nonlocal`` in a class body made in the workflow rebinds the workflow's local."""
    total = await procedure(double, x)

    class Counter:
        nonlocal total
        total += 1
        seen = total

    await timer("t", 1)
    return total, Counter.seen


add(class_body_nonlocal, C(1, returns=(3, 3)), C(5), C(2, cancel_at=1, raises=Cancelled))


@workflow
async def closure_after_its_variable_is_deleted(x):
    """A closure reading a local deleted meanwhile raises NameError (a free variable)."""
    v = await procedure(double, x)
    read = lambda: v  # noqa: E731, F821

    def read_def():
        return v * 2  # noqa: F821

    out = [read(), read_def()]
    del v
    await timer("t", 1)
    for f in (read, read_def, lambda: [v for _ in range(1)], lambda: list(v for _ in "a")):  # noqa: F821
        try:
            out.append(f())
        except NameError as e:
            out.append((type(e).__name__, str(e)))
    try:
        out.append([v for _ in range(1)])  # a free variable before 3.12, a local since (PEP 709)
    except NameError as e:
        out.append((type(e).__name__, str(e)))
    return out


add(
    closure_after_its_variable_is_deleted,
    C(2),
    C(3, cancel_at=1, raises=Cancelled),
    C(1, fail_at=frozenset({0}), raises=ProcedureFailed),
)


@workflow
async def generator_over_an_awaited_iterable(n):
    """A generator expression whose only await is in its outermost iterable is a plain generator
    (that iterable is evaluated in the workflow's scope); comprehensions likewise."""
    total = sum(v for v in await procedure(ident, list(range(n))))
    nested = list((i, j) for i in await procedure(ident, [1, 2]) for j in range(i))
    doubled = [v * 2 for v in await procedure(ident, [n, n + 1]) if v]
    keyed = {v: tick(v) for v in await procedure(ident, range(n))}
    return total, nested, doubled, keyed


add(
    generator_over_an_awaited_iterable,
    C(3, returns=(3, [(1, 0), (2, 0), (2, 1)], [6, 8], {0: 0, 1: 1, 2: 2})),
    C(0),
    C(2, cancel_at=1, raises=Cancelled),
)


# --- StopIteration -------------------------------------------------------------------------------


@workflow
async def stop_iteration_leaving_helper(x):
    """StopIteration raised in an inline helper reaches the caller as RuntimeError."""
    await timer("t", 1)
    if x > 0:
        raise StopIteration(x)
    return "done"


@workflow
async def stop_iteration_escapes(x):
    """StopIteration escaping the workflow ends it with RuntimeError, chained to it."""
    try:
        await stop_iteration_leaving_helper(x)
    except RuntimeError as e:
        log((str(e), type(e.__cause__).__name__, e.__cause__.args))
    v = await procedure(ident, x)
    if v > 1:
        raise StopIteration(v)
    return next(iter([]), "empty")


add(
    stop_iteration_escapes,
    C(0, returns="empty"),
    C(1, returns="empty"),
    C(2, raises=RuntimeError),
)


# --- work CPython does at its position, before a later await -------------------------------------


@workflow
async def unpacking_before_a_later_await(n):
    """``*xs`` unpacks where it stands: in displays and calls, before a later await grows xs."""
    xs = list(range(n))
    lst = [*xs, await procedure(ident, grow(xs))]
    tup = (*xs, await procedure(ident, grow(xs)))
    st = {*xs, await procedure(ident, grow(xs))}
    call = pairs(*xs, await procedure(ident, grow(xs)))
    sub = xs[(*xs, await procedure(ident, grow(xs)))[0]] if n else None
    return lst, tup, sorted(st, key=str), call, sub


add(unpacking_before_a_later_await, C(1), C(0), C(3))


@workflow
async def unpacking_a_non_iterable_before_an_await(x):
    """The native TypeError of ``*v`` on a non-iterable, raised before the later await."""
    out = []
    for build in range(3):
        try:
            if build == 0:
                out.append([*x, await procedure(ident, tick("after"))])
            elif build == 1:
                out.append(pairs(*x, await procedure(ident, tick("after"))))
            else:
                out.append({*x, await procedure(ident, tick("after"))})
        except TypeError as e:
            out.append(str(e))
    return out


add(unpacking_a_non_iterable_before_an_await, C(5), C([1]))


@workflow
async def double_star_merging_before_a_later_await(x):
    """``**d`` merges where it stands, before a later await changes d."""
    d = {"a": x}
    call = pairs(**d, k=await procedure(ident, mutate(d)))
    d = {"a": x}
    disp = {**d, "z": await procedure(ident, mutate(d, "a")), **d}
    d1, d2 = {"a": 1}, {"b": 2}
    out = [call, disp]
    try:
        out.append(pairs(**d1, **d2, b=await procedure(ident, tick("late"))))
    except TypeError as e:
        out.append(str(e))
    try:
        out.append(pairs(a=0, **d1, c=await procedure(ident, tick("never"))))
    except TypeError as e:
        out.append(str(e))
    try:
        out.append(pairs(*x, c=await procedure(ident, tick("lone * is unpacked by the call"))))
    except TypeError as e:
        out.append(str(e))
    try:
        out.append(pairs(**x, c=await procedure(ident, tick("never"))))
    except TypeError as e:
        out.append(str(e))
    try:
        out.append({**x, "c": await procedure(ident, tick("never"))})
    except TypeError as e:
        out.append(str(e))
    return out


add(double_star_merging_before_a_later_await, C(1), C({"q": 1}))


@workflow
async def fstring_parts_formatted_before_a_later_await(x):
    """f-string parts before an await are formatted before it (format, !r, nested specs)."""
    box = Box([x])
    s1 = f"{Shouty('a')}{box.n!r:>8}{await procedure(ident, grow(box.n))}{Shouty('b')}"
    width = 6
    s2 = f"{box.n}{x:>{width}}{await procedure(double, x)}"
    return s1, s2, box.n


add(fstring_parts_formatted_before_a_later_await, C(1), C(22))


# --- how often __bool__ runs ---------------------------------------------------------------------


@workflow
async def bool_called_once_per_test(x):
    """``a and await b`` in a condition tests ``a`` once, as native code does."""
    a, z = Loud(x), Loud(0)
    out = []
    if a and await procedure(ident, x):
        out.append("and")
    if z or await procedure(ident, Loud(x)):
        out.append("or")
    while a and not await procedure(ident, z):
        out.append("while")
        break
    out.append("t" if (z or a) and await procedure(ident, 1) else "f")
    out.append([i for i in range(2) if a and await procedure(ident, i)])
    assert a or await procedure(ident, 1), "never"
    v = a and await procedure(ident, 7)
    out.append(v)
    if not (a and await procedure(ident, z)):
        out.append("not")
    return out


add(bool_called_once_per_test, C(1), C(0))



# --- annotated targets, locals named like generated code ---------------------------------------


@workflow
async def annotated_targets_evaluate_their_parts(x):
    """``d[k()]: T`` evaluates d and k() (each slice part), ``o.a: T`` evaluates o; no binding."""
    d = {}
    d[tick("key")]: int  # noqa: B032
    d[tick(1) : tick(2), tick(3)]: int  # noqa: B032
    Box(tick("obj")).n: int  # noqa: B032
    d[await procedure(ident, tick("awaited"))]: int  # noqa: B032
    return d, x


add(
    annotated_targets_evaluate_their_parts,
    C(1, returns=({}, 1)),
    C(2, cancel_at=0, raises=Cancelled),
    C(3, fail_at=frozenset({0}), raises=ProcedureFailed),
)


@workflow
async def locals_named_like_builtins_the_compiler_uses(x):
    """Locals named BaseException/AssertionError/NameError/iter/next do not change with/assert/for."""
    BaseException = ValueError  # noqa: A001
    AssertionError = KeyError  # noqa: A001, F841
    NameError = TypeError  # noqa: A001
    iter = next = None  # noqa: A001
    out = []
    with Recorder("r", swallow=True):
        await timer("t", 1)
        raise Oops(x)
    try:
        assert x > 5, await procedure(ident, "msg")
    except KeyError:
        out.append("wrong class")
    except Exception as e:
        out.append((type(e).__name__, e.args))
    for i in range(2):
        out.append(await procedure(double, i))
    return out, BaseException.__name__, NameError.__name__, iter, next


add(
    locals_named_like_builtins_the_compiler_uses,
    C(1),
    C(9),
    C(2, fail_at=frozenset({2}), raises=ProcedureFailed),
)


@workflow
async def dunder_named_locals(x):
    """Locals named ``__v``, ``__doc__``, ``__dict__``, ``__reduce__`` and others are plain locals."""
    out = []
    try:
        out.append(__v)  # noqa: F821 - unbound on purpose
    except NameError as e:
        out.append((type(e).__name__, str(e)))
    __v = await procedure(double, x)
    __doc__ = "doc"  # noqa: A001
    __dict__ = {}
    __reduce__ = await procedure(ident, "r")
    __slots__ = ()
    __getattr__ = None
    __module__ = "m"
    await timer("t", 1)
    out += [__v, __doc__, __dict__, __reduce__, __slots__, __getattr__, __module__]
    _Holder__v = "mangled"

    class Holder:
        def get(self):
            return __v  # natively mangled to _Holder__v: a free variable of the workflow

    out.append(Holder().get())
    del __dict__
    try:
        out.append(__dict__)  # noqa: F821
    except NameError as e:
        out.append((type(e).__name__, str(e)))
    return out


add(dunder_named_locals, C(1), C(4), C(2, cancel_at=2, raises=Cancelled))


# No reference to the harness module stays: a checkpoint walks the data of the user modules
# that a workflow's module imports, and the harness holds the whole corpus.
del C, add, boom
