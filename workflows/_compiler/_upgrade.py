"""Upgrading a suspended continuation onto new code of its workflow.

The compiler gives every await of a workflow a *stable identity* that survives edits elsewhere in
the function: its command with its literal names (``select(timer 'end', signal 'bid')``), its rank
among the awaits of the function with that same command (``#1``, ``#2`` in source order), the
constructs that hold state around it (loops, ``try`` clauses, ``with`` blocks, comprehensions), the
decisions that lead to it (``if`` tests, ``case`` patterns and guards) and the workflow locals live
there (read, on some path after the await resumes, before being
assigned). Each checkpoint carries, per frame, the record of the point it is suspended at, so a
later process can compare the old point with the new code's without the old code.

``plan`` decides, frame by frame, whether a stored continuation can move onto the code loaded
now, and how (automatically, or by an upgrade function the developer registered for the old
fingerprint); ``apply`` then rewrites the frames. Nothing is changed unless every frame can move.
"""

from __future__ import annotations

import ast
import bisect
import copy
import dataclasses
import hashlib
import linecache
import re
import sys
import traceback
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ._ast import parse
from ._pickle_modules import user_module
from ._scope import LOCAL, SYNTH, arg_names

POINT_FORMAT = 1  # the layout of a point record and of the internal slots it maps

# Internal frame slots that belong to a construct: the construct's uid is the digits.
_CONSTRUCT_SLOT = re.compile(r"^(_af_it|_af_exc|_af_fin|_af_m|" + SYNTH + r")(\d+)(\D.*)?$")
_TEMP_SLOT = re.compile(r"^_af_t(\d+)$")
# A lowered comprehension's variable (``_af_s3_x``, or ``_af_s3c.x`` when a function made in the
# comprehension reads it): shown, and compared, as the user's name.
_COMP_VAR = re.compile(SYNTH + r"\d+(?:_|c\.)")
_UIDS = re.compile(r"(_af_[a-z]+)\d+")
# The constructs a point's structure lists (an if or a match case body holds no state, and a
# loop's condition may change); those whose state an upgrade function cannot make up.
_STRUCTURAL = {"while", "for", "try", "try-else", "except", "finally", "with", "match", "comprehension"}
_STATEFUL = _STRUCTURAL - {"while"}


# --------------------------------------------------------------------------------------------
# Compile time: the identity, structure and live locals of each await

# What the lowering knows of one await: the constructs around it ``(kind, detail, uid)``, the
# statements being lowered with the uid counter when each began, the counter at the await, and
# the temporaries kept across it.
Shape = tuple[tuple[tuple[str, str, int], ...], tuple[tuple[ast.AST, int], ...], int, frozenset[str]]


@dataclass(frozen=True)
class Point:
    """One suspension point of a workflow's code, as stored with a checkpoint."""

    ident: str  # "select(timer 'end', signal 'bid') #1", or "start" before the first step
    line: int
    path: tuple[tuple[str, str], ...]  # (kind, detail) of the enclosing stateful constructs
    uids: tuple[int, ...]  # the compiler's uid of each construct in ``path``
    live: frozenset[str] | None  # None: not known (never moved automatically)
    # The statements being lowered around the await, outermost first: a digest of each and the
    # uid counter when its lowering began; and the counter at the await. A temporary kept across
    # the await (a half-evaluated expression) has a uid in that range, owned by one of them.
    owners: tuple[tuple[str, int], ...]
    uid_at: int
    compiler: str
    # Locals that may hold a value there in a run of this code (assigned before it on some path).
    bound: frozenset[str] | None = None
    # Of the live locals, those no run of this code can have assigned there (a read of one is an
    # UnboundLocalError): known for the loaded code only, never recorded.
    unset: frozenset[str] = frozenset()
    # A digest of the awaits of the same command up to this one (each with the code around it,
    # and the statements between it and the one before): the rank names another await of the
    # new code if one of those was added, removed or moved. "" where not recorded.
    pre: str = ""
    # The only await of its command in the function: then no rank can name another.
    solo: bool = False
    # Of the live locals, those every run of this code has assigned there (loaded code only).
    must: frozenset[str] = frozenset()
    # The temporaries kept across the await: values of a half-evaluated statement, read when
    # it resumes (loaded code only).
    held: frozenset[str] = frozenset()
    # What decides, inside the await's own statement, that it runs (an ``and``/``or`` it is a
    # later operand of, a conditional expression it is a branch of: ``_Context.fork``), as a
    # digest; "" where nothing does.
    fork: str = ""
    # Where the awaited command is not written out (``await cmd``, ``signal(kind)``,
    # ``gather(*cmds)``): a digest of its expression and of the statements before it that
    # compute the locals it reads; "" where the command and its names are literal.
    computed: str = ""
    # The locals that a function or lambda the code may have made by then reads (through the
    # frame): dropping one breaks such a function if it is still held.
    captured: frozenset[str] = frozenset()
    # The decisions on the path to the await (``_Context.branch``), as a digest; "" where
    # nothing decides it (it is in no if, elif or case).
    branch: str = ""
    # Per live local, each statement that assigns or changes it, and per workflow effect
    # (``send()``), each statement making it (a digest of the name and the statement): how many
    # such statements run before the await and how many after it.
    writes: tuple[tuple[str, str, int, int], ...] = ()
    # Per entry of ``writes``: the loops around the await each of its statements is in, as a
    # count per statement ("0,1": one outside them, one in the innermost loop around the await),
    # where one is in such a loop. None: a record made before this was recorded.
    levels: tuple[tuple[str, str, str], ...] | None = ()
    # Per local live there (or whose value one may hold: ``h = f``), the statements (as
    # digests) that run before the await, or in a loop around it, and make a function (a
    # ``def``, a ``lambda``) that it may hold: the instance keeps the function the old code made, with the old body. None: a
    # record made before this was recorded.
    makers: tuple[tuple[str, str], ...] | None = ()

    def record(self) -> dict[str, Any]:
        """The point as a checkpoint header stores it: what is empty or implied is left out
        (it is written with every step)."""
        r: dict[str, Any] = {"id": self.ident, "line": self.line}
        if self.path:
            r["path"] = [list(p) for p in self.path]
            r["uids"] = list(self.uids)
        r["live"] = sorted(self.live) if self.live is not None else None
        if self.bound is not None and self.live is not None:
            # Usually the same names: only the differences are stored.
            if self.bound - self.live:
                r["bx"] = sorted(self.bound - self.live)
            if self.live - self.bound:
                r["bm"] = sorted(self.live - self.bound)
        if self.owners and self.uid_at > self.owners[0][1]:
            # Only where a temporary can be kept across the await (a uid was given out since
            # the outermost statement around it began).
            r["own"] = [list(o) for o in self.owners]
            r["ua"] = self.uid_at
        if self.pre:
            r["pre"] = self.pre
        if self.solo:
            r["so"] = 1
        if self.fork:
            r["fk"] = self.fork
        if self.computed:
            r["cx"] = self.computed
        if self.captured:
            r["cl"] = sorted(self.captured)
        if self.branch:
            r["br"] = self.branch
        if self.writes:
            r["wr"] = [list(w) for w in self.writes]
            if self.levels is not None:
                r["wl"] = [list(w) for w in self.levels]
            if self.makers is not None:
                r["fn"] = [list(w) for w in self.makers]
        r["cv"] = self.compiler
        r["pf"] = POINT_FORMAT
        return r

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> Point:
        """The point a checkpoint records (ValueError: a record this version cannot read)."""
        if r.get("pf") != POINT_FORMAT:
            raise ValueError(
                f"its checkpoint records its suspension point in format {r.get('pf')!r}, this "
                f"version of actorflow reads format {POINT_FORMAT}"
            )
        live = r.get("live")
        bound = None
        if live is not None:
            bound = (frozenset(live) - frozenset(r.get("bm", ()))) | frozenset(r.get("bx", ()))
        return cls(
            ident=r["id"],
            line=int(r.get("line", 0)),
            path=tuple((str(k), str(d)) for k, d in r.get("path", [])),
            uids=tuple(int(u) for u in r.get("uids", [])),
            live=frozenset(live) if live is not None else None,
            owners=tuple((str(d), int(u)) for d, u in r.get("own", [])),
            uid_at=int(r.get("ua", 0)),
            compiler=str(r.get("cv", "")),
            bound=bound,
            pre=str(r.get("pre", "")),
            solo=bool(r.get("so", 0)),
            fork=str(r.get("fk", "")),
            computed=str(r.get("cx", "")),
            captured=frozenset(str(n) for n in r.get("cl", ())),
            branch=str(r.get("br", "")),
            writes=tuple((str(n), str(d), int(b), int(a)) for n, d, b, a in r.get("wr", [])),
            levels=tuple((str(n), str(d), str(v)) for n, d, v in r.get("wl", []))
            if "wl" in r or "wr" not in r else None,
            makers=tuple((str(n), str(d)) for n, d in r.get("fn", []))
            if "fn" in r or "wr" not in r else None,
        )

    def where(self) -> str:
        if self.ident == "start":
            return "its start (before its first step)"
        return f"await {self.ident} (line {self.line})"

    def structure(self) -> str:
        """The constructs around the await as the user wrote them (a with block, not the try
        statements it is lowered into)."""
        if not self.path:
            return "the function body"
        shown = []
        for i, (k, d) in enumerate(self.path):
            if k == "try" and i and self.path[i - 1][0] == "with" and self.path[i:i + 2] == _WITH_TRIES:
                continue
            if k == "try" and i > 1 and self.path[i - 2][0] == "with" and self.path[i - 1:i + 1] == _WITH_TRIES:
                continue
            shown.append(f"{k} {d}".strip() if k != "while" else "while loop")
        return " > ".join(shown)


# The two try statements a with block is lowered into (``_lower.st_With``), around its body.
_WITH_TRIES = (("try", "finally"), ("try", "except _af_rt.BaseException"))


def command_of(v: ast.expr) -> str:
    """The stable text of an awaited expression: its command and literal names."""
    if isinstance(v, ast.Call):
        name = _dotted(v.func)
        short = name.rsplit(".", 1)[-1] if name else "?"
        if short in ("timer", "signal"):
            lit = _first_arg(v, "name")
            return f"{short} {lit!r}" if isinstance(lit, str) else f"{short} ?"
        if short in ("procedure", "spawn"):
            target = _dotted(v.args[0]) if v.args else None
            label = _kw_literal(v, "name")
            out = f"{short} {target or '?'}"
            return out + (f" name={label!r}" if isinstance(label, str) else "")
        if short in ("select", "gather"):
            arms = ["*" + command_of(a.value) if isinstance(a, ast.Starred) else command_of(a)
                    for a in v.args]
            return f"{short}({', '.join(arms)})"
        return f"{name or '?'}(...)"
    if isinstance(v, (ast.Name, ast.Attribute)):
        return _dotted(v) or "?"
    return type(v).__name__


def literal_command(v: ast.expr, locals_: Iterable[str] = ()) -> bool:
    """Whether an awaited expression names its command in the text (``timer("rest")``,
    ``procedure(visit, s)``, ``select(signal("a"), timer("b"))``, an inline ``helper(...)``), so
    that ``command_of`` tells two commands apart; not an awaited variable, a name computed at run
    time, or a starred list of commands."""
    if isinstance(v, ast.Call):
        name = _dotted(v.func)
        if name is None or name.split(".")[0] in locals_:
            return False  # a function or object the workflow holds
        short = name.rsplit(".", 1)[-1]
        if short in ("timer", "signal"):
            return isinstance(_first_arg(v, "name"), str)
        if short in ("procedure", "spawn"):
            target = _dotted(v.args[0]) if v.args else None
            return target is not None and target.split(".")[0] not in locals_
        if short in ("select", "gather"):
            return all(not isinstance(a, ast.Starred) and literal_command(a, locals_) for a in v.args)
        return True
    return False


def _dotted(e: ast.expr) -> str | None:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        base = _dotted(e.value)
        return f"{base}.{e.attr}" if base else None
    return None


def _first_arg(c: ast.Call, kw: str) -> Any:
    if c.args and isinstance(c.args[0], ast.Constant):
        return c.args[0].value
    return _kw_literal(c, kw)


def _kw_literal(c: ast.Call, kw: str) -> Any:
    for k in c.keywords:
        if k.arg == kw and isinstance(k.value, ast.Constant):
            return k.value.value
    return None


def _pos(n: ast.AST) -> tuple[int, int, int, int]:
    return (
        getattr(n, "lineno", 0),
        getattr(n, "col_offset", 0),
        getattr(n, "end_lineno", 0) or 0,
        getattr(n, "end_col_offset", 0) or 0,
    )


def describe_points(
    node: ast.AsyncFunctionDef,
    point_nodes: dict[int, ast.Await],
    shapes: dict[int, Shape],
    locals_: set[str],
    compiler: str,
    module: ModuleEffects | None = None,
) -> dict[int, Point]:
    """The ``Point`` of each resume label of a compiled workflow (``module``: what its module holds
    that its statements may act on)."""
    live = Liveness(locals_).run(node)
    bound = may_be_bound(node, locals_)
    can_be_bound = may_be_bound(node, locals_, sound=True)
    order = sorted(point_nodes, key=lambda lbl: _pos(point_nodes[lbl]))
    digests: dict[int, str] = {}

    def digest(stmt: ast.AST) -> str:
        d = digests.get(id(stmt))
        if d is None:
            # The compiler's own names carry uids, which shift with edits elsewhere: not compared.
            dump = _UIDS.sub(r"\1", ast.dump(stmt, include_attributes=False))
            d = digests[id(stmt)] = hashlib.sha256(dump.encode()).hexdigest()[:16]
        return d

    ranks: dict[str, int] = {}
    seen: dict[tuple[int, int, int, int], int] = {}
    out: dict[int, Point] = {}
    context = _Context(node, module)
    # Per command: the awaits of it so far (their place), and the commands awaited since the last.
    places: dict[str, list[str]] = {}
    last: dict[str, tuple[int, int, int, int]] = {}  # per command: where its last await was
    # Every statement of the function by where it starts, as text (its head: a compound one
    # without the bodies it runs; awaits as their commands).
    stmts = sorted((_pos(n), context.text(_head(n))) for n in ast.walk(node)
                   if isinstance(n, ast.stmt) and n is not node)
    starts = [p for p, _ in stmts]
    counts: dict[str, int] = {}
    for e in point_nodes.values():
        c = command_of(e.value)
        counts[c] = counts.get(c, 0) + 1
    for label in order:
        e = point_nodes[label]
        cmd = command_of(e.value)
        ranks[cmd] = ranks.get(cmd, 0) + 1
        mine = places.setdefault(cmd, [])
        # The statements between the await of this command before it and it (none counted
        # before the first: code added earlier in the function, awaits of other commands
        # included, moves nothing), and the code around it.
        here = pos = _pos(e)
        if mine:
            lo, hi = bisect.bisect_right(starts, last[cmd]), bisect.bisect_left(starts, here)
            between = ",".join(t for _, t in stmts[lo:hi])
        else:
            between = ""
        last[cmd] = here
        mine.append(f"{hashlib.sha256(between.encode()).hexdigest()[:16]}|{context.of(e)}")
        pre = hashlib.sha256("\n".join(mine).encode()).hexdigest()[:16]
        structure, owners, uid_at, held = shapes.get(label, ((), (), 0, frozenset()))
        stateful = [(k, d, u) for k, d, u in structure if k in _STRUCTURAL]
        # Which while loop: its place among the while loops of the function (its condition may
        # change, but an await moved into another loop runs with the other loop's locals).
        whiles = iter(context.whiles_around(e))
        stateful = [(k, d if k != "while" else next(whiles, d), u) for k, d, u in stateful]
        # An await lowered twice (never, today) would have two labels for one place: neither
        # can be told apart from the other, so neither moves automatically.
        twice = pos in seen
        seen[pos] = label
        out[label] = Point(
            ident=f"{cmd} #{ranks[cmd]}",
            line=e.lineno,
            # A lowered comprehension's variables are named after its uid: shown as the user's.
            path=tuple((k, _COMP_VAR.sub("", d)) for k, d, _ in stateful),
            uids=tuple(u for _, _, u in stateful),
            live=None if twice else live.get(pos),
            owners=tuple((digest(o), u) for o, u in owners),
            uid_at=uid_at,
            compiler=compiler,
            bound=bound.get(pos),
            unset=(live.get(pos, frozenset()) - can_be_bound.get(pos, frozenset())) if not twice
            else frozenset(),
            pre=pre,
            solo=counts[cmd] == 1,
            must=context.assigned_before(e, locals_),
            held=held,
            fork=context.fork(e),
            computed="" if literal_command(e.value, locals_) else context.computed(e, locals_),
            captured=context.captured(e, locals_),
            branch=context.branch(e),
            writes=context.writes(e, live.get(pos, frozenset()), locals_) if not twice else (),
            levels=context.levels(e, live.get(pos, frozenset()), locals_) if not twice else (),
            makers=context.makers(e, live.get(pos, frozenset()), locals_) if not twice else (),
        )
        if twice:
            out[seen[pos]] = _replace_live(out[seen[pos]], None)
    return out


def _replace_live(p: Point, live: frozenset[str] | None) -> Point:
    return dataclasses.replace(p, live=live)


class _Context:
    """Where an await is, beyond its structure: the statement it is in and the ``if`` tests and
    ``case`` patterns and guards around it, as text in which every await shows as its command only (a
    changed argument, a timer's wait, is not a move), and the locals assigned before it on
    every path."""

    def __init__(self, fn: ast.AsyncFunctionDef, module: ModuleEffects | None = None) -> None:
        self.fn = fn
        self.module = module if module is not None else ModuleEffects(frozenset(), frozenset())
        self.parent: dict[int, ast.AST] = {}
        for n in ast.walk(fn):
            for c in ast.iter_child_nodes(n):
                self.parent[id(c)] = n
        self._text: dict[int, str] = {}
        self._whiles: dict[int, int] | None = None
        self._stmts: list[Any] | None = None
        self._digests: dict[tuple[str, str], str] = {}

    def _chain(self, e: ast.AST) -> list[ast.AST]:
        """``e`` and the nodes around it, innermost first, up to the function."""
        out = [e]
        while id(out[-1]) in self.parent and out[-1] is not self.fn:
            out.append(self.parent[id(out[-1])])
        return out

    def of(self, e: ast.AST) -> str:
        parts: list[str] = []
        chain = self._chain(e)
        own = next((n for n in chain if isinstance(n, ast.stmt)), None)
        if own is not None:
            parts.append(self.text(_head(own)))
        for inner, outer in zip(chain, chain[1:], strict=False):
            if outer is own:
                continue
            if isinstance(outer, ast.If) and inner is not outer.test:
                branch = "then" if any(inner is b for b in outer.body) else "else"
                parts.append(f"if {self.text(outer.test)} {branch}")
            elif isinstance(outer, ast.match_case):
                guard = f" if {self.text(outer.guard)}" if outer.guard is not None else ""
                parts.append(f"case {self.text(outer.pattern)}{guard}")
            elif isinstance(outer, ast.Match) and isinstance(inner, ast.match_case):
                parts.append(f"match {self.text(outer.subject)}")
        return hashlib.sha256("/".join(parts).encode()).hexdigest()[:16]

    def text(self, n: ast.AST | list[Any]) -> str:
        if isinstance(n, list):
            return ";".join(self.text(x) for x in n)
        text = self._text.get(id(n))
        if text is None:
            masked = _MaskAwaits().visit(copy.deepcopy(n))
            text = self._text[id(n)] = ast.dump(masked, include_attributes=False)
        return text

    def assigned_before(self, e: ast.AST, locals_: set[str]) -> frozenset[str]:
        """The locals every path of the function assigns before ``e`` (definite assignment):
        the parameters, what the statements before it in each statement list around it assign
        on every path through them (both branches of an ``if``, every ``case`` of a ``match``
        that cannot fall through, a ``try`` body and each of its handlers, a ``while True`` left
        by its ``break``s, ...), and what entering each construct around it binds (a ``for``
        target, a ``with``'s ``as`` name, a ``case`` capture, an ``except``'s name)."""
        names = frozenset(arg_names(self.fn.args))
        chain = self._chain(e)
        for inner, outer in reversed(list(zip(chain, chain[1:], strict=False))):
            if isinstance(outer, ast.stmt) and outer is not self.fn:
                names = _entering(outer, inner, names)
            elif isinstance(outer, ast.ExceptHandler) and outer.name:
                names = names | {outer.name}
            elif isinstance(outer, ast.match_case):
                names = names | frozenset(_captures(outer.pattern)) | (
                    _walrus(outer.guard) if outer.guard is not None and inner is not outer.guard else frozenset())
            for body in _bodies(outer):
                if any(inner is x for x in body):
                    done = _must_block(body[:next(i for i, x in enumerate(body) if x is inner)], names)
                    # After a statement that never falls through the await is unreachable.
                    names = done.out if done.out is not None else frozenset(locals_)
                    break
        return frozenset(names & locals_) - self._deleted_elsewhere()

    def _deleted_elsewhere(self) -> frozenset[str]:
        """The names a nested function may delete (``nonlocal x; del x``): unbound whenever it
        is called, whatever assigned them."""
        out: set[str] = set()
        for s in self.fn.body:
            for n in ast.walk(s):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                    for m in ast.walk(n):
                        if isinstance(m, ast.Delete):
                            out.update(t.id for t in m.targets if isinstance(t, ast.Name))
        return frozenset(out)

    def _before(self, e: ast.AST) -> Callable[[ast.AST], bool]:
        """Whether a node may have run when ``e`` is reached: it starts before it, or it is in a
        loop around it (an earlier turn ran it)."""
        loops = [_pos(n) for n in self._chain(e)[1:] if isinstance(n, (ast.While, ast.For, ast.AsyncFor))]
        at = _pos(e)

        def runs_before(s: ast.AST) -> bool:
            p = _pos(s)
            return p[:2] < at[:2] or any(lp[:2] <= p[:2] and p[2:] <= lp[2:] for lp in loops)

        return runs_before

    def captured(self, e: ast.AST, locals_: set[str]) -> frozenset[str]:
        """The locals read (or set, by ``nonlocal``) by the functions and lambdas of the
        workflow that may have been made when ``e`` is reached: such a function may still be
        held somewhere, and reads them from the frame."""
        runs_before = self._before(e)
        out: set[str] = set()
        for s in self.fn.body:
            for n in _walk_own(s):
                if isinstance(n, _NESTED) and runs_before(n):
                    out |= {m.id for m in ast.walk(n) if isinstance(m, ast.Name) and m.id in locals_}
        return frozenset(out)

    def computed(self, e: ast.Await, locals_: set[str]) -> str:
        """The awaited expression of ``e`` and the statements that compute the locals it reads
        (those that mention one of them, transitively, starting before the await or in a loop
        around it), as a digest: where the command is not written out, what it is."""
        runs_before = self._before(e)
        # Each simple statement, each compound one's head, each nested function or class whole.
        units: list[tuple[ast.AST, Any]] = []
        for s in self.fn.body:
            for n in _walk_own(s):
                if isinstance(n, ast.stmt) and runs_before(n):
                    whole = isinstance(n, _NESTED) or not isinstance(n, (*_BLOCKS, ast.Match))
                    units.append((n, n if whole else _head(n)))
        names = {m.id for m in _walk_own(e.value) if isinstance(m, ast.Name) and m.id in locals_}
        used: dict[int, tuple[ast.AST, Any]] = {}
        grew = True
        while grew:
            grew = False
            for n, part in units:
                if id(n) in used:
                    continue
                mentioned = {m.id for x in (part if isinstance(part, list) else [part])
                             for m in ast.walk(x) if isinstance(m, ast.Name)}
                if isinstance(n, _NESTED) and not isinstance(n, ast.Lambda):
                    mentioned.add(n.name)
                if mentioned & names:
                    used[id(n)] = (n, part)
                    names |= mentioned & locals_
                    grew = True
        inputs = sorted(used.values(), key=lambda u: _pos(u[0]))
        text = "\n".join([self.text(e.value), *(self.text(part) for _, part in inputs)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def whiles_around(self, e: ast.AST) -> list[str]:
        """The place (``#2``: the second in source order) among the function's while loops of
        each one whose body holds ``e``, outermost first."""
        if self._whiles is None:
            loops = sorted((n for s in self.fn.body for n in _walk_own(s) if isinstance(n, ast.While)), key=_pos)
            self._whiles = {id(n): i + 1 for i, n in enumerate(loops)}
        chain = self._chain(e)
        return [f"#{self._whiles[id(outer)]}" for inner, outer in reversed(list(zip(chain, chain[1:], strict=False)))
                if isinstance(outer, ast.While) and any(inner is b for b in outer.body) and id(outer) in self._whiles]

    def writes(self, e: ast.AST, live: frozenset[str],
               locals_: Iterable[str] = ()) -> tuple[tuple[str, str, int, int], ...]:
        count: dict[tuple[str, str], list[int]] = {}
        for name, dig, side, _, _, _ in self._writes(e, live, locals_):
            count.setdefault((name, dig), [0, 0])[side] += 1
        return tuple(sorted((n, d, b, a) for (n, d), (b, a) in count.items()))

    def levels(self, e: ast.AST, live: frozenset[str],
               locals_: Iterable[str] = ()) -> tuple[tuple[str, str, str], ...]:
        """Per entry of ``writes`` one of whose statements is in a loop around ``e`` (its body,
        or a ``while`` loop's test, which run again before the await does): how many of those
        loops each of its statements is in, sorted ("0,1")."""
        per: dict[tuple[str, str], list[int]] = {}
        for name, dig, _, level, _, _ in self._writes(e, live, locals_):
            per.setdefault((name, dig), []).append(level)
        return tuple(sorted((n, d, ",".join(map(str, sorted(v)))) for (n, d), v in per.items() if any(v)))

    def makers(self, e: ast.AST, live: frozenset[str],
               locals_: Iterable[str] = ()) -> tuple[tuple[str, str], ...]:
        """Per local live at ``e``, or whose value one may hold (``h = f``, ``hs.append(f)``):
        the statements that make a function (a ``def``, a ``lambda``, a ``class`` with its
        methods) it may hold, and run before ``e`` or in a loop around it; and those that pass
        the function they make on (a decorated ``def``, ``register(lambda: ...)``), which may
        store it anywhere."""
        mine = frozenset(locals_)
        # The locals that may hold what a live one holds: followed back through the statements
        # before it that store a local's value as it is (``h = f``, ``hs.append(f)``, ``g.f = f``;
        # not ``x = f()``, a value computed by it).
        reach = set(live)
        stmts = list(self._writes(e, mine, mine))
        grew = True
        while grew:
            grew = False
            for name, _, side, level, _, reads in stmts:
                if (side == 0 or level) and name in reach and not reads <= reach:
                    reach |= reads
                    grew = True
        return tuple(sorted({(name, dig) for name, dig, side, level, fn, _ in stmts
                             if fn and (name in reach or fn > 1) and (side == 0 or level)}))

    def _loops_around(self, e: ast.AST) -> list[ast.AST]:
        """The loops that run ``e`` again: ``e`` is in the body (or a ``while``'s test)."""
        chain = self._chain(e)
        return [outer for inner, outer in zip(chain, chain[1:], strict=False)
                if isinstance(outer, (ast.For, ast.AsyncFor, ast.While))
                and (any(inner is b for b in outer.body) or (isinstance(outer, ast.While) and inner is outer.test))]

    def _writes(self, e: ast.AST, live: frozenset[str],
                locals_: Iterable[str] = ()) -> Iterable[tuple[str, str, int, int, int, frozenset[str]]]:
        """Per statement that assigns or may change a local live at ``e`` (outside the
        statements ``e`` is in; ``_changed``), or changes any local in place (``a.append(1)``
        where ``a`` is ``items``, live, under another name; ``bump()``, a nested def that
        changes a ``nonlocal``: ``_changed_in_place``), or makes a workflow effect (``send()``,
        ``reducer()``, ...: ``_EFFECTS``): the local or the effect, a digest of it and the
        statement, and whether it is before ``e`` or after it (counted, for a statement written
        twice). A statement changing a local in place, moved across the await, changes what
        that local may share with a live one, on the side where the local is not live itself."""
        mine = frozenset(locals_)
        on_chain = {id(n) for n in self._chain(e)}
        at = _pos(e)
        loops = [id(lp) for lp in self._loops_around(e)]
        for n, text, changed, in_place, nested, effects, fn, reads, p, around in self._statements():
            if id(n) in on_chain:
                continue
            side = 0 if p[2:] <= at[:2] else 1 if p[:2] >= at[2:] else -1
            if side < 0:
                continue
            written = (changed & live) | (in_place & mine) | (nested & live) | effects
            if not written:
                continue
            level = sum(1 for lp in loops if lp in around)
            for name in sorted(written):
                dig = self._digests.get((name, text))
                if dig is None:
                    dig = self._digests[(name, text)] = hashlib.sha256(f"{name}|{text}".encode()).hexdigest()[:8]
                yield name, dig, side, level, fn, reads & mine

    def _statements(self) -> list[tuple[ast.stmt, str, frozenset[str], frozenset[str], frozenset[str],
                                        frozenset[str], int, frozenset[str], tuple[int, int, int, int],
                                        frozenset[int]]]:
        """Per statement of the function (a compound one by its head), once: its text, the names
        it assigns or changes (``_changed``) and changes in place (``_changed_in_place``), the
        name a ``def`` or ``class`` binds, the workflow effects it makes and the commands it
        awaits, whether it makes a function (1) and passes it on (2), the names whose value it
        may store as it is, its place, and the nodes around it."""
        if self._stmts is not None:
            return self._stmts
        # a class made here: an instance of it holds it (``k = K()`` keeps ``K``'s methods)
        classes = {n.name for n in ast.walk(self.fn) if isinstance(n, ast.ClassDef)}
        declared = {name for n in _walk_own(self.fn) if isinstance(n, ast.Global) for name in n.names}
        own = _bound(self.fn) - declared  # the function's own names (a module's, shadowed)
        out = []
        for s in self.fn.body:
            for n in _walk_own(s):
                if not isinstance(n, ast.stmt):
                    continue
                whole = isinstance(n, _NESTED) or not isinstance(n, (*_BLOCKS, ast.Match))
                part = n if whole else _head(n)
                nodes = [m for x in (part if isinstance(part, list) else [part]) for m in _walk_own(x)]
                changed = frozenset(name for m in nodes for name in _changed(m))
                in_place = frozenset(name for m in nodes for name in _changed_in_place(m))
                nested: frozenset[str] = frozenset()
                effects: frozenset[str] = frozenset()
                if isinstance(n, _NESTED):
                    if not isinstance(n, ast.Lambda):
                        nested = frozenset({n.name})
                else:  # the workflow effects it makes (``send()``: never the name of a local)
                    effects = frozenset(
                        {f"{short}()" for m in nodes if isinstance(m, ast.Call)
                         and (short := (_dotted(m.func) or "").rsplit(".", 1)[-1]) in _EFFECTS}
                        # and the commands it awaits (a procedure run, a signal taken, a child
                        # spawned): an await moved across this one is made twice, or never
                        | {f"await {command_of(m.value)}" for m in nodes if isinstance(m, ast.Await)}
                        # and what it does outside the frame: a call of a function of the
                        # module's that makes an effect or changes module data, a change of
                        # module data (``LEDGER.append(x)``, a ``global`` assigned)
                        | {f"{m.func.id}()" for m in nodes if isinstance(m, ast.Call)
                           and isinstance(m.func, ast.Name) and m.func.id in self.module.helpers
                           and m.func.id not in own}
                        | {f"{name}{_MODULE_DATA}" for m in nodes for name in _module_changes(m)
                           if name in self.module.data and name not in own}
                        | {f"{name}{_MODULE_DATA}" for name in changed if name in declared})
                # 1: it makes a function; 2: and passes it on (a decorator, a call's argument)
                fn = 2 if (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                           and n.decorator_list) or any(
                    isinstance(a, ast.Lambda) for m in nodes if isinstance(m, ast.Call)
                    for a in (*m.args, *(k.value for k in m.keywords))) else int(
                    any(isinstance(m, _NESTED) for m in nodes))
                # the locals whose value it may store as it is (not only call: ``makers``)
                called = {id(m.func) for m in nodes if isinstance(m, ast.Call)
                          and not (isinstance(m.func, ast.Name) and m.func.id in classes)}
                reads = frozenset(m.id for m in nodes if isinstance(m, ast.Name)
                                  and isinstance(m.ctx, ast.Load) and id(m) not in called)
                out.append((n, self.text(part), changed, in_place, nested, effects, fn, reads, _pos(n),
                            frozenset(id(x) for x in self._chain(n))))
        self._stmts = out
        return out

    def branch(self, e: ast.AST) -> str:
        """What decides, on the way from the function's start, that the path reaches ``e``:
        each ``if`` it is in (its test and the branch: an ``elif`` is an ``if`` in an ``else``),
        each ``case`` it is in (the match subject, the patterns and guards of that case and of
        the cases before it, which did not match). As a digest, "" where there is none. (A
        ``while`` loop's condition may change; a ``for`` loop's iterable and a ``try``'s clauses
        are the point's structure.)"""
        parts: list[str] = []
        chain = self._chain(e)
        for inner, outer in zip(chain, chain[1:], strict=False):
            if isinstance(outer, ast.If) and inner is not outer.test:
                branch = "then" if any(inner is b for b in outer.body) else "else"
                parts.append(f"if {self.text(outer.test)} {branch}")
            elif isinstance(outer, ast.Match) and isinstance(inner, ast.match_case):
                cases = []
                for c in outer.cases:
                    guard = "" if c.guard is None else f" if {self.text(c.guard)}"
                    if c is inner:
                        # In its guard: the guard is being decided, its pattern matched.
                        in_guard = c.guard is not None and chain[chain.index(inner) - 1] is c.guard
                        cases.append(f"case {self.text(c.pattern)}{'' if in_guard else guard}")
                        break
                    cases.append(f"not case {self.text(c.pattern)}{guard}")
                parts.append(f"match {self.text(outer.subject)}: {' / '.join(cases)}")
        if not parts:
            return ""
        return hashlib.sha256("/".join(reversed(parts)).encode()).hexdigest()[:16]

    def fork(self, e: ast.AST) -> str:
        """What decides, in the await's own statement, that it runs at all: each ``and``/``or``
        it is a later operand of (the operator, its place, the operands before it), each
        conditional expression it is a branch of (the branch and the test), each chained
        comparison it is a later operand of. As a digest, "" where there is none."""
        parts: list[str] = []
        chain = self._chain(e)
        for inner, outer in zip(chain, chain[1:], strict=False):
            if isinstance(outer, ast.stmt):
                break
            if isinstance(outer, ast.BoolOp):
                i = next(k for k, v in enumerate(outer.values) if v is inner)
                if i:
                    parts.append(f"{type(outer.op).__name__} {i} {self.text(outer.values[:i])}")
            elif isinstance(outer, ast.IfExp) and inner is not outer.test:
                parts.append(f"{'then' if inner is outer.body else 'else'} {self.text(outer.test)}")
            elif isinstance(outer, ast.Compare) and inner is not outer.left:
                i = next(k for k, v in enumerate(outer.comparators) if v is inner)
                if i:
                    parts.append(f"compare {i} {self.text([outer.left, *outer.comparators[:i]])} "
                                 f"{[type(o).__name__ for o in outer.ops[:i + 1]]}")
        if not parts:
            return ""
        return hashlib.sha256("/".join(reversed(parts)).encode()).hexdigest()[:16]


def _bodies(n: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists of ``n``."""
    out = []
    for f in ("body", "orelse", "finalbody"):
        b = getattr(n, f, None)
        if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
            out.append(b)
    return out


def _entering(s: ast.stmt, inner: ast.AST, names: frozenset[str]) -> frozenset[str]:
    """What is bound on entering the part ``inner`` of the compound statement ``s`` (its test
    and such evaluated first), beyond ``names``."""
    if isinstance(s, (ast.For, ast.AsyncFor)) and any(inner is x for x in s.body):
        return names | _walrus(s.iter) | _target_names(s.target)
    if isinstance(s, (ast.If, ast.While)) and inner is not s.test:
        return names | _walrus(s.test)
    if isinstance(s, (ast.With, ast.AsyncWith)) and any(inner is x for x in s.body):
        out = set(names)
        for item in s.items:
            out |= _walrus(item.context_expr)
            if item.optional_vars is not None:
                out |= _target_names(item.optional_vars)
        return frozenset(out)
    if isinstance(s, (ast.Try, ast.TryStar)):
        if any(inner is x for x in s.orelse):
            done = _must_block(s.body, names)
            return done.out if done.out is not None else names
        return names  # its body, a handler (below), its finally (maybe after an exception)
    if isinstance(s, ast.Match) and isinstance(inner, ast.match_case):
        return names | _walrus(s.subject)
    return names


class _Ends:
    """Where a block of statements goes: falls through with ``out`` assigned (None: never),
    and the names assigned at each ``break`` of the loop around it."""

    __slots__ = ("breaks", "out")

    def __init__(self, out: frozenset[str] | None, breaks: list[frozenset[str]]) -> None:
        self.out, self.breaks = out, breaks


def _meet(sets: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    """The names assigned on every one of the paths that get there (None: none gets there)."""
    out: frozenset[str] | None = None
    for x in sets:
        if x is not None:
            out = x if out is None else out & x
    return out


def _must_block(stmts: list[ast.stmt], names: frozenset[str]) -> _Ends:
    """Definite assignment over statements (the dual of ``may_be_bound``): which names are
    assigned on every path that falls through ``stmts``, and at each ``break``."""
    breaks: list[frozenset[str]] = []
    cur: frozenset[str] | None = names
    for s in stmts:
        assert cur is not None
        ends = _must_stmt(s, cur)
        breaks += ends.breaks
        cur = ends.out
        if cur is None:
            break
    return _Ends(cur, breaks)


def _must_stmt(s: ast.stmt, cur: frozenset[str]) -> _Ends:
    if isinstance(s, (ast.Return, ast.Raise, ast.Continue)):
        return _Ends(None, [])
    if isinstance(s, ast.Break):
        return _Ends(None, [cur])
    if isinstance(s, ast.Delete):
        gone = {t.id for t in s.targets if isinstance(t, ast.Name)}
        return _Ends((cur | _walrus(s)) - gone, [])
    if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        if isinstance(s, ast.AnnAssign) and s.value is None:
            return _Ends(cur, [])
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        assigned = cur | _walrus(s.value) if s.value is not None else cur
        for t in targets:
            assigned |= _target_names(t)
        return _Ends(assigned, [])
    if isinstance(s, (ast.Import, ast.ImportFrom)):
        return _Ends(cur | {(a.asname or a.name).split(".")[0] for a in s.names}, [])
    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return _Ends(cur | {s.name}, [])
    if isinstance(s, ast.If):
        cur = cur | _walrus(s.test)
        a, b = _must_block(s.body, cur), _must_block(s.orelse, cur)
        return _Ends(_meet([a.out, b.out]), a.breaks + b.breaks)
    if isinstance(s, (ast.For, ast.AsyncFor)):
        cur = cur | _walrus(s.iter)
        body = _must_block(s.body, cur | _target_names(s.target))
        other = _must_block(s.orelse, cur)  # (the loop may not run at all)
        return _Ends(_meet([other.out, *body.breaks]), other.breaks)
    if isinstance(s, ast.While):
        forever = isinstance(s.test, ast.Constant) and bool(s.test.value)
        cur = cur | _walrus(s.test)
        body = _must_block(s.body, cur)
        other = _must_block(s.orelse, cur) if not forever else _Ends(None, [])
        return _Ends(_meet([other.out, *body.breaks]), other.breaks)
    if isinstance(s, (ast.With, ast.AsyncWith)):
        for item in s.items:
            cur = cur | _walrus(item.context_expr)
            if item.optional_vars is not None:
                cur = cur | _target_names(item.optional_vars)
        return _must_block(s.body, cur)
    if isinstance(s, (ast.Try, ast.TryStar)):
        body = _must_block([*s.body, *s.orelse], cur)
        paths = [body]
        for h in s.handlers:
            ends = _must_block(h.body, cur | ({h.name} if h.name else set()))
            if ends.out is not None and h.name:
                ends.out = ends.out - {h.name}  # unbound as the clause ends
            paths.append(ends)
        breaks = [b for p in paths for b in p.breaks]
        out: frozenset[str] | None = _meet(p.out for p in paths)
        if s.finalbody:
            fin = _must_block(s.finalbody, out if out is not None else cur)
            breaks += fin.breaks
            out = fin.out if out is not None else None
        return _Ends(out, breaks)
    if isinstance(s, ast.Match):
        cur = cur | _walrus(s.subject)
        paths = []
        for case in s.cases:
            bound = cur | frozenset(_captures(case.pattern)) | (_walrus(case.guard) if case.guard else frozenset())
            paths.append(_must_block(case.body, bound))
        exhaustive = any(_catches_all(c) for c in s.cases)
        return _Ends(_meet([*(p.out for p in paths), *([] if exhaustive else [cur])]),
                     [b for p in paths for b in p.breaks])
    # An expression, an assert, pass, global: what a walrus in it assigns.
    return _Ends(cur | _walrus(s), [])


def _target_names(t: ast.AST) -> frozenset[str]:
    """The names an assignment target binds (not those of its subscripts or attributes)."""
    if isinstance(t, ast.Name):
        return frozenset((t.id,))
    if isinstance(t, (ast.Tuple, ast.List)):
        return frozenset().union(*map(_target_names, t.elts)) if t.elts else frozenset()
    if isinstance(t, ast.Starred):
        return _target_names(t.value)
    return _walrus(t)


def _walrus(n: ast.AST | None) -> frozenset[str]:
    """The names a walrus in ``n`` assigns whenever ``n`` is evaluated (not one in a later
    operand of ``and``/``or``, a branch of a conditional, a comprehension or a lambda)."""
    if n is None:
        return frozenset()
    out: set[str] = set()
    todo = [n]
    while todo:
        x = todo.pop()
        if isinstance(x, ast.NamedExpr) and isinstance(x.target, ast.Name):
            out.add(x.target.id)
        if isinstance(x, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                          ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and x is not n:
            continue
        if isinstance(x, ast.BoolOp):
            todo.append(x.values[0])
        elif isinstance(x, ast.IfExp):
            todo.append(x.test)
        else:
            todo.extend(ast.iter_child_nodes(x))
    return frozenset(out)


_BLOCKS = (ast.AsyncFunctionDef, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.If,
           ast.Try, ast.TryStar)


def _head(stmt: ast.stmt) -> ast.AST | list[Any]:
    """The part of a statement that holds an await in it, without the bodies it runs."""
    if isinstance(stmt, (ast.If, ast.While)):
        return stmt.test
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.target, stmt.iter]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return list(stmt.items)
    if isinstance(stmt, ast.Match):
        return stmt.subject
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.decorator_list
    return stmt


class _MaskAwaits(ast.NodeTransformer):
    """An await as its command only (``<await timer 'rest'>``), whatever its arguments."""

    def visit_Await(self, node: ast.Await) -> ast.AST:
        return ast.Constant(f"<await {command_of(node.value)}>")


def start_point(params: Iterable[str], compiler: str) -> Point:
    """The point of a continuation that has not run its first step: its parameters are live."""
    ps = frozenset(params)
    return Point("start", 0, (), (), ps, (), 0, compiler, ps)


def may_be_bound(
    node: ast.AsyncFunctionDef, locals_: set[str], sound: bool = False
) -> dict[tuple[int, int, int, int], frozenset[str]]:
    """Per await, the locals that may have a value when it is reached (errs towards more): the
    parameters, the names bound by statements that end before it, and those bound anywhere in
    a loop around it (an earlier turn may have bound them).

    With ``sound``, every way a name can be bound before the await counts too (a def's own name,
    a walrus in a construct's header or earlier in the await's own statement, any name a nested
    function uses, which it may bind through ``nonlocal``): a name not in that set cannot have a
    value there in any run."""
    params = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
    params |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
    sites: list[tuple[str, tuple[int, int], tuple[int, ...]]] = []
    awaits: list[tuple[tuple[int, int, int, int], tuple[int, ...]]] = []

    def names_bound(s: ast.AST) -> set[str]:
        out = set()
        for m in _walk_own(s):
            if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Store):
                out.add(m.id)
            elif isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and (
                sound or m is not s
            ):
                out.add(m.name)
            elif isinstance(m, ast.ExceptHandler) and m.name:
                out.add(m.name)
            elif isinstance(m, (ast.Import, ast.ImportFrom)):
                out |= {(a.asname or a.name).split(".")[0] for a in m.names}
            elif isinstance(m, (ast.MatchAs, ast.MatchStar)) and m.name:
                out.add(m.name)
            elif isinstance(m, ast.MatchMapping) and m.rest:
                out.add(m.rest)
        return out & locals_

    # A simple recursive pass: every statement of the workflow's own scope, with its loops.
    def walk(stmts: list[ast.stmt], loops: tuple[int, ...]) -> None:
        for s in stmts:
            end = (getattr(s, "end_lineno", 0) or 0, getattr(s, "end_col_offset", 0) or 0)
            looping = isinstance(s, (ast.For, ast.AsyncFor, ast.While))
            inner = loops + (id(s),) if looping else loops
            children: list[list[ast.stmt]] = []
            for field_ in ("body", "orelse", "finalbody"):
                children.append(getattr(s, field_, None) or [])
            for h in getattr(s, "handlers", None) or []:
                children.append(h.body)
            for c in getattr(s, "cases", None) or []:
                children.append(c.body)
            if any(children) and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # A compound statement: its header binds (a for target, a with's as, an except
                # name, match captures) for its bodies; its bodies are walked on their own.
                header = set()
                if isinstance(s, (ast.For, ast.AsyncFor)):
                    header |= names_bound(s.target)
                if isinstance(s, (ast.With, ast.AsyncWith)):
                    for item in s.items:
                        if item.optional_vars is not None:
                            header |= names_bound(item.optional_vars)
                for h in getattr(s, "handlers", None) or []:
                    if h.name and h.name in locals_:
                        header.add(h.name)
                for c in getattr(s, "cases", None) or []:
                    header |= names_bound(c.pattern)
                # A walrus in a test, iterable, subject, context expression or guard binds
                # before the bodies run (and before an await later in the same expression).
                for attr in ("test", "iter", "subject") if sound else ():
                    if getattr(s, attr, None) is not None:
                        header |= names_bound(getattr(s, attr))
                for item in getattr(s, "items", None) or [] if sound else []:
                    header |= names_bound(item.context_expr)
                for c in getattr(s, "cases", None) or [] if sound else []:
                    if c.guard is not None:
                        header |= names_bound(c.guard)
                start = (s.lineno, s.col_offset)
                for n in header:
                    sites.append((n, start, inner))
                heads: list[ast.AST] = []
                for attr in ("test", "iter", "subject"):
                    if getattr(s, attr, None) is not None:
                        heads.append(getattr(s, attr))
                for item in getattr(s, "items", None) or []:
                    heads.append(item.context_expr)
                for c in getattr(s, "cases", None) or []:
                    if c.guard is not None:
                        heads.append(c.guard)
                for h in heads:
                    for m in _walk_own(h):
                        if isinstance(m, ast.Await):
                            # A loop's test or iterable runs again at each turn.
                            awaits.append((_pos(m), inner if isinstance(s, ast.While) else loops))
                for body in children:
                    walk(body, inner)
                continue
            bound_here = names_bound(s)
            for n in bound_here:
                sites.append((n, end, inner))
            if sound and any(isinstance(m, ast.Await) for m in _walk_own(s)):
                # A name the statement binds may be bound at an await in it (a walrus before
                # the await in the same expression): errs towards more, as a whole.
                for n in bound_here:
                    sites.append((n, (s.lineno, s.col_offset), inner))
            for m in _walk_own(s):
                if isinstance(m, ast.Await):
                    awaits.append((_pos(m), inner))

    walk(node.body, ())
    # A name a nested function or lambda uses may be bound by it (``nonlocal``) wherever it is
    # called: bound anywhere, as far as this tells.
    captured = set()
    for s in node.body if sound else []:
        for n in _walk_own(s):
            if isinstance(n, _NESTED):
                captured |= {m.id for m in ast.walk(n) if isinstance(m, ast.Name)}
    out = {}
    for pos, loops in awaits:
        here = set(params) | captured
        for name, end, site_loops in sites:
            if end <= (pos[0], pos[1]) or (set(loops) & set(site_loops)):
                here.add(name)
        out[pos] = frozenset(here & (locals_ | params))
    return out


# --------------------------------------------------------------------------------------------
# Liveness: which workflow locals may be read after an await resumes, before being assigned


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclass
class _Ctx:
    brk: frozenset[str] = frozenset()
    cont: frozenset[str] = frozenset()
    ret: frozenset[str] = frozenset()
    exc: frozenset[str] = frozenset()


class Liveness:
    """Backward dataflow over the workflow's own statements (conservative: a name that may be
    read is live; only plain assignments, ``del`` and bindings by ``for``/``with``/``except``/
    ``import``/``def`` kill). Names read by nested functions or lambdas are live everywhere."""

    def __init__(self, locals_: set[str]) -> None:
        self.locals = locals_
        self.always: frozenset[str] = frozenset()
        self.at: dict[tuple[int, int, int, int], frozenset[str]] = {}

    def run(self, node: ast.AsyncFunctionDef) -> dict[tuple[int, int, int, int], frozenset[str]]:
        captured: set[str] = set()
        for s in node.body:
            for n in _walk_own(s):
                if isinstance(n, _NESTED):
                    for m in ast.walk(n):
                        if isinstance(m, ast.Name) and m.id in self.locals:
                            captured.add(m.id)
        self.always = frozenset(captured)
        self.block(node.body, frozenset(), _Ctx())
        return self.at

    # -- helpers

    def uses(self, n: ast.AST | None) -> frozenset[str]:
        if n is None:
            return frozenset()
        out = set()
        for m in _walk_own(n):
            if isinstance(m, ast.Name) and isinstance(m.ctx, (ast.Load, ast.Del)) and m.id in self.locals:
                out.add(m.id)
            elif isinstance(m, ast.AugAssign) and isinstance(m.target, ast.Name):
                if m.target.id in self.locals:
                    out.add(m.target.id)
        return frozenset(out)

    def kills(self, targets: Iterable[ast.AST]) -> frozenset[str]:
        out = set()
        for t in targets:
            for m in _walk_own(t):
                if isinstance(m, ast.Name) and isinstance(m.ctx, (ast.Store, ast.Del)):
                    out.add(m.id)
        return frozenset(out)

    def mark(self, n: ast.AST | None, live: frozenset[str], ctx: _Ctx) -> None:
        """Record ``live`` (plus what an exception thrown in there reaches) at the awaits in ``n``."""
        if n is None:
            return
        for m in _walk_own(n):
            if isinstance(m, ast.Await):
                k = _pos(m)
                self.at[k] = self.at.get(k, frozenset()) | live | ctx.exc | self.always

    # -- statements

    def block(self, stmts: list[ast.stmt], out: frozenset[str], ctx: _Ctx) -> frozenset[str]:
        live = out
        for s in reversed(stmts):
            # Any statement may raise before it completes: what the handler reads is live too.
            live = self.stmt(s, live, ctx) | ctx.exc
        return live

    def stmt(self, s: ast.stmt, out: frozenset[str], ctx: _Ctx) -> frozenset[str]:
        if isinstance(s, ast.If):
            body = self.block(s.body, out, ctx) | self.block(s.orelse, out, ctx)
            live = self.uses(s.test) | body
            self.mark(s.test, live, ctx)
            return live
        if isinstance(s, ast.While):
            return self._while(s, out, ctx)
        if isinstance(s, (ast.For, ast.AsyncFor)):
            return self._for(s, out, ctx)
        if isinstance(s, (ast.Try, ast.TryStar)):
            return self._try(s, out, ctx)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            inner = _Ctx(ctx.brk, ctx.cont, ctx.ret, ctx.exc | out)  # __exit__ may swallow it
            body = self.block(s.body, out, inner)
            targets = [i.optional_vars for i in s.items if i.optional_vars is not None]
            live = (body - self.kills(targets)) | self.uses_all(targets)
            for item in reversed(s.items):
                live = live | self.uses(item.context_expr)
                self.mark(item.context_expr, live, ctx)
            return live
        if isinstance(s, ast.Match):
            # No case matching goes on after the match, unless a case always matches.
            live = frozenset() if any(_catches_all(c) for c in s.cases) else out
            for case in s.cases:
                caps = frozenset(_captures(case.pattern))
                body = self.block(case.body, out, ctx)
                guard = self.uses(case.guard)
                self.mark(case.guard, body | guard, ctx)
                live = live | ((body | guard) - caps) | self.uses(case.pattern)
            live = live | self.uses(s.subject)
            self.mark(s.subject, live, ctx)
            return live
        if isinstance(s, ast.Return):
            live = self.uses(s.value) | ctx.ret
        elif isinstance(s, ast.Raise):
            live = self.uses(s) | ctx.exc
        elif isinstance(s, ast.Break):
            live = ctx.brk
        elif isinstance(s, ast.Continue):
            live = ctx.cont
        elif isinstance(s, ast.Assign):
            live = (out - self.kills(s.targets)) | self.uses(s)
        elif isinstance(s, ast.AnnAssign):
            kill = self.kills([s.target]) if s.value is not None else frozenset()
            live = (out - kill) | self.uses(s.value) | self.uses_target(s.target)
        elif isinstance(s, ast.Delete):
            live = (out - self.kills(s.targets)) | self.uses(s)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            names = {(a.asname or a.name).split(".")[0] for a in s.names}
            live = out - names
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            live = (out - {s.name}) | self.uses(s)
        else:  # Expr, AugAssign, Assert, Pass, Global, Nonlocal, TypeAlias, ...
            live = out | self.uses(s)
        # After an await in the statement: where the statement goes (a return or raise never
        # reaches the statement after it).
        if isinstance(s, ast.Return):
            after = ctx.ret
        elif isinstance(s, ast.Raise):
            after = ctx.exc
        else:
            after = out - _assigned_after(s)
        # At each await: what is live after the statement, and what the statement reads outside
        # the awaited command (its own arguments are read before it suspends, never after).
        for m in _walk_own(s):
            if isinstance(m, ast.Await):
                inside = {id(x) for x in _walk_own(m.value)}
                rest = frozenset(
                    x.id for x in _walk_own(s)
                    if id(x) not in inside and isinstance(x, ast.Name)
                    and isinstance(x.ctx, (ast.Load, ast.Del)) and x.id in self.locals
                ) | (self.uses(s) - self.uses(m.value))
                k = _pos(m)
                self.at[k] = self.at.get(k, frozenset()) | after | rest | ctx.exc | self.always
        return live

    def uses_all(self, nodes: Iterable[ast.AST]) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for n in nodes:
            out = out | self.uses_target(n)
        return out

    def uses_target(self, t: ast.AST) -> frozenset[str]:
        """Names read by an assignment target (``d[k] = ...`` reads d and k)."""
        return self.uses(t)

    def _fixpoint(self, f: Callable[[frozenset[str]], frozenset[str]]) -> frozenset[str]:
        head: frozenset[str] = frozenset()
        for _ in range(50):
            new = f(head)
            if new == head:
                return head
            head = new
        return head  # pragma: no cover  (monotone over a finite set: it converges)

    def _while(self, s: ast.While, out: frozenset[str], ctx: _Ctx) -> frozenset[str]:
        # ``while True``: the loop ends only by a leap (its else never runs).
        forever = isinstance(s.test, ast.Constant) and bool(s.test.value)
        orelse = frozenset() if forever else self.block(s.orelse, out, ctx)

        def head_of(head: frozenset[str]) -> frozenset[str]:
            inner = _Ctx(out, head, ctx.ret, ctx.exc)
            body = self.block(s.body, head, inner)
            live = self.uses(s.test) | body | orelse
            self.mark(s.test, live, ctx)
            return live

        return self._fixpoint(head_of)

    def _for(self, s: ast.For | ast.AsyncFor, out: frozenset[str], ctx: _Ctx) -> frozenset[str]:
        orelse = self.block(s.orelse, out, ctx)
        kill = self.kills([s.target])

        def head_of(head: frozenset[str]) -> frozenset[str]:
            inner = _Ctx(out, head, ctx.ret, ctx.exc)
            body = self.block(s.body, head, inner)
            return (body - kill) | self.uses_target(s.target) | orelse

        head = self._fixpoint(head_of)
        live = head | self.uses(s.iter)
        self.mark(s.iter, live, ctx)
        return live

    def _try(self, s: ast.Try | ast.TryStar, out: frozenset[str], ctx: _Ctx) -> frozenset[str]:
        if s.finalbody:
            # After the finally: wherever a completion that can enter it goes (an exception
            # always can; the others only if the try has a path that ends that way).
            clauses = [s.body, s.orelse, *(h.body for h in s.handlers)]
            leaves = set().union(*(_leaps(c) for c in clauses))
            falls = (_completes(s.body) and _completes(s.orelse)) or any(
                _completes(h.body) for h in s.handlers)
            entering = ctx.exc | (out if falls else frozenset())
            entering |= ctx.brk if ast.Break in leaves else frozenset()
            entering |= ctx.cont if ast.Continue in leaves else frozenset()
            entering |= ctx.ret if ast.Return in leaves else frozenset()
            fin = self.block(s.finalbody, entering, ctx)
            inner = _Ctx(ctx.brk | fin, ctx.cont | fin, ctx.ret | fin, ctx.exc | fin)
            after = fin
        else:
            inner = ctx
            after = out
        # An exception no clause matches goes on, unless a bare ``except:`` takes every one.
        catch_all = any(h.type is None for h in s.handlers)
        handlers: frozenset[str] = frozenset() if catch_all else inner.exc
        for h in s.handlers:
            body = self.block(h.body, after, inner)
            if h.name:
                body = body - {h.name}
            handlers = handlers | body | self.uses(h.type)
        orelse = self.block(s.orelse, after, inner)
        body_ctx = _Ctx(inner.brk, inner.cont, inner.ret, handlers if s.handlers else inner.exc)
        return self.block(s.body, orelse if s.orelse else after, body_ctx)


def _catches_all(case: ast.match_case) -> bool:
    """Whether a match case matches every subject (an unguarded capture or wildcard)."""
    return case.guard is None and _irrefutable(case.pattern)


def _irrefutable(p: ast.pattern) -> bool:
    if isinstance(p, ast.MatchAs):
        return p.pattern is None or _irrefutable(p.pattern)
    if isinstance(p, ast.MatchOr):
        return any(_irrefutable(alt) for alt in p.patterns)
    return False


def _completes(stmts: list[ast.stmt]) -> bool:
    """Whether running ``stmts`` may end at their end, rather than always leave them by a
    ``return``, ``raise``, ``break`` or ``continue`` (errs towards True: a path it cannot rule
    out is a path)."""
    return all(_stmt_completes(s) for s in stmts)


def _stmt_completes(s: ast.stmt) -> bool:
    if isinstance(s, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
        return False
    if isinstance(s, ast.If):
        return _completes(s.body) or _completes(s.orelse)
    if isinstance(s, ast.Match):
        if not any(_catches_all(c) for c in s.cases):
            return True
        return any(_completes(c.body) for c in s.cases)
    if isinstance(s, ast.While):
        if isinstance(s.test, ast.Constant) and bool(s.test.value):
            return ast.Break in _leaps(s.body, loops=False)
        return True
    if isinstance(s, (ast.Try, ast.TryStar)):
        if s.finalbody and not _completes(s.finalbody):
            return False
        body = _completes(s.body) and _completes(s.orelse)
        return body or any(_completes(h.body) for h in s.handlers)
    # A with may swallow the exception that ends its body; loops may run no turn.
    return True


def _leaps(stmts: list[ast.stmt], loops: bool = True) -> set[type]:
    """The kinds of leap (``ast.Return``, ``ast.Break``, ``ast.Continue``) in ``stmts`` that
    leave them: returns anywhere in the workflow's own scope, and breaks and continues outside
    the loops nested in them. With ``loops=False``: only the break/continue of the loop whose
    body ``stmts`` is."""
    out: set[type] = set()

    def visit(body: list[ast.stmt], in_loop: bool) -> None:
        for s in body:
            if isinstance(s, ast.Return):
                out.add(ast.Return)
            elif isinstance(s, (ast.Break, ast.Continue)):
                if not in_loop:
                    out.add(type(s))
            elif isinstance(s, _NESTED):
                continue
            else:
                nested = in_loop or isinstance(s, (ast.For, ast.AsyncFor, ast.While))
                for field_ in ("body", "orelse", "finalbody"):
                    inner = getattr(s, field_, None) or []
                    # A loop's else runs after the loop: its leaps are the enclosing level's.
                    visit(inner, in_loop if field_ == "orelse" else nested)
                for h in getattr(s, "handlers", None) or []:
                    visit(h.body, in_loop)
                for c in getattr(s, "cases", None) or []:
                    visit(c.body, in_loop)

    visit(stmts, False)
    if not loops:
        out.discard(ast.Return)
    return out


def _assigned_after(s: ast.stmt) -> frozenset[str]:
    """Names a simple statement assigns after its value is computed (after any await in it)."""
    if isinstance(s, ast.Assign):
        targets: list[ast.AST] = list(s.targets)
    elif isinstance(s, ast.AnnAssign) and s.value is not None:
        targets = [s.target]
    else:
        return frozenset()
    return frozenset(
        m.id for t in targets for m in _walk_own(t)
        if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Store)
    )


def _captures(p: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(p):
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            out.append(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.append(n.rest)
    return out


# The workflow's effects that a step makes without awaiting (SPEC §3, §12): made twice, or never,
# by an instance moved across an await a statement making one moved across.
_EFFECTS = frozenset({"send", "broadcast", "reducer", "publish", "reply", "subscribe", "unsubscribe"})


def _is_effect(name: str) -> bool:
    """An entry of ``Point.writes`` for an effect (``send()``, ``await procedure visit``,
    ``notify()`` a function of the module's making one, ``LEDGER (module data)``), not a
    local."""
    return name.endswith(("()", _MODULE_DATA)) or name.startswith("await ")


_MODULE_DATA = " (module data)"
# Methods that only read what they are called on: a call of one changes no module data.
_READS = frozenset({
    "get", "keys", "values", "items", "copy", "count", "index", "format", "join", "split", "rsplit",
    "strip", "lstrip", "rstrip", "lower", "upper", "startswith", "endswith", "find", "rfind",
    "replace", "encode", "decode", "isdigit", "isalpha", "most_common", "total", "issubset",
    "issuperset", "union", "intersection", "difference", "symmetric_difference", "isdisjoint",
    "is_set", "qsize", "hex", "bit_length", "as_integer_ratio", "is_integer", "casefold", "title",
    # a logger's: a line written, no state of the workflow's or its module's
    "debug", "info", "warning", "warn", "error", "exception", "critical", "log", "msg",
})


def _module_changes(m: ast.AST) -> Iterable[str]:
    """The names node ``m`` may change in place, which may be module data: the root of an item or
    attribute stored or deleted, of a method called that is not one that only reads
    (``LEDGER.append(x)``, ``BANK.deposit(5)``), and a name an augmented assignment is made to."""
    if isinstance(m, ast.AugAssign):
        if (r := _root(m.target)) is not None:
            yield r
    elif isinstance(m, (ast.Attribute, ast.Subscript)):
        if isinstance(m.ctx, (ast.Store, ast.Del)) and (r := _root(m.value)) is not None:
            yield r
    elif isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and m.func.attr not in _READS:
        if (r := _root(m.func.value)) is not None:
            yield r


def _bound(fn: ast.AST) -> set[str]:
    """The names a function binds itself: its parameters and every name it stores or deletes
    (nested functions' own excluded)."""
    names: set[str] = set()
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = fn.args
        names.update(x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs))
        names.update(x.arg for x in (a.vararg, a.kwarg) if x is not None)
    for n in _walk_own(fn):
        if n is fn:
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, _NESTED) and not isinstance(n, ast.Lambda):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
    return names


@dataclass(frozen=True)
class ModuleEffects:
    """What a workflow's module holds that a statement may act on outside the workflow's frame:
    ``helpers``, the names of its functions (and of functions imported into it) a call to which
    may make a workflow effect or change module data; ``data``, the names its top level assigns
    (its data: lists, dicts, objects; not its functions, classes or imports)."""

    helpers: frozenset[str]
    data: frozenset[str]


_MODULES: dict[tuple[str, int], ModuleEffects] = {}


def module_effects(lines: list[str], filename: str, globals_: dict[str, Any] | None = None) -> ModuleEffects:
    """``ModuleEffects`` of the module whose source is ``lines`` (its globals, ``globals_``,
    resolve functions imported into it). Computed once per module source."""
    key = (filename, hash(tuple(lines)))
    got = _MODULES.get(key)
    if got is not None:
        return got
    if len(_MODULES) >= 4096:
        _MODULES.clear()
    _MODULES[key] = ModuleEffects(frozenset(), frozenset())  # (a module importing itself)
    try:
        tree = parse("".join(lines))
    except (SyntaxError, ValueError):
        return _MODULES[key]
    data: set[str] = set()
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for n in tree.body:
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                data.update(x.id for x in ast.walk(t) if isinstance(x, ast.Name))
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs[n.name] = n
    calls: dict[str, set[str]] = {}
    helpers: set[str] = set()
    for name, d in defs.items():
        declared = {g for n in _walk_own(d) if isinstance(n, ast.Global) for g in n.names}
        own = _bound(d) - declared
        nodes = [m for m in _walk_own(d) if m is not d]
        if declared or any(
            isinstance(m, ast.Call) and (_dotted(m.func) or "").rsplit(".", 1)[-1] in _EFFECTS for m in nodes
        ) or any(r in data and r not in own for m in nodes for r in _module_changes(m)):
            helpers.add(name)
        calls[name] = {m.func.id for m in nodes if isinstance(m, ast.Call) and isinstance(m.func, ast.Name)
                       and m.func.id not in own}
    # Functions imported into the module: one of another module that makes an effect or changes
    # its module's data (by the same reading of its own module).
    imported: set[str] = set()
    for names in calls.values():
        imported |= {c for c in names if c not in defs}
    if globals_ is not None:
        for c in sorted(imported):
            f = globals_.get(c)
            code = getattr(f, "__code__", None)
            if code is None or getattr(f, "__module__", None) == globals_.get("__name__"):
                continue
            other = getattr(f, "__globals__", None)
            module = sys.modules.get(other.get("__name__", "")) if isinstance(other, dict) else None
            if module is None or not isinstance(other, dict) or not user_module(module):
                continue  # (the standard library's, a package's, this project's)
            src = linecache.getlines(code.co_filename, other)
            if src and getattr(f, "__name__", None) in module_effects(src, code.co_filename, other).helpers:
                helpers.add(c)
    grew = True
    while grew:  # a function calling one that makes an effect makes it too
        grew = False
        for name, called in calls.items():
            if name not in helpers and called & helpers:
                helpers.add(name)
                grew = True
    if globals_ is not None:  # objects the module imported (``from game.state import LEDGER``)
        data.update(k for k, v in globals_.items() if not k.startswith("__") and not isinstance(v, _NOT_DATA))
    got = _MODULES[key] = ModuleEffects(frozenset(helpers), frozenset(data))
    return got


# What a module's global holds that is not data that a statement may change: modules, classes,
# functions and the like (a statement calling one is judged by the call).
_NOT_DATA = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
             int, float, str, bytes, bool, type(None), frozenset, tuple)


def _root(e: ast.AST) -> str | None:
    """The local at the root of ``x``, ``x.a``, ``x[k]``, ``x.a[k].b`` (None: not a name)."""
    while isinstance(e, (ast.Attribute, ast.Subscript, ast.Starred)):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


def _changed(m: ast.AST) -> Iterable[str]:
    """The locals node ``m`` assigns or may change in place: a name stored or deleted, and
    what ``_changed_in_place`` yields."""
    if isinstance(m, ast.Name):
        if isinstance(m.ctx, (ast.Store, ast.Del)):
            yield m.id
    else:
        yield from _changed_in_place(m)


def _changed_in_place(m: ast.AST) -> Iterable[str]:
    """The locals node ``m`` may change in place, not by binding the name: the root of an item
    or attribute stored or deleted (``d["n"] += 1``, ``g.name = ...``, ``del xs[0]``); the root
    of a method called (``xs.append(1)``, ``d["k"].pop()``); a local passed to a call
    (``random.shuffle(xs)``), which may change it; and a local called (``bump()``, a nested def
    that changes a ``nonlocal``; ``add(1)``, where ``add = items.append``), which may change
    what it reaches; and a local an augmented assignment is made to (``a += [1]`` extends the
    list ``a`` holds, which another local may hold too)."""
    if isinstance(m, ast.AugAssign):
        if isinstance(m.target, ast.Name):
            yield m.target.id
    elif isinstance(m, (ast.Attribute, ast.Subscript)):
        if isinstance(m.ctx, (ast.Store, ast.Del)) and (r := _root(m.value)) is not None:
            yield r
    elif isinstance(m, ast.Call):
        if isinstance(m.func, ast.Attribute) and (r := _root(m.func.value)) is not None:
            yield r
        elif (r := _root(m.func)) is not None:
            yield r
        for a in (*m.args, *(k.value for k in m.keywords)):
            if (r := _root(a)) is not None:
                yield r


def _walk_own(n: ast.AST) -> Iterable[ast.AST]:
    """``ast.walk`` that yields nested function/lambda/class nodes but not their bodies."""
    stack = [n]
    while stack:
        m = stack.pop()
        yield m
        if isinstance(m, _NESTED) and m is not n:
            continue
        stack.extend(ast.iter_child_nodes(m))


# --------------------------------------------------------------------------------------------
# Run time: can a stored frame move onto the new code, and how


@dataclass
class FramePlan:
    """How one frame of a stored continuation moves onto the loaded code (or why it cannot)."""

    key: str
    stored: str  # fingerprint of the code that made the frame
    loaded: str  # fingerprint of the code loaded now
    old: Point | None
    new: Point | None = None
    how: str = "unchanged"  # "unchanged", "automatic", "explicit", or "held"
    reasons: list[str] = field(default_factory=list)
    renames: dict[str, str | None] = field(default_factory=dict)  # old slot -> new (None: drop)
    values: dict[str, Any] | None = None  # explicit: the new locals
    label: int = 0  # the new resume label

    def summary(self) -> str:
        if self.how == "unchanged":
            return f"{self.key}: unchanged"
        at = self.old.where() if self.old is not None else "its suspension point"
        if self.how == "held":
            return f"{self.key} at {at}: " + "; ".join(self.reasons)
        to = f" -> {self.new.where()}" if self.new is not None and self.old is not None and (
            self.new.ident != self.old.ident) else ""
        return f"{self.key} at {at}{to}: {self.how}"


class Upgrade:
    """The outcome of moving (or trying to move) a stored continuation onto the loaded code."""

    def __init__(self, workflow_type: str, frames: list[FramePlan]) -> None:
        self.workflow_type = workflow_type
        self.frames = frames

    @property
    def needed(self) -> bool:
        """Whether some frame's code changed."""
        return any(f.how != "unchanged" for f in self.frames)

    @property
    def possible(self) -> bool:
        """Whether every changed frame can move."""
        return all(f.how != "held" for f in self.frames)

    @property
    def stored(self) -> str:
        return self.frames[0].stored if self.frames else ""

    @property
    def loaded(self) -> str:
        return self.frames[0].loaded if self.frames else ""

    def reasons(self) -> list[str]:
        return [f.summary() for f in self.frames if f.how == "held"]

    def detail(self) -> dict[str, Any]:
        """The history/log detail of an upgrade."""
        return {
            "old_fingerprint": self.stored,
            "new_fingerprint": self.loaded,
            "frames": [
                {
                    "key": f.key,
                    "how": f.how,
                    "old_fingerprint": f.stored,
                    "new_fingerprint": f.loaded,
                    "point": f.old.ident if f.old else None,
                    "new_point": f.new.ident if f.new else None,
                    "dropped": sorted(k[len(LOCAL):] for k, v in f.renames.items()
                                      if v is None and k.startswith(LOCAL)),
                }
                for f in self.frames
            ],
        }


class PointTable:
    """The points of one compiled workflow, by resume label and by identity."""

    def __init__(
        self,
        points: dict[int, Point],
        start: Point,
        local_names: set[str],
        describe_slot: Callable[[str], str],
    ) -> None:
        self.by_label = points
        self.start = start
        self.point_by_ident = {p.ident: p for p in points.values()}
        self.point_by_ident.setdefault(start.ident, start)
        self.label_of_point = {p.ident: lbl for lbl, p in points.items()}
        self.label_of_point[start.ident] = 0
        self.local_names = frozenset(local_names)
        self.describe_slot = describe_slot
        self._records: dict[int, dict[str, Any]] = {}

    def record(self, pc: int | None, started: bool) -> dict[str, Any] | None:
        """The stored record of the point a frame at ``pc`` is suspended at."""
        if not started:
            pc = 0
        if pc is None:
            return None
        r = self._records.get(pc)
        if r is None:
            p = self.start if pc == 0 else self.by_label.get(pc)
            if p is None:
                return None
            r = self._records[pc] = p.record()
        return r


def plan_frame(
    fp: FramePlan,
    d: dict[str, Any],
    code: PointTable,
    upgrader: Callable[[str, dict[str, Any]], Any] | None,
) -> None:
    """Fill ``fp`` for the frame dict ``d`` (old layout) against the loaded ``code``."""
    old = fp.old
    if old is None:
        fp.how = "held"
        fp.reasons.append(
            "its checkpoint records no readable suspension point for this frame, so it cannot "
            "be moved"
        )
        return
    if upgrader is not None:
        try:
            answer = upgrader(old.ident, {k[len(LOCAL):]: v for k, v in d.items() if k.startswith(LOCAL)})
        except Exception as e:
            fp.how = "held"
            tb = "".join(traceback.format_exception_only(type(e), e)).strip()
            fp.reasons.append(f"its upgrade function raised {tb}")
            return
        if answer is not None:
            _plan_explicit(fp, d, code, answer)
            return
    _plan_automatic(fp, d, code)


def _sides(writes: tuple[tuple[str, str, int, int], ...]) -> dict[str, tuple[int, int]]:
    """Per local: how many statements assigning it are before the await, and after it."""
    out: dict[str, tuple[int, int]] = {}
    for name, _, before, after in writes:
        b, a = out.get(name, (0, 0))
        out[name] = (b + before, a + after)
    return out


def _levels(p: Point) -> dict[tuple[str, str], str]:
    """Per entry of ``p.writes``: the loops around the await its statements are in (``levels``)."""
    out = {(n, d): ",".join(["0"] * (b + a)) for n, d, b, a in p.writes}
    out.update({(n, d): v for n, d, v in p.levels or ()})
    return out


def _plan_automatic(fp: FramePlan, d: dict[str, Any], code: PointTable) -> None:
    old = fp.old
    assert old is not None
    new = code.point_by_ident.get(old.ident)
    if new is None:
        same = sorted(p.ident for p in code.point_by_ident.values()
                      if p.ident.rsplit(" #", 1)[0] == old.ident.rsplit(" #", 1)[0])
        hint = f" (it has: {'; '.join(same)})" if same else ""
        fp.how = "held"
        fp.reasons.append(f"the new code has no await {old.ident}{hint}")
        return
    fp.new = new
    reasons = fp.reasons
    if old.pre and new.pre and old.pre != new.pre and not (old.solo and new.solo):
        cmd = old.ident.rsplit(" #", 1)[0]
        reasons.append(
            f"the awaits {cmd} up to it changed (one was added, removed or moved before it, or the "
            f"code around one of them, an if or a case, changed), so the new code's {new.ident} "
            "may be another await than this one"
        )
    if old.fork != new.fork:
        reasons.append(
            "the and/or or conditional expression that decides whether it runs changed (it is "
            "a later operand or a branch of it, decided before it): this instance may be on a "
            "path the new code does not take there"
        )
    if old.branch != new.branch:
        reasons.append(
            "the if tests, elif chain, or case patterns and guards on the path to it changed (the "
            "decisions that led this instance there): it may be on a path the new code does not "
            "take there"
        )
    crossing = sorted({n for n, d, b, a in old.writes for m, d2, b2, a2 in new.writes
                       if d == d2 and ((b2 > b and a2 < a) or (b2 < b and a2 > a))})
    moved = [n for n in crossing if not _is_effect(n)]
    # Named: the locals live on both sides, if any; else the one it changes in place (``a``
    # in ``a.append(1)``, where ``a`` is ``items`` and only one side reads it after the await).
    both = old.live & new.live if old.live is not None and new.live is not None else frozenset()
    moved = [n for n in moved if n in both] or moved
    effects = [n for n in crossing if _is_effect(n)]
    if moved:
        reasons.append(
            f"a statement assigning or changing {', '.join(moved)} (live there) moved across it (from after "
            "it to before it, or back): this instance's value does not mean what the new code's "
            "does there"
        )
    if effects:
        reasons.append(
            f"a statement making {', '.join(effects)} moved across it (from after it to before "
            "it, or back): this instance would make that effect a second time, or never"
            + (" (for an await: a procedure run, a signal taken, a child spawned)"
               if any(n.startswith("await ") for n in effects) else "")
        )
    # Moved into or out of a loop around the await, on the same side of it (hoisted above the
    # loop, or sunk into it): it ran once per lap in one code and once in the other.
    if old.levels is not None and new.levels is not None:
        lv_old, lv_new = _levels(old), _levels(new)
        looped = sorted({n for n, d, b, a in old.writes for m, d2, b2, a2 in new.writes
                         if n == m and d == d2 and not _is_effect(n) and n not in crossing
                         and b + a == b2 + a2 and lv_old[(n, d)] != lv_new[(m, d2)]})
        looped = [n for n in looped if n in both] or looped
        if looped:
            reasons.append(
                f"a statement assigning or changing {', '.join(looped)} (live there) moved into or "
                "out of a loop around it: it ran once per lap in one code and once in the other, so "
                "this instance's value does not mean what the new code's does there"
            )
    # Moved and edited in the same change, its text differs: what shows is, for one local, a
    # statement assigning it gone from one side of the await and one added on the other.
    sides, now = _sides(old.writes), _sides(new.writes)
    crossed = sorted(n for n, (b, a) in sides.items() if n not in crossing and not _is_effect(n) and n in now
                     and ((now[n][0] < b and now[n][1] > a) or (now[n][0] > b and now[n][1] < a)))
    if crossed:
        reasons.append(
            f"a statement assigning or changing {', '.join(crossed)} (live there) left one side of it and "
            "one was added on the other (moved across it and edited, say): this instance's value "
            "may not mean what the new code's does there, or the assignment may run twice"
        )
    if old.computed != new.computed:
        reasons.append(
            "the command it awaits is not written out (an awaited variable, a name or a list "
            "of commands computed from locals), and its expression or the code before it that "
            "computes what it reads changed: the new code may await another command there"
        )
    if old.path != new.path:
        if [k for k, _ in old.path] == [k for k, _ in new.path] and all(
                a == b for a, b in zip(old.path, new.path, strict=True) if a[0] != "while"):
            reasons.append(
                "it is in another while loop: "
                + ", ".join(f"the {_nth(a[1])} while loop of the function in the old code, the "
                            f"{_nth(b[1])} in the new" for a, b in zip(old.path, new.path, strict=True) if a != b)
            )
        else:
            reasons.append(
                f"the constructs around it changed: {old.structure()} in the old code, "
                f"{new.structure()} in the new"
            )
    if new.live is None or old.live is None:
        reasons.append("which locals are live there is not known")
    else:
        # A name the new code may read there but cannot have assigned by then (it is assigned
        # only later) is read unbound on that path whatever the frame holds: it needs no value.
        missing = sorted(new.live - new.unset - old.live)
        if missing:
            gone = sorted(old.live - new.live)
            was = f" (live in the old code: {', '.join(gone)})" if gone else ""
            reasons.append(
                f"local{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                f"{'are' if len(missing) > 1 else 'is'} live there in the new code but "
                f"{'were' if len(missing) > 1 else 'was'} not in the old{was}"
            )
        else:
            # The analysis errs towards live: a name the old code only may read (in a handler,
            # or in a lambda) may never have been assigned in this instance, where the new code
            # would have assigned it before the await. The frame tells. (A name both codes may
            # have assigned there and this run did not is this run's, not the edit's.)
            maybe = new.bound if new.bound is not None else new.live
            before = old.bound if old.bound is not None else frozenset()
            # (every run of the new code has assigned ``new.must`` there: one this instance has
            # no value for would be read unbound, which the new code never does)
            unbound = sorted(n for n in (new.live & maybe) - (before - new.must) if LOCAL + n not in d)
            if unbound:
                reasons.append(
                    f"local{'s' if len(unbound) > 1 else ''} {', '.join(unbound)} "
                    f"{'are' if len(unbound) > 1 else 'is'} live there in the new code but "
                    f"{'have' if len(unbound) > 1 else 'has'} no value in this instance (the old "
                    "code had not assigned it)"
                )
    if reasons:
        fp.how = "held"
        return
    _map_slots(fp, d, code, old, new, keep_locals=True)
    # ... and a value the old frame has for it is dropped: the new code reads it unbound.
    for n in new.unset:
        if LOCAL + n in d:
            fp.renames[LOCAL + n] = None
    # A function the old code made reads its locals from the frame: one it reads cannot go.
    read = sorted(n for n in old.captured if fp.renames.get(LOCAL + n, "") is None)
    if read:
        fp.reasons.append(
            f"local{'s' if len(read) > 1 else ''} {', '.join(read)} "
            f"{'are' if len(read) > 1 else 'is'} read by a function the old code made (a lambda or "
            "a nested def, which keeps the old code's body and may still be held), and the new code "
            f"does not keep {'them' if len(read) > 1 else 'it'} there"
        )
    # A function the old code made before the await (a def, a lambda), held in a live local,
    # whose statement changed: the instance keeps the old body, the new code calls the new one.
    if old.makers is not None and new.makers is not None and old.live is not None and new.live is not None:
        made = sorted({n for n, _ in {*old.makers} ^ {*new.makers}})
        if made:
            fp.reasons.append(
                f"local{'s' if len(made) > 1 else ''} {', '.join(made)} may hold a function (a def "
                "or a lambda) made before it whose code changed: this instance keeps the function "
                "the old code made, with the old body, where the new code has its own"
            )
    fp.how = "held" if fp.reasons else "automatic"
    fp.label = code.label_of_point[new.ident]


def _plan_explicit(fp: FramePlan, d: dict[str, Any], code: PointTable, answer: Any) -> None:
    old = fp.old
    assert old is not None
    fp.how = "held"
    if (not isinstance(answer, tuple) or len(answer) != 2 or not isinstance(answer[0], str)
            or not isinstance(answer[1], dict)):
        fp.reasons.append(
            f"its upgrade function returned {answer!r}; it must return (point, locals): the "
            "new point's identity (a str) and a dict of the locals there, or None"
        )
        return
    ident, values = answer
    new = code.point_by_ident.get(ident)
    if new is None:
        known = ", ".join(repr(p) for p in sorted(code.point_by_ident))
        fp.reasons.append(f"its upgrade function chose point {ident!r}, which the new code does not have "
                          f"(its points: {known})")
        return
    fp.new = new
    waits, chosen = old.ident.rsplit(" #", 1)[0], new.ident.rsplit(" #", 1)[0]
    if waits != chosen:
        # What the instance waits for (a timer armed, a procedure called, a select's arms) is
        # stored with it and stays: only an await of the same command can take it.
        fp.reasons.append(
            f"its upgrade function chose point {ident!r}, which awaits {chosen}, but this instance "
            f"waits at {old.where()}, for {waits}: choose an await of the same command"
        )
        return
    bad = sorted(n for n in values if not isinstance(n, str) or n not in code.local_names)
    if bad:
        fp.reasons.append(f"its upgrade function returned names that are not locals of the new "
                          f"code: {', '.join(map(str, bad))}")
    if new.live is not None:
        missing = sorted(new.live - new.unset - set(values))
        if missing:
            fp.reasons.append(f"its upgrade function gave no value for {', '.join(missing)}, "
                              f"live at {new.where()}")
    if old.path != new.path and any(k in _STATEFUL for k, _ in new.path):
        fp.reasons.append(
            f"the new point is inside {new.structure()}, whose state an upgrade function cannot "
            f"give (the old point was inside {old.structure()})"
        )
    if fp.reasons:
        return
    same_place = old.path == new.path and old.ident == new.ident
    # The function gave the locals; the old code's own state around a point the new code has
    # no counterpart for (a loop's iterator, say) goes with it.
    _map_slots(fp, d, code, old, new, keep_locals=False, temps_ok=same_place, drop_unmapped=True)
    if fp.reasons:
        return
    fp.values = dict(values)
    fp.how = "explicit"
    fp.label = code.label_of_point[new.ident]


def _map_slots(
    fp: FramePlan, d: dict[str, Any], code: PointTable, old: Point, new: Point, *, keep_locals: bool,
    temps_ok: bool = True, drop_unmapped: bool = False,
) -> None:
    """The renaming of the old frame's attributes into the new code's (``fp.renames``)."""
    by_uid = dict(zip(old.uids, new.uids, strict=True)) if old.path == new.path else {}
    # Another compiler may name or use its own slots otherwise: only plain frames cross over.
    cross = old.compiler != new.compiler and not drop_unmapped
    for k, v in d.items():
        if k == "_af_pc":
            continue
        if k == "_af_sent":
            fp.renames[k] = k  # replaced by the awaited result when it resumes
            continue
        if k.startswith(LOCAL):
            keep = keep_locals and k[len(LOCAL):] in code.local_names
            fp.renames[k] = k if keep else None
            continue
        m = _CONSTRUCT_SLOT.match(k)
        if m is not None and cross and v is not None:
            fp.reasons.append(
                f"{code.describe_slot(k)} is state of the compiler that made it ({old.compiler}), "
                f"which is not carried over to another ({new.compiler})"
            )
            continue
        if m is not None:
            uid = int(m.group(2))
            if uid in by_uid:
                fp.renames[k] = f"{m.group(1)}{by_uid[uid]}{m.group(3) or ''}"
                if m.group(1) == "_af_fin" and v is not None and not (
                        isinstance(v, tuple) and v and v[0] == "exc"):
                    fp.reasons.append(
                        f"it is inside a finally block run by a {_completion(v)}, whose "
                        "destination in the old code cannot be carried over"
                    )
                continue
            # A construct not around the point: its slots are written when it is entered again,
            # before they are read (a with block's flag, say, stays set after it ends).
            fp.renames[k] = None
            continue
        t = _TEMP_SLOT.match(k)
        if t is not None:
            uid = int(t.group(1))
            owner = _owner_of(old, uid)
            if owner is None:
                fp.renames[k] = None  # left by a statement that is not running (it raised)
                continue
            i, (dig, u0) = owner
            # The same statement in the new code: as many statements in from the await.
            j = len(new.owners) - (len(old.owners) - i)
            if temps_ok and old.compiler == new.compiler and j >= 0 and new.owners[j][0] == dig:
                fp.renames[k] = f"_af_t{uid - u0 + new.owners[j][1]}"
            elif drop_unmapped and not temps_ok:
                fp.renames[k] = None
            else:
                fp.reasons.append(
                    f"the statement at line {old.line} is half evaluated across the await (a value "
                    "computed before it is kept for after it), and that statement changed"
                )
                return
            continue
        if v is None:
            fp.renames[k] = None
            continue
        fp.reasons.append(f"internal state {k!r} of the old code cannot be mapped")
    if new.held - set(fp.renames.values()) and not fp.reasons:
        fp.reasons.append(
            f"the statement at line {new.line} of the new code is half evaluated across the await "
            "(a value computed before it is kept for after it), which the old code did not keep"
        )


def _nth(place: str) -> str:
    """``#2`` as ``2nd``."""
    n = int(place.lstrip("#") or 0)
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _owner_of(p: Point, uid: int) -> tuple[int, tuple[str, int]] | None:
    """Which statement around point ``p`` a temporary of uid ``uid`` belongs to (its index in
    ``p.owners``), or None if no statement being evaluated there made it."""
    if not p.owners or uid <= p.owners[0][1] or uid > p.uid_at:
        return None
    i = max(j for j, (_, u0) in enumerate(p.owners) if u0 < uid)
    return i, p.owners[i]


def _completion(v: Any) -> str:
    if isinstance(v, tuple) and v:
        return {"ret": "return", "jump": "break or continue"}.get(str(v[0]), str(v[0]))
    return "pending completion"


def apply_frame(fp: FramePlan, f: Any, code: Any) -> None:
    """Rewrite frame ``f`` (restored with ``code``) as ``fp`` says. Cannot fail."""
    if fp.how == "unchanged":
        return
    old = dict(f.__dict__)
    d = f.__dict__
    d.clear()
    for k, v in old.items():
        nk = fp.renames.get(k, k if k == "_af_pc" else None)
        if nk is not None:
            d[nk] = v
    if fp.values is not None:
        for n, v in fp.values.items():
            d[LOCAL + n] = v
    d["_af_pc"] = fp.label
    f._af_code = code


__all__ = ["POINT_FORMAT", "FramePlan", "Point", "PointTable", "Upgrade", "apply_frame", "describe_points",
           "plan_frame", "start_point"]
