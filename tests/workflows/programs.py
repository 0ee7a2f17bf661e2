"""Random workflow programs for the differential fuzzer (design §5.2).

Programs are trees of small frozen dataclasses that render to Python source, so hypothesis shrinks
a failing program statement by statement and expression by expression into a small one. Every
loop terminates: ``while`` loops count a fresh guard variable up to a small bound and ``for``
loops iterate small finite iterables. ``break``/``continue`` appear only inside loops.

Expressions are int-valued (bools included) so that most programs run to their end; runtime
errors still happen (a raised ``ValueError``, a failing command) and are part of what is compared.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from workflows import Cancelled, ProcedureFailed, select

from . import probes
from .diffharness import tb_lines

VARS = ("a", "b", "c", "x")
TARGETS = ("a", "b", "c")


def namespace() -> dict[str, Any]:
    """The globals generated programs run in (native and compiled alike)."""
    return {
        "__name__": __name__,
        "get": probes.get,
        "fail": probes.fail,
        "wait": probes.wait,
        "select": select,
        "log": probes.log,
        "tick": probes.tick,
        "halt": probes.halt,
        "sub": probes.sub,
        "Box": probes.Box,
        "Point": probes.Point,
        "Recorder": probes.Recorder,
        "CustomErr": probes.CustomErr,
        "loud": probes.Loud,
        "ProcedureFailed": ProcedureFailed,
        "Cancelled": Cancelled,
        "nargs": nargs,
        "MISSING": probes.MISSING,
        "traceback": traceback,
        "tblines": tblines,
        "GV": 0,
        "ML": [],
        # Module-level data whose inner containers the programs hold in locals.
        "NEST": {"items": [], "inner": {"deep": [[], []]}},
        "HOLD": Holder(),
    }


def tblines(tb: Any) -> list[int | None]:
    """The lines of a traceback as the differential comparison sees them: the workflow's own
    frames, without the engine's (natively, an error thrown in at an await has a frame in the
    command's ``__await__``) and with 3.11's comprehension frames folded as 3.12 inlines them."""
    return [line for _, line, _ in tb_lines(tb)]


class Holder:
    """A module-level object of the programs' own module, whose attribute a local holds."""

    def __init__(self) -> None:
        self.kids: list[Any] = []


def nargs(*args: Any, **kwargs: Any) -> int:
    """How many arguments a call received, plus their sum (ints only)."""
    return len(args) + len(kwargs) + sum(args) + sum(kwargs.values())


# ---------------------------------------------------------------------------------------------
# Expressions


class Expr:
    """An int-valued expression."""

    def render(self) -> str:
        """The Python source of the expression."""
        raise NotImplementedError


@dataclass(frozen=True)
class Const(Expr):
    v: int

    def render(self) -> str:
        return str(self.v)


@dataclass(frozen=True)
class Var(Expr):
    name: str

    def render(self) -> str:
        return self.name


@dataclass(frozen=True)
class Tick(Expr):
    n: int

    def render(self) -> str:
        return f"tick({self.n})"


@dataclass(frozen=True)
class CallG(Expr):
    def render(self) -> str:
        return "g()"


@dataclass(frozen=True)
class AwaitGet(Expr):
    e: Expr

    def render(self) -> str:
        return f"(await get({self.e.render()}))"


@dataclass(frozen=True)
class AwaitFail(Expr):
    e: Expr

    def render(self) -> str:
        return f"(await fail({self.e.render()}))"


@dataclass(frozen=True)
class AwaitSub(Expr):
    e: Expr

    def render(self) -> str:
        return f"(await sub({self.e.render()}))"


@dataclass(frozen=True)
class CallBump(Expr):
    e: Expr

    def render(self) -> str:
        return f"bump({self.e.render()})"


@dataclass(frozen=True)
class AwaitSelect(Expr):
    l: Expr  # noqa: E741
    r: Expr

    def render(self) -> str:
        return f"(await select(get({self.l.render()}, name='p'), fail({self.r.render()}, name='q'))).value"


@dataclass(frozen=True)
class Bin(Expr):
    op: str
    l: Expr  # noqa: E741
    r: Expr

    def render(self) -> str:
        return f"({self.l.render()} {self.op} {self.r.render()})"


@dataclass(frozen=True)
class Mod(Expr):
    e: Expr
    k: int

    def render(self) -> str:
        return f"({self.e.render()} % {self.k})"


@dataclass(frozen=True)
class BoolOp(Expr):
    op: str
    l: Expr  # noqa: E741
    r: Expr

    def render(self) -> str:
        return f"({self.l.render()} {self.op} {self.r.render()})"


@dataclass(frozen=True)
class Not(Expr):
    e: Expr

    def render(self) -> str:
        return f"(not {self.e.render()})"


@dataclass(frozen=True)
class IfExp(Expr):
    t: Expr
    a: Expr
    b: Expr

    def render(self) -> str:
        return f"({self.a.render()} if {self.t.render()} else {self.b.render()})"


@dataclass(frozen=True)
class CallH(Expr):
    e: Expr

    def render(self) -> str:
        return f"h({self.e.render()})"


@dataclass(frozen=True)
class Pick(Expr):
    a: Expr
    b: Expr
    i: int

    def render(self) -> str:
        return f"[{self.a.render()}, {self.b.render()}][{self.i}]"


@dataclass(frozen=True)
class DictGet(Expr):
    k: Expr
    v: Expr
    q: Expr

    def render(self) -> str:
        return f"{{{self.k.render()}: {self.v.render()}}}.get({self.q.render()}, 0)"


@dataclass(frozen=True)
class Chain(Expr):
    a: Expr
    b: Expr
    c: Expr

    def render(self) -> str:
        return f"({self.a.render()} < {self.b.render()} < {self.c.render()})"


@dataclass(frozen=True)
class CompAwait(Expr):
    k: int
    e: Expr

    def render(self) -> str:
        return f"sum([(await get(i)) for i in range({self.k}) if i != {self.e.render()}])"


@dataclass(frozen=True)
class CompWalrus(Expr):
    k: int
    e: Expr

    def render(self) -> str:
        return f"len([(w := i + {self.e.render()}) for i in range({self.k})])"


@dataclass(frozen=True)
class Walrus(Expr):
    target: str
    e: Expr

    def render(self) -> str:
        return f"({self.target} := {self.e.render()})"


@dataclass(frozen=True)
class FStrLen(Expr):
    a: Expr
    b: Expr

    def render(self) -> str:
        return f'len(f"{{({self.a.render()})}}-{{({self.b.render()})!r:>3}}")'


@dataclass(frozen=True)
class StarList(Expr):
    """``*arr`` in a list display before ``e`` (which may grow arr): unpacked where it stands."""

    e: Expr

    def render(self) -> str:
        return f"sum([*arr, {self.e.render()}])"


@dataclass(frozen=True)
class StarCall(Expr):
    """``*arr`` among other positional arguments of a call, before ``e``."""

    e: Expr

    def render(self) -> str:
        return f"nargs(*arr, {self.e.render()})"


@dataclass(frozen=True)
class DStarCall(Expr):
    """``**kw`` merged before ``e`` (which may add the key ``k``: a duplicate keyword)."""

    e: Expr

    def render(self) -> str:
        return f"nargs(**kw, k={self.e.render()})"


@dataclass(frozen=True)
class Push(Expr):
    """``push(e)``: appends to arr (so earlier unpacking of arr is observable)."""

    e: Expr

    def render(self) -> str:
        return f"push({self.e.render()})"


@dataclass(frozen=True)
class SetKw(Expr):
    """``setkw(e)``: sets a key of kw (so an earlier ``**kw`` merge is observable)."""

    e: Expr

    def render(self) -> str:
        return f"setkw({self.e.render()})"


@dataclass(frozen=True)
class FStrArr(Expr):
    """An f-string formatting arr before ``e``."""

    e: Expr

    def render(self) -> str:
        return f'len(f"{{arr}}{{({self.e.render()})}}")'


@dataclass(frozen=True)
class LoudE(Expr):
    """An int whose every truth test is logged."""

    e: Expr

    def render(self) -> str:
        return f"loud({self.e.render()})"


@dataclass(frozen=True)
class GenOuter(Expr):
    """A generator expression whose outermost iterable may await."""

    e: Expr

    def render(self) -> str:
        return f"sum(v for v in [{self.e.render()}, 1])"


@dataclass(frozen=True)
class LambdaComp(Expr):
    """A lowered comprehension whose lambda's parameter is named like its variable."""

    k: int

    def render(self) -> str:
        return f"sum([(lambda i: i * 2)(await get(i)) for i in range({self.k})])"


@dataclass(frozen=True)
class NestedBool(Expr):
    """A nested ``and``/``or`` as a value whose inner operands' truth is logged: CPython 3.11
    tests each once (it threads the jumps), 3.12 and later test an inner result again."""

    outer: str
    a: Expr
    b: Expr
    c: Expr

    def render(self) -> str:
        inner = "or" if self.outer == "and" else "and"
        return (
            f"(int((loud({self.a.render()}) {inner} loud({self.b.render()})) {self.outer} "
            f"loud({self.c.render()})))"
        )


@dataclass(frozen=True)
class LateLambdaComp(Expr):
    """Lambdas made in a lowered comprehension, called after it: they see its variable's last
    value (a cell of that run of the comprehension)."""

    k: int

    def render(self) -> str:
        return f"sum(f() for f in [(lambda: i) for i in range({self.k}) if (await get(i)) > -9])"


@dataclass(frozen=True)
class CompStop(Expr):
    """A StopIteration raised in a lowered comprehension: on 3.11 it leaves the comprehension
    (a coroutine of its own) as a RuntimeError; since 3.12 as itself (PEP 479, PEP 709)."""

    k: int
    e: Expr

    def render(self) -> str:
        return f"sum([halt(await get(i), {self.e.render()}) for i in range({self.k})])"


def _contains(e: Expr, kinds: tuple[type, ...]) -> bool:
    if isinstance(e, kinds):
        return True
    return any(_contains(v, kinds) for v in vars(e).values() if isinstance(v, Expr))


def _contains_fstring(e: Expr) -> bool:
    if isinstance(e, (FStrLen, FStrArr)):
        return True
    return any(_contains_fstring(v) for v in vars(e).values() if isinstance(v, Expr))


_leaf = st.one_of(
    st.builds(Const, st.integers(-2, 9)),
    st.builds(Var, st.sampled_from(VARS)),
    st.builds(Tick, st.integers(0, 9)),
    st.just(CallG()),
)


def _extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.builds(AwaitGet, children),
        st.builds(AwaitFail, children),
        st.builds(AwaitSub, children),
        st.builds(CallBump, children),
        st.builds(Bin, st.sampled_from(["+", "-"]), children, children),
        st.builds(Mod, children, st.integers(2, 7)),
        st.builds(BoolOp, st.sampled_from(["and", "or"]), children, children),
        st.builds(Not, children),
        st.builds(IfExp, children, children, children),
        st.builds(CallH, children),
        st.builds(Pick, children, children, st.integers(0, 1)),
        st.builds(DictGet, children, children, children),
        st.builds(Chain, children, children, children),
        st.builds(CompAwait, st.integers(0, 3), children),
        st.builds(CompWalrus, st.integers(1, 3), children),
        st.builds(Walrus, st.sampled_from(TARGETS), children),
        st.builds(AwaitSelect, children, children),
        st.builds(FStrLen, children, children).filter(
            lambda f: not (_contains_fstring(f.a) or _contains_fstring(f.b))
        ),
        st.builds(StarList, children),
        st.builds(StarCall, children),
        st.builds(DStarCall, children),
        st.builds(Push, children),
        st.builds(SetKw, children),
        st.builds(FStrArr, children).filter(lambda f: not _contains_fstring(f.e)),
        st.builds(LoudE, children),
        st.builds(GenOuter, children).filter(lambda g: not _contains(g.e, (Walrus, CompWalrus))),
        st.builds(LambdaComp, st.integers(0, 3)),
        st.builds(NestedBool, st.sampled_from(["and", "or"]), children, children, children),
        st.builds(LateLambdaComp, st.integers(0, 3)),
        st.builds(CompStop, st.integers(1, 3), children),
    )


exprs = st.recursive(_leaf, _extend, max_leaves=4)


# ---------------------------------------------------------------------------------------------
# Statements


class Stmt:
    """A statement; renders to indented lines."""

    def lines(self, ind: str) -> list[str]:
        """The source lines at indentation ``ind``."""
        raise NotImplementedError


def _block(body: tuple[Stmt, ...], ind: str) -> list[str]:
    out: list[str] = []
    for s in body:
        out.extend(s.lines(ind))
    return out or [ind + "pass"]


@dataclass(frozen=True)
class Line(Stmt):
    """A one-line simple statement with expression holes."""

    template: str
    args: tuple[Expr, ...] = ()

    def lines(self, ind: str) -> list[str]:
        return [ind + self.template.format(*(a.render() for a in self.args))]


@dataclass(frozen=True)
class Lines(Stmt):
    """Several fixed lines with expression holes (e.g. assign then del)."""

    templates: tuple[str, ...]
    args: tuple[Expr, ...] = ()

    def lines(self, ind: str) -> list[str]:
        rendered = [a.render() for a in self.args]
        return [ind + t.format(*rendered) for t in self.templates]


@dataclass(frozen=True)
class If(Stmt):
    test: Expr
    body: tuple[Stmt, ...]
    elifs: tuple[tuple[Expr, tuple[Stmt, ...]], ...]
    orelse: tuple[Stmt, ...] | None

    def lines(self, ind: str) -> list[str]:
        out = [f"{ind}if {self.test.render()}:"] + _block(self.body, ind + "    ")
        for t, b in self.elifs:
            out += [f"{ind}elif {t.render()}:"] + _block(b, ind + "    ")
        if self.orelse is not None:
            out += [f"{ind}else:"] + _block(self.orelse, ind + "    ")
        return out


@dataclass(frozen=True)
class While(Stmt):
    guard: str
    bound: int
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] | None

    def lines(self, ind: str) -> list[str]:
        i2 = ind + "    "
        out = [f"{ind}{self.guard} = 0", f"{ind}while {self.guard} < {self.bound}:"]
        out += [f"{i2}{self.guard} += 1"] + _block(self.body, i2)
        if self.orelse is not None:
            out += [f"{ind}else:"] + _block(self.orelse, i2)
        return out


@dataclass(frozen=True)
class For(Stmt):
    var: str
    iterable: str
    args: tuple[Expr, ...]
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] | None

    def lines(self, ind: str) -> list[str]:
        it = self.iterable.format(*(a.render() for a in self.args))
        out = [f"{ind}for {self.var} in {it}:"] + _block(self.body, ind + "    ")
        if self.orelse is not None:
            out += [f"{ind}else:"] + _block(self.orelse, ind + "    ")
        return out


@dataclass(frozen=True)
class Try(Stmt):
    body: tuple[Stmt, ...]
    handlers: tuple[tuple[str, str, tuple[Stmt, ...]], ...]  # (type, "" / "e" / "G", body)
    orelse: tuple[Stmt, ...] | None
    final: tuple[Stmt, ...] | None

    def lines(self, ind: str) -> list[str]:
        i2 = ind + "    "
        out = [f"{ind}try:"] + _block(self.body, i2)
        for typ, named, b in self.handlers:
            if typ == "":
                out.append(f"{ind}except:")
                out += _block(b, i2)
            elif named:
                out.append(f"{ind}except {typ} as {named}:")
                out += [f"{i2}log(type({named}).__name__)", f"{i2}{named}.add_note('caught')"]
                out += [f"{i2}kept = {named}"] + _block(b, i2)
            else:
                out.append(f"{ind}except {typ}:")
                out += _block(b, i2)
        if self.orelse is not None:
            out += [f"{ind}else:"] + _block(self.orelse, i2)
        if self.final is not None:
            out += [f"{ind}finally:"] + _block(self.final, i2)
        return out


@dataclass(frozen=True)
class Match(Stmt):
    subject: str
    args: tuple[Expr, ...]
    cases: tuple[tuple[str, Expr | None, int, tuple[Stmt, ...]], ...]

    def lines(self, ind: str) -> list[str]:
        i2, i3 = ind + "    ", ind + "        "
        out = [f"{ind}match {self.subject.format(*(a.render() for a in self.args))}:"]
        for pattern, guard, k, body in self.cases:
            g = f" if {guard.render()} > {k}" if guard is not None else ""
            out.append(f"{i2}case {pattern}{g}:")
            out += _block(body, i3)
        return out


@dataclass(frozen=True)
class With(Stmt):
    tag: Expr
    swallow: bool
    body: tuple[Stmt, ...]

    def lines(self, ind: str) -> list[str]:
        head = f"{ind}with Recorder({self.tag.render()}, {self.swallow}) as r:"
        return [head] + _block(self.body, ind + "    ")


@dataclass(frozen=True)
class Program:
    """A whole workflow: ``async def wf(x)`` with a fixed prologue and epilogue."""

    body: tuple[Stmt, ...]

    def source(self) -> str:
        """The program's source text."""
        head = [
            "async def wf(x):",
            "    global G",
            "    G = 0",
            "    a, b, c, out = x, 2, 3, []",
            "    kw = {'p': 1}",
            "    def push(v):",
            "        arr.append(v % 3)",
            "        return v",
            "    def setkw(v):",
            "        kw['k' if v % 2 else 'p'] = v",
            "        return v",
            "    box = Box(0)",
            "    arr = [0, 0, 0]",
            "    def h(y):",
            "        return y + a",
            "    g = lambda: b",
            "    def bump(v):",
            "        nonlocal c",
            "        c += v",
            "        return c",
            # Module state read and written by closures, a sentinel, containers iterated
            # across awaits, an exception kept in a local (what a restore must keep meaning).
            "    global GV",
            "    GV = 0",
            "    gv = lambda: GV",
            "    def setgv(v):",
            "        global GV",
            "        GV = v",
            "        return v",
            "    sent = MISSING",
            "    dd = {0: 0, 1: 1, 2: 2}",
            "    ss = {1, 2, 3}",
            # A set whose order a plain rebuild changes (its elements collide), and a module-level
            # list held in a local (the module's object after a restore).
            "    sc = {7, 15, 23, 31}",
            "    ML.clear()",
            "    ml = ML",
            # Containers reached through module-level data (a dict's value, a list's item, an
            # object's attribute) held in locals: the module's objects after a restore.
            "    NEST['items'].clear()",
            "    NEST['inner']['deep'][1].clear()",
            "    HOLD.kids.clear()",
            "    ni, nd2, hk = NEST['items'], NEST['inner']['deep'][1], HOLD.kids",
            # A set with removed elements (dummy slots) that grows, shrinks and pops across
            # awaits: its table, not only its order, must come back.
            "    sg = set(range(0, 48, 8))",
            "    sg.discard(8)",
            "    sg.discard(24)",
            "    kept = KeyError('none yet')",
        ]
        tail = [
            "    return (a, b, c, out, box.n, arr, kw, globals().get('G'), GV, gv(), sent is MISSING,",
            "            list(dd.items()),",
            "            list(ss), list(sc), list(ML), ml is ML,",
            "            list(sg), list(NEST['items']), NEST['inner']['deep'], list(HOLD.kids),",
            "            ni is NEST['items'], nd2 is NEST['inner']['deep'][1], hk is HOLD.kids,",
            "            repr(kept), repr(kept.__cause__), repr(kept.__context__),",
            "            kept.__suppress_context__, getattr(kept, '__notes__', None))",
        ]
        return "\n".join(head + _block(self.body, "    ") + tail) + "\n"


_EXC_TYPES = st.sampled_from(
    [
        "ValueError",
        "KeyError",
        "CustomErr",
        "ProcedureFailed",
        "Exception",
        "(ValueError, CustomErr)",
        "Cancelled",
        "",  # bare except
    ]
)

_PATTERNS = st.sampled_from(["0", "1", "[p, *q]", "{'k': v}", "Point(x=px)", "(0 | 2)", "[G, *q]"])
_SUBJECTS = st.sampled_from([("{}", 1), ("[{}, {}]", 2), ("{{'k': {}}}", 1), ("Point({}, {})", 2)])
_ITERABLES = st.sampled_from(
    [
        ("range({})", 0),
        ("[{}, {}]", 2),
        ("list(out[:2])", 0),
        ("enumerate([{}, {}])", 2),
        ("zip(range(2), [{}, {}])", 2),
        ("dict.fromkeys([1, 2])", 0),
        ("dd", 0),
        ("dd.items()", 0),
        ("dd.values()", 0),
        ("ss", 0),
        ("sc", 0),
        ("[v for v in sc]", 0),
    ]
)

# Exceptions kept in ``kept``: with a traceback and a note, a cause, an implicit context, a
# suppressed context (each is raised again, logged or returned later, after awaits).
_KEEP = st.sampled_from(
    [
        ("try:", "    raise ValueError({})", "except ValueError as ke:", "    ke.add_note('kept')",
         "    kept = ke"),
        ("try:", "    try:", "        raise ValueError({})", "    except ValueError as ke:",
         "        raise KeyError({}) from ke", "except KeyError as ke2:", "    ke2.extra = {}",
         "    kept = ke2"),
        ("try:", "    try:", "        raise CustomErr({}, 0)", "    except CustomErr:",
         "        {{}}[{}]", "except KeyError as ke:", "    kept = ke"),
        ("try:", "    try:", "        raise ValueError({})", "    except ValueError:",
         "        raise CustomErr({}, 1) from None", "except CustomErr as ke:", "    kept = ke"),
    ]
)


@st.composite
def simple(draw: Any, in_loop: bool) -> Stmt:
    """A one-line (or two-line) statement."""
    e = exprs
    choices = [
        "assign",
        "aug",
        "augattr",
        "augitem",
        "append",
        "log",
        "logf",
        "await",
        "retif",
        "raiseif",
        "del",
        "tuple",
        "walrus",
        "gwalrus",
        "annsub",
        "stopiter",
        "delclosure",
        "shadow",
        "assert",
        "dunder",
        "keep",
        "raisekept",
        "logkept",
        "global",
        "sentinel",
        "dwrite",
        "dgrow",
        "sgrow",
        "sread",
        "mlist",
        "nest",
        "sgrow2",
        "ndel",
        "chain",
        "later",
    ]
    if in_loop:
        choices.append("leap")
    kind = draw(st.sampled_from(choices))
    if kind == "later":
        # An inline call made now and awaited after other work (which may await), maybe
        # awaited again: nothing of it runs before its await, and it runs once.
        templates = ["pend = sub({0})", "log(({1}, await pend))"]
        if draw(st.booleans()):
            templates += ["try:", "    await pend", "except RuntimeError as pe:", "    log(str(pe))"]
        return Lines(tuple(templates), (draw(e), draw(e)))
    if kind == "assign":
        return Line(f"{draw(st.sampled_from(TARGETS))} = {{}}", (draw(e),))
    if kind == "aug":
        op = draw(st.sampled_from(["+=", "-=", "|="]))
        return Line(f"{draw(st.sampled_from(TARGETS))} {op} {{}}", (draw(e),))
    if kind == "augattr":
        return Line("box.n += {}", (draw(e),))
    if kind == "augitem":
        return Line(f"arr[{draw(st.integers(0, 2))}] += {{}}", (draw(e),))
    if kind == "append":
        return Line("out.append({})", (draw(e),))
    if kind == "log":
        return Line("log({})", (draw(e),))
    if kind == "logf":
        a, b = draw(e), draw(e)
        if _contains_fstring(a) or _contains_fstring(b):
            return Line("log({})", (a,))
        return Line('log(f"{{({})}}:{{({})!r}}")', (a, b))
    if kind == "await":
        cmd = draw(st.sampled_from(["get({})", "fail({})", "wait()"]))
        return Line(f"await {cmd}", (draw(e),) if "{}" in cmd else ())
    if kind == "retif":
        return Line(f"if {{}} > {draw(st.integers(0, 8))}: return {{}}", (draw(e), draw(e)))
    if kind == "raiseif":
        exc = draw(st.sampled_from(["ValueError({})", "KeyError({})", "CustomErr({}, {})"]))
        n = exc.count("{}")
        return Line(
            f"if {{}} > {draw(st.integers(0, 8))}: raise {exc}", tuple(draw(e) for _ in range(n + 1))
        )
    if kind == "del":
        return Lines(("t = {}", "log(t)", "del t"), (draw(e),))
    if kind == "tuple":
        t1, t2 = draw(st.permutations(TARGETS))[:2]
        return Line(f"{t1}, {t2} = {{}}, {{}}", (draw(e), draw(e)))
    if kind == "walrus":
        return Line(f"({draw(st.sampled_from(TARGETS))} := {{}})", (draw(e),))
    if kind == "gwalrus":
        return Line("log((G := {}))", (draw(e),))
    if kind == "annsub":
        return Line("arr[{} % 3]: int", (draw(e),))
    if kind == "stopiter":
        return Line(f"if {{}} > {draw(st.integers(0, 8))}: raise StopIteration({{}})", (draw(e), draw(e)))
    if kind == "delclosure":
        return Lines(
            (
                "dv = {}",
                "fv = lambda: dv",
                "del dv",
                "try:",
                "    log(fv())",
                "except NameError as ne:",
                "    log(str(ne))",
            ),
            (draw(e),),
        )
    if kind == "shadow":
        return Line("BaseException = AssertionError = {}", (draw(e),))
    if kind == "assert":
        return Line(f"assert {{}} > {draw(st.integers(0, 8))}, {{}}", (draw(e), draw(e)))
    if kind == "dunder":
        return Lines(("__v = {}", "log(__v)"), (draw(e),))
    if kind == "keep":
        templates = draw(_KEEP)
        n = sum(t.count("{}") for t in templates)
        return Lines(templates, tuple(draw(e) for _ in range(n)))
    if kind == "raisekept":
        return Line(f"if {{}} > {draw(st.integers(0, 8))}: raise kept", (draw(e),))
    if kind == "logkept":
        return Line(
            "log((repr(kept), repr(kept.__cause__), repr(kept.__context__), "
            "kept.__suppress_context__, getattr(kept, '__notes__', None), "
            "tblines(kept.__traceback__)))"
        )
    if kind == "global":
        which = draw(st.sampled_from(["GV = {}", "setgv({})", "log(gv())", "log(GV)"]))
        return Line(which, (draw(e),) if "{}" in which else ())
    if kind == "sentinel":
        which = draw(st.sampled_from(["sent = {{}}.get({}, MISSING)", "log(sent is MISSING)"]))
        return Line(which, (draw(e),) if "{}" in which else ())
    if kind == "dwrite":
        return Line("dd[{} % 3] = {}", (draw(e), draw(e)))
    if kind == "dgrow":
        # Only growth: removing and adding keys at the same size while a loop iterates the dict
        # is refused at the checkpoint (natively it raises later, by a count of items).
        return Line("dd[{}] = 0", (draw(e),))
    if kind == "sgrow":
        which = draw(st.sampled_from(["ss.add({} % 4)", "ss.discard({} % 4)"]))
        return Line(which, (draw(e),))
    if kind == "sread":
        return Line(draw(st.sampled_from(["log(list(sc))", "log(next(iter(sc)))", "log(repr(sc))"])))
    if kind == "mlist":
        which = draw(st.sampled_from(["ml.append({})", "log(len(ML))", "log(ml is ML)", "ML.append({})"]))
        return Line(which, (draw(e),) if "{}" in which else ())
    if kind == "nest":
        which = draw(
            st.sampled_from(
                [
                    "ni.append({})",
                    "nd2.append({})",
                    "hk.append({})",
                    "NEST['items'].append({})",
                    "HOLD.kids.append({})",
                    "log((list(ni), list(nd2), list(hk)))",
                    "log(ni is NEST['items'])",
                ]
            )
        )
        return Line(which, (draw(e),) if "{}" in which else ())
    if kind == "sgrow2":
        which = draw(
            st.sampled_from(
                [
                    "sg.add(({}) * 8)",
                    "sg.add(({}) * 8 + 64)",
                    "sg.discard(({}) * 8)",
                    "sg.add(-1 if {} else -2)",
                    "log(sg.pop() if sg else None)",
                    "log(list(sg))",
                ]
            )
        )
        return Line(which, (draw(e),) if "{}" in which else ())
    if kind == "ndel":
        # A workflow local deleted from a nested function through ``nonlocal``, deleted again
        # and read: CPython's NameError and its message.
        return Lines(
            (
                "nd = {}",
                "def dropnd():",
                "    nonlocal nd",
                "    del nd",
                "def readnd():",
                "    return nd",
                "dropnd()",
                "for fn in (dropnd, readnd):",
                "    try:",
                "        log(fn())",
                "    except NameError as ne:",
                "        log(str(ne))",
            ),
            (draw(e),),
        )
    if kind == "chain":
        # A comparison chain that may stop at its first link, with an await in a later one.
        return Line(
            f"log({{}} < {{}} <= await get({{}}) {draw(st.sampled_from(['<', '!=', '>']))} 4)",
            (draw(e), draw(e), draw(e)),
        )
    leap = draw(st.sampled_from(["break", "continue"]))
    return Line(f"if {{}} > {draw(st.integers(0, 8))}: {leap}", (draw(e),))


class _Names:
    """Fresh names for loop guards and loop variables within one program."""

    def __init__(self) -> None:
        self.n = 0

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"


@st.composite
def block(draw: Any, depth: int, in_loop: bool, names: _Names) -> tuple[Stmt, ...]:
    """One to four statements (two when nested); compound ones only while ``depth < 3``."""
    n = draw(st.integers(1, 4 if depth == 0 else 2))
    return tuple(draw(statement(depth, in_loop, names)) for _ in range(n))


@st.composite
def statement(draw: Any, depth: int, in_loop: bool, names: _Names) -> Stmt:
    """A simple statement, or (below depth 3) a compound one."""
    kinds = ["simple"] * 5
    if depth < 3:
        kinds += ["if", "while", "for", "try", "match", "with"]
    kind = draw(st.sampled_from(kinds))
    d = depth + 1
    if kind == "simple":
        return draw(simple(in_loop))
    if kind == "if":
        n_elif = draw(st.integers(0, 2))
        elifs = tuple((draw(exprs), draw(block(d, in_loop, names))) for _ in range(n_elif))
        orelse = draw(st.none() | block(d, in_loop, names))
        return If(draw(exprs), draw(block(d, in_loop, names)), elifs, orelse)
    if kind == "while":
        guard = names.fresh("g")
        body = draw(block(d, True, names))
        orelse = draw(st.none() | block(d, in_loop, names))
        return While(guard, draw(st.integers(0, 3)), body, orelse)
    if kind == "for":
        var = names.fresh("i")
        iterable, n_args = draw(_ITERABLES)
        if iterable == "range({})":
            iterable = f"range({draw(st.integers(0, 3))})"
        args = tuple(draw(exprs) for _ in range(n_args))
        body = draw(block(d, True, names))
        orelse = draw(st.none() | block(d, in_loop, names))
        return For(var, iterable, args, body, orelse)
    if kind == "try":
        body = draw(block(d, in_loop, names))
        n_h = draw(st.integers(0, 2))
        handlers = tuple(
            (t, draw(st.sampled_from(["", "e", "G"])) if t != "" else "", draw(block(d, in_loop, names)))
            for t in [draw(_EXC_TYPES) for _ in range(n_h)]
        )
        # a bare except must be last
        handlers = tuple(h for h in handlers if h[0] != "") + tuple(h for h in handlers if h[0] == "")[:1]
        orelse = draw(st.none() | block(d, in_loop, names)) if handlers else None
        final = draw(st.none() | block(d, in_loop, names))
        if not handlers and final is None:
            final = draw(block(d, in_loop, names))
        return Try(body, handlers, orelse, final)
    if kind == "match":
        subject, n_args = draw(_SUBJECTS)
        args = tuple(draw(exprs) for _ in range(n_args))
        n_cases = draw(st.integers(1, 3))
        cases = []
        for _ in range(n_cases):
            guard = draw(st.none() | exprs)
            cases.append((draw(_PATTERNS), guard, draw(st.integers(0, 5)), draw(block(d, in_loop, names))))
        if draw(st.booleans()):
            cases.append(("_", None, 0, draw(block(d, in_loop, names))))
        return Match(subject, args, tuple(cases))
    return With(draw(exprs), draw(st.booleans()), draw(block(d, in_loop, names)))


@st.composite
def programs(draw: Any) -> Program:
    """A whole random workflow program."""
    return Program(draw(block(0, False, _Names())))
