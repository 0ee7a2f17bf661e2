"""Lowering: explode the statements that contain ``await`` into blocks.

Statements without ``await`` stay verbatim (names rewritten by ``_scope.Rewriter``). Each block
becomes a function ``(_af_f, _af_rt)`` returning the next block id, ``Suspend``, ``Done`` or
``Reraise``. Every block lies in exactly one exception region; the region gives the static handler
entry (a ``Region``: target, slot, kind, clears) the driver uses when the block raises.

While lowering, the constructs a ``break``, ``continue`` or ``return`` may leave are kept on a
control stack (``Emitter.leaps``) of typed entries, as regenerator keeps its ``LoopEntry`` and
``TryEntry`` and CPython its fblock types: a loop (``LoopEntry``), a ``finally`` to run on the way
out (``FinallyEntry``), slots to clear on the way out (``ClearEntry``). A leap's route through them
is emitted into the generated code as a tuple of constants, each step ``(Exit, name[, label])``.
"""

from __future__ import annotations

import ast
import copy
import sys
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from ._scope import (
    COMPS,
    FRAME,
    SYNTH,
    Bindings,
    Rewriter,
    annotated_target_parts,
    arg_names,
    fill_locations,
    frame_attr,
    frame_name,
    lkey,
    pattern_captures,
    rewrite_pattern,
    rt_attr,
    rt_call,
    target_names,
)

if TYPE_CHECKING:
    from ._upgrade import Shape


class Handler(IntEnum):
    """What a region's handler receives in its slot when a block of the region raises."""

    EXCEPT = 0  # the exception itself: an ``except`` dispatcher tests it
    FINALLY = 1  # the completion ``("exc", exception)``: a ``finally`` runs, then re-raises it


class Exit(IntEnum):
    """One step of leaving a region: what to undo of the construct being left.

    The generated code and the block tables hold the value (an int); the driver's ``route``
    and its exception path read it.
    """

    RESET = 0  # set a slot to None (a for-loop's iterator, the exception a handler handles)
    UNBIND = 1  # remove a frame local (``except ... as name``, a comprehension's variables)
    RUN_FINALLY = 2  # run the finally at a label, the completion stored in a slot (leaps only)
    UNBIND_GLOBAL = 3  # remove a module global (``except ... as name`` of a name declared global)


class Clear(NamedTuple):
    """A slot a region clears when it is left (by an exception, or by a leap through it)."""

    op: Exit  # RESET, UNBIND or UNBIND_GLOBAL
    name: str

    def emit(self) -> tuple[int, str]:
        """The step as the generated code holds it (a tuple of plain constants)."""
        return (int(self.op), self.name)


class RunFinally(NamedTuple):
    """A ``finally`` a leap runs on its way out: the completion goes in ``slot``."""

    slot: str
    label: int

    def emit(self) -> tuple[int, str, int]:
        return (int(Exit.RUN_FINALLY), self.slot, self.label)


class Region(NamedTuple):
    """The handler of the blocks of one exception region, and what leaving it clears."""

    target: int | None  # the handler's block (None: the exception leaves the frame)
    slot: str | None  # where the handler finds the exception (or the completion)
    kind: Handler
    clears: tuple[Clear, ...]

    def clearing(self, clears: tuple[Clear, ...]) -> Region:
        """The same handler, with ``clears`` undone first when a block of it raises."""
        return self._replace(clears=clears + self.clears)


ROOT = Region(None, None, Handler.EXCEPT, ())
# The handlers a block runs inside, innermost first: the slot of each and its kind (which
# exception the block sees as being handled).
Handling = tuple[tuple[str, Handler], ...]


@dataclass(frozen=True)
class LoopEntry:
    """A loop on the control stack: where ``break`` and ``continue`` go."""

    brk: int
    cont: int


@dataclass(frozen=True)
class FinallyEntry:
    """A ``finally`` on the control stack: a leap out of its try runs it first."""

    slot: str  # the try's completion slot
    label: int  # the finally's first block


@dataclass(frozen=True)
class ClearEntry:
    """A construct on the control stack whose slots a leap out of it clears (an except
    clause's exception and name, a finally's completion)."""

    clears: tuple[Clear, ...]


ControlEntry = LoopEntry | FinallyEntry | ClearEntry


def has_await(node: ast.AST) -> bool:
    """Whether ``node`` contains an ``await`` that belongs to the workflow's own scope."""
    if isinstance(node, ast.Await):
        return True
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        parts: list[Any] = list(node.decorator_list)
        if not isinstance(node, ast.ClassDef):
            a = node.args
            parts += a.defaults + [k for k in a.kw_defaults if k is not None]
        else:
            parts += node.bases + [k.value for k in node.keywords]
        return any(has_await(p) for p in parts)
    if isinstance(node, ast.Lambda):
        return False
    return any(has_await(c) for c in ast.iter_child_nodes(node))


def has_loop(node: ast.AST) -> bool:
    """Whether a verbatim statement contains a loop or comprehension (outside nested defs)."""
    if isinstance(node, (ast.For, ast.While, ast.ListComp, ast.SetComp, ast.DictComp)):
        return True
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return False
    return any(has_loop(c) for c in ast.iter_child_nodes(node))


@dataclass
class Block:
    stmts: list[ast.stmt]
    region: Region
    hctx: Handling
    src: ast.AST


@dataclass
class Lowered:
    blocks: dict[int, Block]
    points: dict[int, tuple[int, str]]
    slots: dict[str, str] = field(default_factory=dict)


class Emitter:
    """Turns a workflow body into blocks (regenerator's "explode", adapted)."""

    def __init__(
        self,
        locals_: set[str],
        no_cache: set[str],
        source_of: Any,
        filename: str,
        lazy_annotations: bool = False,
    ) -> None:
        self.locals = locals_
        self.no_cache = no_cache
        self.lazy_annotations = lazy_annotations
        self.source_of = source_of
        self.filename = filename
        self.blocks: dict[int, Block] = {}
        self.nlabels = 0
        self.cur: int = -1
        self.ended = True
        self.region: Region = ROOT
        self.hctx: Handling = ()
        self.leaps: list[ControlEntry] = []
        self.run: list[ast.stmt] = []
        self.points: dict[int, tuple[int, str]] = {}
        self.point_nodes: dict[int, ast.Await] = {}
        # 3.11 runs a comprehension that awaits as a coroutine of its own: per such lowered
        # comprehension, its result slot (on the frame exactly while it runs) and its node.
        self.comp_nodes: dict[str, ast.AST] = {}
        self.slots: dict[str, str] = {}
        self.uid_n = 0
        self.src: ast.AST = ast.Pass(lineno=1, col_offset=0, end_lineno=1, end_col_offset=0)
        self.peeks: set[int] = set()
        # For upgrading a suspended workflow onto new code (``_upgrade``): the constructs around
        # the statement being lowered, ``(kind, detail, uid)``, the statements being lowered with
        # the uid counter when each began, and per resume point the snapshot of both.
        self.structure: list[tuple[str, str, int]] = []
        self.owners: list[tuple[ast.AST, int]] = []
        self.shapes: dict[int, Shape] = {}
        # The temporaries holding a value now (assigned, their reference not yet emitted), in
        # the order of emission; per resume point, those kept across its await (in ``shapes``). The result of
        # a branching expression (and/or, a conditional, a chained comparison) is assigned in
        # several places: it holds a value once all of them join (``joined``).
        self.holding: dict[str, None] = {}
        self.joining: set[str] = set()
        self.aside: set[int] = set()

    # -- labels and blocks

    def uid(self) -> int:
        self.uid_n += 1
        return self.uid_n

    def new_label(self) -> int:
        n = self.nlabels
        self.nlabels += 1
        return n

    def start(self, label: int) -> None:
        self.blocks[label] = Block([], self.region, self.hctx, self.src)
        self.cur = label
        self.ended = False

    def start_at(
        self, label: int, region: Region | None = None, hctx: Handling | None = None
    ) -> None:
        """End the current block (falling through to ``label``) and start block ``label``."""
        self.flush()
        if not self.ended:
            self._append(ast.Return(ast.Constant(label)))
        if region is not None:
            self.region = region
        if hctx is not None:
            self.hctx = hctx
        self.start(label)

    def goto_new(self, region: Region | None = None, hctx: Handling | None = None) -> int:
        label = self.new_label()
        self.start_at(label, region, hctx)
        return label

    def _append(self, s: ast.stmt) -> None:
        if self.ended:
            # Unreachable code (after a return/raise/leap): keep it in a block nobody enters.
            self.start(self.new_label())
        fill_locations(s, self.src)
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and n.id.startswith("_af_t"):
                if isinstance(n.ctx, ast.Store):
                    if n.id not in self.joining:
                        self.holding[n.id] = None
                elif id(n) not in self.peeks and id(n) not in self.aside:  # its single use
                    self.holding.pop(n.id, None)
        self.blocks[self.cur].stmts.append(s)
        if isinstance(s, (ast.Return, ast.Raise)):
            self.ended = True

    def emit(self, s: ast.stmt) -> None:
        self.flush()
        self._append(s)

    def jump(self, label: int) -> None:
        self.emit(ast.Return(ast.Constant(label)))

    # -- temporaries

    def temp(self, value: ast.expr) -> ast.Name:
        """Store ``value`` in a fresh temporary now; return a (single-use) reference to it."""
        name = f"_af_t{self.uid()}"
        self.emit(ast.Assign([ast.Name(name, ast.Store())], value))
        return ast.Name(name, ast.Load())

    def _joined(self) -> str:
        """A temporary that the branches of an expression assign, each its own way."""
        name = f"_af_t{self.uid()}"
        self.joining.add(name)
        return name

    def _join(self, name: str) -> ast.Name:
        """Where the branches assigning ``name`` join: it holds a value from here."""
        self.holding[name] = None
        return ast.Name(name, ast.Load())

    def peek(self, ref: ast.Name) -> ast.Name:
        """A second, non-consuming reference to a temporary."""
        n = ast.Name(ref.id, ast.Load())
        self.peeks.add(id(n))
        return n

    # -- names of the workflow's own scope

    def store(self, name: str) -> ast.expr:
        """The assignment target for ``name``: a frame local, or a name declared global."""
        if name in self.locals:
            return frame_attr(lkey(name), ast.Store())
        return ast.Name(name, ast.Store())

    def clear_name(self, name: str) -> Clear:
        """The region clear that unbinds ``name`` (an ``except ... as name`` left abruptly)."""
        if name in self.locals:
            return Clear(Exit.UNBIND, lkey(name))
        return Clear(Exit.UNBIND_GLOBAL, name)

    def unbind(self, name: str) -> list[ast.stmt]:
        """The implicit ``name = None; del name`` at the end of ``except ... as name``."""
        if name in self.locals:
            return [ast.Expr(rt_call("unbind", frame_name(), ast.Constant(lkey(name))))]
        return [
            ast.Assign([ast.Name(name, ast.Store())], ast.Constant(None)),
            ast.Delete([ast.Name(name, ast.Del())]),
        ]

    # -- rewriting

    def rw(self, e: Any) -> Any:
        """An await-free user expression with names rewritten (no caching)."""
        r = Rewriter(self.locals, lazy_annotations=self.lazy_annotations)
        return r.visit(copy.deepcopy(e))

    def flush(self) -> None:
        """Emit the pending run of verbatim statements."""
        if not self.run:
            return
        run, self.run = self.run, []
        cache = any(has_loop(s) for s in run)
        cached: set[str] | frozenset[str] = (self.locals - self.no_cache) if cache else frozenset()
        r = Rewriter(self.locals, cached, self.leap, lazy_annotations=self.lazy_annotations)
        out: list[ast.stmt] = []
        for s in run:
            res = r.visit(copy.deepcopy(s))
            out.extend(res if isinstance(res, list) else [res])
        if cache and r.used:
            out = self._wrap_cached(out, sorted(r.used), sorted(r.written), run[0])
        saved = self.src
        self.src = run[0]
        for s in out:
            self._append(s)
            if self.ended:
                # A verbatim leap ended the block; later statements of the run are unreachable
                # at this level only if the leap was itself top-level, which _append handles.
                pass
        self.src = saved

    def _wrap_cached(
        self, body: list[ast.stmt], used: list[str], written: list[str], src: ast.AST
    ) -> list[ast.stmt]:
        def handler(body_: list[ast.stmt]) -> list[ast.ExceptHandler]:
            return [ast.ExceptHandler(rt_attr("NameError"), None, body_)]

        pre: list[ast.stmt] = [
            ast.Try(
                [ast.Assign([ast.Name(n, ast.Store())], frame_attr(lkey(n)))],
                handler([ast.Pass()]),
                [],
                [],
            )
            for n in used
        ]
        post: list[ast.stmt] = [
            ast.Try(
                [ast.Assign([frame_attr(lkey(n), ast.Store())], ast.Name(n, ast.Load()))],
                handler([ast.Expr(rt_call("unbind", frame_name(), ast.Constant(lkey(n))))]),
                [],
                [],
            )
            for n in written
        ]
        if not post:
            return pre + body
        for s in pre + post:
            fill_locations(s, src)
        # One statement: a top-level Return inside it must not end the block early.
        return pre + [fill_locations(ast.Try(body, [], [], post), src)]

    # -- leaps

    def leap(self, kind: str, value: ast.expr | None, node: ast.AST) -> list[ast.stmt]:
        """Statements for an escaping ``break``/``continue``/``return``."""
        steps: list[Clear | RunFinally] = []
        target = None
        for entry in reversed(self.leaps):
            if isinstance(entry, LoopEntry):
                if kind != "return":
                    target = entry.brk if kind == "break" else entry.cont
                    break
            elif isinstance(entry, FinallyEntry):
                steps.append(RunFinally(entry.slot, entry.label))
            else:
                steps.extend(entry.clears)
        items = [step.emit() for step in steps]
        if kind == "return":
            v = value if value is not None else ast.Constant(None)
            if items:
                call = rt_call("ret", frame_name(), v, _tuple_constant(items))
            else:
                call = ast.Call(rt_attr("Done"), [v], [])
            return [fill_locations(ast.Return(call), node)]
        assert target is not None, "break/continue outside a loop"
        if items:
            r = ast.Return(rt_call("jump", frame_name(), ast.Constant(target), _tuple_constant(items)))
        else:
            r = ast.Return(ast.Constant(target))
        return [fill_locations(r, node)]

    # -- statements

    def body(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if not has_await(s):
                self.run.append(s)
                continue
            self.flush()
            saved = self.src
            self.src = s
            self.owners.append((s, self.uid_n))
            getattr(self, "st_" + type(s).__name__)(s)
            self.owners.pop()
            self.src = saved
        self.flush()

    def st_Expr(self, s: ast.Expr) -> None:
        v = self.expr(s.value)
        # (An await on its own: its value, the frame's resume slot, is dropped. A user's object
        # with an attribute of that name is read as any attribute.)
        if not (isinstance(v, ast.Attribute) and v.attr == "_af_sent" and isinstance(v.value, ast.Name)
                and v.value.id == FRAME):
            self.emit(ast.Expr(v))

    def st_Assign(self, s: ast.Assign) -> None:
        v = self.expr(s.value)
        if len(s.targets) == 1 and not has_await(s.targets[0]):
            self.emit(ast.Assign([self.rw(s.targets[0])], v))
            return
        ref = self.temp(v) if not isinstance(v, ast.Constant) else v
        for i, t in enumerate(s.targets):
            val = ref if i == len(s.targets) - 1 or not isinstance(ref, ast.Name) else self.peek(ref)
            self.assign_to(t, val)

    def assign_to(self, t: ast.expr, value: ast.expr) -> None:
        if not has_await(t):
            self.emit(ast.Assign([self.rw(t)], value))
        elif isinstance(t, ast.Attribute):
            o = self.expr(t.value)
            self.emit(ast.Assign([ast.Attribute(o, t.attr, ast.Store())], value))
        elif isinstance(t, ast.Subscript):
            o = self.expr(t.value)
            if has_await(t.slice):
                o = self.temp(o)
            k = self.expr(t.slice)
            self.emit(ast.Assign([ast.Subscript(o, k, ast.Store())], value))
        else:  # rejected by validation
            raise AssertionError("await in a tuple assignment target")

    def st_AnnAssign(self, s: ast.AnnAssign) -> None:
        if s.value is None:
            # ``d[await k()]: T``: the target's parts are evaluated, nothing is assigned.
            for p in annotated_target_parts(s.target):
                self.st_Expr(fill_locations(ast.Expr(p), s))
            return
        v = self.expr(s.value)
        self.assign_to(s.target, self.temp(v) if has_await(s.target) else v)

    def st_AugAssign(self, s: ast.AugAssign) -> None:
        op = _IOPS[type(s.op)]
        t = s.target
        if isinstance(t, ast.Name):
            cur = self.temp(self.rw(ast.Name(t.id, ast.Load())))
            r = self.expr(s.value)
            self.emit(ast.Assign([self.rw(t)], ast.Call(rt_attr(op), [cur, r], [])))
        elif isinstance(t, ast.Attribute):
            o = self.temp(self.expr(t.value))
            cur = self.temp(ast.Attribute(self.peek(o), t.attr, ast.Load()))
            r = self.expr(s.value)
            self.emit(
                ast.Assign(
                    [ast.Attribute(o, t.attr, ast.Store())], ast.Call(rt_attr(op), [cur, r], [])
                )
            )
        else:
            assert isinstance(t, ast.Subscript)
            o = self.temp(self.expr(t.value))
            k = self.temp(self.expr(t.slice))
            cur = self.temp(ast.Subscript(self.peek(o), self.peek(k), ast.Load()))
            r = self.expr(s.value)
            self.emit(
                ast.Assign([ast.Subscript(o, k, ast.Store())], ast.Call(rt_attr(op), [cur, r], []))
            )

    def st_Return(self, s: ast.Return) -> None:
        v = self.expr(s.value) if s.value is not None else None
        for st in self.leap("return", v, s):
            self.emit(st)

    def st_Raise(self, s: ast.Raise) -> None:
        exc = self.expr(s.exc) if s.exc is not None else None
        cause = None
        if s.cause is not None:
            if has_await(s.cause) and exc is not None:
                exc = self.temp(exc)
            cause = self.expr(s.cause)
        self.emit(ast.Raise(exc, cause))

    def st_Assert(self, s: ast.Assert) -> None:
        call = ast.Call(rt_attr("AssertionError"), [s.msg] if s.msg else [], [])
        inner = ast.If(ast.UnaryOp(ast.Not(), s.test), [ast.Raise(call, None)], [])
        node = ast.If(ast.Name("__debug__", ast.Load()), [inner], [])
        fill_locations(node, s)
        self.body([node])

    def st_Delete(self, s: ast.Delete) -> None:
        for t in s.targets:
            if not has_await(t):
                self.body([fill_locations(ast.Delete([t]), s)])
            elif isinstance(t, ast.Subscript):
                o = self.expr(t.value)
                if has_await(t.slice):
                    o = self.temp(o)
                k = self.expr(t.slice)
                self.emit(ast.Delete([ast.Subscript(o, k, ast.Del())]))
            elif isinstance(t, ast.Attribute):
                o = self.expr(t.value)
                self.emit(ast.Delete([ast.Attribute(o, t.attr, ast.Del())]))
            else:
                raise AssertionError("await in a del target")

    def st_If(self, s: ast.If) -> None:
        after = self.new_label()
        other = self.new_label() if s.orelse else after
        self.branch(s.test, other, False)
        self.body(s.body)
        if s.orelse:
            self.flush()
            if not self.ended:
                self.jump(after)
            self.start_at(other)
            self.body(s.orelse)
        self.start_at(after)

    def st_While(self, s: ast.While) -> None:
        head = self.goto_new()
        after = self.new_label()
        other = self.new_label() if s.orelse else after
        if not (isinstance(s.test, ast.Constant) and s.test.value):
            self.branch(s.test, other, False)
        self.leaps.append(LoopEntry(after, head))
        self.structure.append(("while", "", -1))
        self.body(s.body)
        self.structure.pop()
        self.leaps.pop()
        if not self.ended:
            self.jump(head)
        if s.orelse:
            self.start_at(other)
            self.body(s.orelse)
        self.start_at(after)

    def st_For(self, s: ast.For) -> None:
        k = self.uid()
        it = f"_af_it{k}"
        what = getattr(s, "_af_comp", None) or "for-loop"
        self.slots[it] = f"the iterator of the {what} at line {s.lineno}"
        v = self.expr(s.iter)
        self.emit(ast.Assign([frame_attr(it, ast.Store())], rt_call("iter", v)))
        outer_region = self.region
        if outer_region.target is not None:
            # An exception leaving the loop drops its iterator, as native code does.
            self.region = outer_region.clearing((Clear(Exit.RESET, it),))
        head = self.goto_new()
        after = self.new_label()
        brk = self.new_label()
        other = self.new_label() if s.orelse else brk
        self.emit(
            ast.Assign(
                [ast.Name("_af_v", ast.Store())],
                rt_call("next", frame_attr(it), rt_attr("SENTINEL")),
            )
        )
        self.emit(
            ast.If(
                ast.Compare(ast.Name("_af_v", ast.Load()), [ast.Is()], [rt_attr("SENTINEL")]),
                [ast.Return(ast.Constant(other))],
                [],
            )
        )
        self.emit(ast.Assign([self.rw(s.target)], ast.Name("_af_v", ast.Load())))
        self.leaps.append(LoopEntry(brk, head))
        ifs = "".join(f" if {ast.unparse(c)}" for c in getattr(s, "_af_ifs", ()))
        self.structure.append(("for", f"{ast.unparse(s.target)} in {ast.unparse(s.iter)}{ifs}", k))
        self.body(s.body)
        self.structure.pop()
        self.leaps.pop()
        if not self.ended:
            self.jump(head)
        if s.orelse:
            self.start_at(other, outer_region)
            self.emit(ast.Assign([frame_attr(it, ast.Store())], ast.Constant(None)))
            self.body(s.orelse)
            self.flush()
            if not self.ended:
                self.jump(after)
        self.start_at(brk, outer_region)
        self.emit(ast.Assign([frame_attr(it, ast.Store())], ast.Constant(None)))
        self.start_at(after)

    def st_Try(self, s: ast.Try) -> None:
        k = self.uid()
        outer_region, outer_hctx = self.region, self.hctx
        exc, fin = f"_af_exc{k}", f"_af_fin{k}"
        self.slots[exc] = f"the exception being handled by the try at line {s.lineno}"
        self.slots[fin] = f"the pending completion of the finally at line {s.lineno}"
        after = self.new_label()
        fin_l = self.new_label() if s.finalbody else None
        disp = self.new_label() if s.handlers else None
        if fin_l is not None:
            covered = Region(fin_l, fin, Handler.FINALLY, ())
            self.leaps.append(FinallyEntry(fin, fin_l))
        else:
            covered = outer_region
        body_region = Region(disp, exc, Handler.EXCEPT, ()) if disp is not None else covered
        self.goto_new(body_region, outer_hctx)
        clauses = [f"except {ast.unparse(h.type)}" if h.type else "except" for h in s.handlers]
        clauses += ["else"] * bool(s.orelse) + ["finally"] * bool(s.finalbody)
        shape = ", ".join(clauses)
        self.structure.append(("try", shape, k))
        self.body(s.body)
        self.structure.pop()
        if s.orelse:
            self.goto_new(covered, outer_hctx)
            self.structure.append(("try-else", shape, k))
            self.body(s.orelse)
            self.structure.pop()

        def exit_try() -> None:
            self.flush()
            if self.ended:
                return
            if fin_l is not None:
                self.emit(ast.Assign([frame_attr(fin, ast.Store())], ast.Constant(None)))
                self.jump(fin_l)
            else:
                self.jump(after)

        exit_try()
        if disp is not None:
            hctx = ((exc, Handler.EXCEPT),) + outer_hctx
            self.start_at(disp, covered.clearing((Clear(Exit.RESET, exc),)), hctx)
            labels = []
            for h in s.handlers:
                hl = self.new_label()
                labels.append(hl)
                saved = self.src
                self.src = h
                then: list[ast.stmt] = []
                if h.name:
                    then.append(ast.Assign([self.store(h.name)], frame_attr(exc)))
                then.append(ast.Return(ast.Constant(hl)))
                if h.type is None:
                    for st in then:
                        self.emit(st)
                else:
                    cond = rt_call("matches", frame_attr(exc), self.rw(h.type))
                    self.emit(ast.If(cond, then, []))
                self.src = saved
            if not self.ended:
                self.emit(ast.Return(rt_call("reraise", frame_attr(exc))))
            for h, hl in zip(s.handlers, labels, strict=True):
                clears: tuple[Clear, ...] = (Clear(Exit.RESET, exc),)
                if h.name:
                    clears += (self.clear_name(h.name),)
                saved = self.src
                self.src = h.body[0]
                self.start_at(hl, covered.clearing(clears), hctx)
                self.leaps.append(ClearEntry(clears))
                self.structure.append(("except", f"{clauses[labels.index(hl)]} of {shape}", k))
                self.body(h.body)
                self.structure.pop()
                self.leaps.pop()
                self.flush()
                if not self.ended:
                    self.emit(ast.Assign([frame_attr(exc, ast.Store())], ast.Constant(None)))
                    if h.name:
                        for st in self.unbind(h.name):
                            self.emit(st)
                    exit_try()
                self.src = saved
        if fin_l is not None:
            self.leaps.pop()
            saved = self.src
            self.src = s.finalbody[0]
            fin_clear = (Clear(Exit.RESET, fin),)
            self.start_at(fin_l, outer_region.clearing(fin_clear), ((fin, Handler.FINALLY),) + outer_hctx)
            self.leaps.append(ClearEntry(fin_clear))
            self.structure.append(("finally", shape, k))
            self.body(s.finalbody)
            self.structure.pop()
            self.leaps.pop()
            self.flush()
            if not self.ended:
                self.emit(
                    ast.Return(
                        rt_call("fin_end", frame_name(), ast.Constant(fin), ast.Constant(after))
                    )
                )
            self.src = saved
        self.start_at(after, outer_region, outer_hctx)

    def st_With(self, s: ast.With) -> None:
        """Desugar (PEP 343, with CPython's lookup order) and lower the result."""
        item, rest = s.items[0], s.items[1:]
        inner: list[ast.stmt] = (
            [fill_locations(ast.With(rest, s.body), s)] if rest else list(s.body)
        )
        k = self.uid()
        m, v, ok = f"{SYNTH}{k}m", f"{SYNTH}{k}v", f"{SYNTH}{k}ok"
        self.slots[m] = f"the context manager of the with at line {s.lineno}"
        self.slots[v] = f"the __enter__ result of the with at line {s.lineno}"

        def N(name: str, ctx: Any = None) -> ast.Name:
            return ast.Name(name, ctx or ast.Load())

        pre: list[ast.stmt] = [
            ast.Assign([N(m, ast.Store())], rt_call("with_begin", item.context_expr)),
            ast.Assign([N(v, ast.Store())], rt_call("with_enter", N(m))),
            ast.Assign([N(ok, ast.Store())], ast.Constant(True)),
        ]
        body: list[ast.stmt] = []
        if item.optional_vars is not None:
            body.append(ast.Assign([item.optional_vars], N(v)))
        body.append(ast.Assign([N(v, ast.Store())], ast.Constant(None)))
        body += inner
        handler = ast.ExceptHandler(
            rt_attr("BaseException"),
            None,
            [
                ast.Assign([N(ok, ast.Store())], ast.Constant(False)),
                ast.If(
                    ast.UnaryOp(ast.Not(), rt_call("with_exit", N(m))), [ast.Raise(None, None)], []
                ),
            ],
        )
        tr = ast.Try(
            [ast.Try(body, [handler], [], [])],
            [],
            [],
            [
                ast.If(N(ok), [ast.Expr(rt_call("with_exit_ok", N(m)))], []),
                ast.Assign([N(m, ast.Store())], ast.Constant(None)),
            ],
        )
        out = [fill_locations(x, s) for x in pre + [tr]]
        what = ast.unparse(item.context_expr)
        if item.optional_vars is not None:
            what += f" as {ast.unparse(item.optional_vars)}"
        self.structure.append(("with", what, k))
        self.body(out)
        self.structure.pop()

    def st_Match(self, s: ast.Match) -> None:
        k = self.uid()
        subj = f"_af_m{k}"
        self.slots[subj] = f"the subject of the match at line {s.lineno}"
        v = self.expr(s.subject)
        self.emit(ast.Assign([frame_attr(subj, ast.Store())], v))
        after = self.new_label()
        for case in s.cases:
            nxt = self.new_label()
            body_l = self.new_label()
            caps = pattern_captures(case.pattern)
            ren = {c: f"_af_c{k}_{c}" for c in caps}
            pattern = self._pattern(copy.deepcopy(case.pattern), ren)
            saved = self.src
            self.src = case.pattern
            then: list[ast.stmt] = [
                ast.Assign([self.store(c)], ast.Name(r, ast.Load()))
                for c, r in ren.items()
            ]
            guard_l = None
            if case.guard is None:
                then.append(ast.Return(ast.Constant(body_l)))
            elif not has_await(case.guard):
                then.append(ast.If(self.rw(case.guard), [ast.Return(ast.Constant(body_l))], []))
            else:
                guard_l = self.new_label()
                then.append(ast.Return(ast.Constant(guard_l)))
            m = ast.Match(frame_attr(subj), [ast.match_case(pattern, None, then)])
            self.emit(m)
            self.jump(nxt)
            if guard_l is not None:
                self.start_at(guard_l)
                self.structure.append(("match", ast.unparse(s.subject), k))
                self.branch(case.guard, body_l, True)  # type: ignore[arg-type]
                self.structure.pop()
                self.jump(nxt)
            self.src = case.body[0]
            self.start_at(body_l)
            self.emit(ast.Assign([frame_attr(subj, ast.Store())], ast.Constant(None)))
            self.body(case.body)
            self.flush()
            if not self.ended:
                self.jump(after)
            self.src = saved
            self.start_at(nxt)
        self.emit(ast.Assign([frame_attr(subj, ast.Store())], ast.Constant(None)))
        self.start_at(after)

    def _pattern(self, p: ast.AST, ren: dict[str, str]) -> Any:
        return rewrite_pattern(p, ren, self.rw)

    # -- expressions

    def branch(self, e: ast.expr, label: int, when: bool) -> None:
        """Jump to ``label`` if ``bool(e) == when``, else fall through: a test in a condition.

        As CPython compiles a condition (``if``, ``while``, a guard, a conditional expression's
        test), ``and``/``or``/``not``/conditional expressions and comparison chains jump on each
        operand's truth directly, so each operand's ``__bool__`` runs once.
        """
        if not has_await(e):
            t = self.rw(e)
            self.emit(ast.If(t if when else ast.UnaryOp(ast.Not(), t), [ast.Return(ast.Constant(label))], []))
        elif isinstance(e, ast.BoolOp):
            if isinstance(e.op, ast.And) != when:  # and-false or or-true: any operand decides
                for v in e.values:
                    self.branch(v, label, when)
            else:  # and-true or or-false: every operand must agree
                skip = self.new_label()
                for v in e.values[:-1]:
                    self.branch(v, skip, not when)
                self.branch(e.values[-1], label, when)
                self.start_at(skip)
        elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            self.branch(e.operand, label, not when)
        elif isinstance(e, ast.IfExp):
            other, end = self.new_label(), self.new_label()
            self.branch(e.test, other, False)
            self.branch(e.body, label, when)
            self.jump(end)
            self.start_at(other)
            self.branch(e.orelse, label, when)
            self.start_at(end)
        elif isinstance(e, ast.Compare) and len(e.ops) > 1:
            self._branch_chain(e, label, when)
        else:
            t = self.expr(e)
            self.emit(ast.If(t if when else ast.UnaryOp(ast.Not(), t), [ast.Return(ast.Constant(label))], []))

    def _branch_chain(self, e: ast.Compare, label: int, when: bool) -> None:
        # ``a < b < c`` as a condition: each link's result is tested once; a false link decides.
        false_l = label if not when else self.new_label()
        left = self.expr(e.left)
        if not isinstance(left, ast.Constant):
            left = self.temp(left)
        n = len(e.ops)
        for i, (op, comp) in enumerate(zip(e.ops, e.comparators, strict=True)):
            right = self.expr(comp)
            if i < n - 1 and not isinstance(right, ast.Constant):
                right = self.temp(right)
                first: ast.expr = self.peek(right)
            else:
                first = right
            test = ast.Compare(left, [op], [first])
            if i < n - 1 or not when:
                self.emit(ast.If(ast.UnaryOp(ast.Not(), test), [*self._drop(right, i < n - 1), ast.Return(ast.Constant(false_l))], []))
            else:
                self.emit(ast.If(test, [ast.Return(ast.Constant(label))], []))
            left = right
        if when:
            self.start_at(false_l)

    def _drop(self, right: ast.expr, kept: bool = True) -> list[ast.stmt]:
        """When a chain stops at a false link: consume the temporary kept for the next link, so
        that it does not stay on the frame (and in later checkpoints) after the chain."""
        if not kept or not isinstance(right, ast.Name) or not right.id.startswith("_af_t"):
            return []
        taken = ast.Name(right.id, ast.Load())
        self.aside.add(id(taken))  # on the way out of the chain only: the next link holds it
        return [ast.Expr(taken)]

    def expr(self, e: ast.expr) -> ast.expr:
        """Lower ``e``; returns an expression valid after the statements emitted so far."""
        if not has_await(e):
            return self.rw(e)  # type: ignore[no-any-return]
        if isinstance(e, COMPS) and _awaits_only_in_outer_iterable(e):
            return self._comp_outer_await(e)
        m = getattr(self, "ex_" + type(e).__name__, None)
        if m is not None:
            return m(e)  # type: ignore[no-any-return]
        return self.ex_generic(e)

    def ex_Await(self, e: ast.Await) -> ast.expr:
        v = self.expr(e.value)
        resume = self.new_label()
        saved = self.src
        self.src = e
        self.emit(ast.Return(rt_call("suspend", frame_name(), v, ast.Constant(resume))))
        self.src = saved
        # The user's text of the await (a lowered comprehension renames its variables).
        text = getattr(e, "_af_text", None) or self.source_of(e)
        self.points[resume] = (e.lineno, text)
        self.point_nodes[resume] = e
        self.shapes[resume] = (tuple(self.structure), tuple(self.owners), self.uid_n, frozenset(self.holding))
        self.start_at(resume)
        return frame_attr("_af_sent")

    def ex_generic(self, e: ast.expr) -> ast.expr:
        e = copy.copy(e)
        slots = _slots(e)
        last = max(i for i, (get, _, _) in enumerate(slots) if has_await(get()))
        for i, (get, put, kind) in enumerate(slots):
            v = get()
            if i < last:
                if isinstance(v, ast.Constant):
                    continue
                x = self.expr(v)
                if kind != "plain":
                    # Unpack or merge now, where CPython does, not after the later await.
                    x = rt_call(kind, x)
                put(self.temp(x))
            elif i == last:
                put(self.expr(v))
            else:
                put(self.rw(v))
        return e

    def ex_Call(self, e: ast.Call) -> ast.expr:
        """A call with awaits in it: callee, then arguments, each evaluated at its position.

        ``*v`` before a later await is unpacked at its position, and ``**v`` (with the keywords
        before it) is merged there, with the interpreter's own errors; the rest as ``ex_generic``.
        """
        e = copy.copy(e)
        args, kws = list(e.args), list(e.keywords)
        e.args, e.keywords = args, kws
        parts: list[ast.expr] = [e.func] + [a.value if isinstance(a, ast.Starred) else a for a in args]
        parts += [k.value for k in kws]
        last = max(i for i, p in enumerate(parts) if has_await(p))
        if last == 0:
            e.func = self.expr(e.func)
            e.args = [self.rw(a) for a in args]
            e.keywords = [ast.keyword(k.arg, self.rw(k.value)) for k in kws]
            return e
        func = e.func = self._early(e.func)

        def callee() -> ast.expr:
            return self.peek(func) if isinstance(func, ast.Name) else copy.deepcopy(func)

        for i, a in enumerate(args):
            pos = 1 + i
            star = isinstance(a, ast.Starred)
            v = a.value if isinstance(a, ast.Starred) else a
            if pos < last:
                if star:
                    if isinstance(v, ast.Constant):
                        continue
                    # A lone ``*v`` is unpacked by the call itself, after the keywords; with
                    # other positional arguments, into a list where it stands.
                    x = self.expr(v) if len(args) == 1 else rt_call("star_list", self.expr(v))
                    args[i] = ast.Starred(self.temp(x), ast.Load())
                else:
                    args[i] = self._early(v)
            elif pos == last:
                args[i] = ast.Starred(self.expr(v), ast.Load()) if star else self.expr(v)
            else:
                args[i] = self.rw(a)
        base = 1 + len(args)
        stars = [j for j, k in enumerate(kws) if k.arg is None and base + j < last]
        out: list[ast.keyword] = []
        start = 0
        if stars:
            # Keywords up to the last ``**`` before the last await merge into one dict now, group
            # by group (a run of plain keywords, then a ``**``), as the interpreter builds them.
            acc = self.temp(ast.Dict([], []))
            group: list[tuple[str, ast.expr]] = []

            def merge(value: ast.expr) -> None:
                self.emit(ast.Expr(rt_call("kw_merge", callee(), self.peek(acc), value)))

            for j in range(stars[-1] + 1):
                k = kws[j]
                if k.arg is None:
                    if group:
                        keys: list[ast.expr | None] = [ast.Constant(n) for n, _ in group]
                        merge(ast.Dict(keys, [v for _, v in group]))
                        group = []
                    merge(self.expr(k.value))
                else:
                    group.append((k.arg, self._early(k.value)))
            out.append(ast.keyword(None, acc))
            start = stars[-1] + 1
        for j in range(start, len(kws)):
            k = kws[j]
            pos = base + j
            if pos < last:
                out.append(ast.keyword(k.arg, self._early(k.value)))
            elif pos == last:
                out.append(ast.keyword(k.arg, self.expr(k.value)))
            else:
                out.append(ast.keyword(k.arg, self.rw(k.value)))
        e.keywords = out
        return e

    def _early(self, v: ast.expr) -> ast.expr:
        """``v`` evaluated now, into a temporary, for use after a later await (constants as is)."""
        if isinstance(v, ast.Constant):
            return v
        return self.temp(self.expr(v))

    def ex_JoinedStr(self, e: ast.JoinedStr) -> ast.expr:
        """An f-string with awaits: the parts before the last await are formatted at once."""
        values = list(e.values)
        last = max(i for i, v in enumerate(values) if has_await(v))
        for i, v in enumerate(values):
            if isinstance(v, ast.Constant):
                continue
            assert isinstance(v, ast.FormattedValue)
            if i < last:
                done = self.rw(ast.JoinedStr([v])) if not has_await(v) else ast.JoinedStr([self._formatted(v)])
                values[i] = ast.FormattedValue(self.temp(done), -1, None)
            elif i == last:
                values[i] = self._formatted(v)
            else:
                values[i] = self.rw(v)
        return ast.JoinedStr(values)

    def _formatted(self, v: ast.FormattedValue) -> ast.FormattedValue:
        # The value is evaluated before the format spec; the conversion (!r) and the formatting
        # happen after both.
        spec = v.format_spec
        if spec is not None and has_await(spec):
            value = self._early(v.value)
            return ast.FormattedValue(value, v.conversion, self.expr(spec))
        return ast.FormattedValue(
            self.expr(v.value), v.conversion, self.rw(spec) if spec is not None else None
        )

    def _comp_outer_await(self, e: Any) -> ast.expr:
        """A comprehension (or generator expression) whose only awaits are in its outermost
        iterable: that iterable is evaluated in the workflow's scope, the rest stays native."""
        it = self._early(e.generators[0].iter)
        e = copy.copy(e)
        g0 = copy.copy(e.generators[0])
        g0.iter = it  # a temporary (or constant): left alone by the rewriter
        e.generators = [g0] + list(e.generators[1:])
        return self.rw(e)  # type: ignore[no-any-return]

    def ex_BoolOp(self, e: ast.BoolOp) -> ast.expr:
        name = self._joined()
        end = self.new_label()
        self._boolop_into(e, name, end, end, False)
        self.start_at(end)
        return self._join(name)

    def _boolop_into(self, e: ast.BoolOp, name: str, true_l: int, false_l: int, tested: bool) -> None:
        """Evaluate ``e`` as a value into the temporary ``name``.

        An operand that decides the result jumps out: a false one of ``and`` to ``false_l``, a
        true one of ``or`` to ``true_l``. With ``tested``, the last operand is tested too (the
        enclosing ``and``/``or`` tests the result). CPython 3.11 threads the jumps of nested
        ``and``/``or`` (a value already tested is not tested again by the enclosing operator),
        so there a nested operator is lowered into the same jumps; since 3.12 it is a value that
        the enclosing operator tests again.
        """
        n = len(e.values)
        is_and = isinstance(e.op, ast.And)
        for i, v in enumerate(e.values):
            last = i == n - 1
            if last and not tested:
                self.emit(ast.Assign([ast.Name(name, ast.Store())], self.expr(v)))
                return
            if _THREADED_BOOLOPS and isinstance(v, ast.BoolOp):
                if last:
                    self._boolop_into(v, name, true_l, false_l, True)
                    return
                nxt = self.new_label()
                t_l, f_l = (nxt, false_l) if is_and else (true_l, nxt)
                self._boolop_into(v, name, t_l, f_l, True)
                self.start_at(nxt)
                continue
            self.emit(ast.Assign([ast.Name(name, ast.Store())], self.expr(v)))
            test: ast.expr = ast.Name(name, ast.Load())
            self.peeks.add(id(test))
            if last:  # tested by the enclosing operator (3.11 only)
                self.emit(ast.If(test, [ast.Return(ast.Constant(true_l))], [ast.Return(ast.Constant(false_l))]))
                return
            # A deciding operand leaves; the others fall through to the next operand.
            if is_and:
                test = ast.UnaryOp(ast.Not(), test)
            self.emit(ast.If(test, [ast.Return(ast.Constant(false_l if is_and else true_l))], []))

    def ex_IfExp(self, e: ast.IfExp) -> ast.expr:
        name = self._joined()
        end = self.new_label()
        other = self.new_label()
        self.branch(e.test, other, False)
        self.emit(ast.Assign([ast.Name(name, ast.Store())], self.expr(e.body)))
        self.jump(end)
        self.start_at(other)
        self.emit(ast.Assign([ast.Name(name, ast.Store())], self.expr(e.orelse)))
        self.start_at(end)
        return self._join(name)

    def ex_Compare(self, e: ast.Compare) -> ast.expr:
        if len(e.ops) == 1:
            return self.ex_generic(e)
        name = self._joined()
        end = self.new_label()
        left = self.expr(e.left)
        if not isinstance(left, ast.Constant):
            left = self.temp(left)
        n = len(e.ops)
        for i, (op, comp) in enumerate(zip(e.ops, e.comparators, strict=True)):
            right = self.expr(comp)
            if i < n - 1 and not isinstance(right, ast.Constant):
                right = self.temp(right)
                first: ast.expr = self.peek(right)
            else:
                first = right
            self.emit(
                ast.Assign([ast.Name(name, ast.Store())], ast.Compare(left, [op], [first]))
            )
            if i < n - 1:
                test = ast.Name(name, ast.Load())
                self.peeks.add(id(test))
                self.emit(ast.If(ast.UnaryOp(ast.Not(), test), [*self._drop(right), ast.Return(ast.Constant(end))], []))
            left = right
        self.start_at(end)
        return self._join(name)

    def ex_NamedExpr(self, e: ast.NamedExpr) -> ast.expr:
        v = self.expr(e.value)
        name = e.target.id
        if name in self.locals:
            return rt_call("setlocal", frame_name(), ast.Constant(lkey(name)), v)
        # A name declared ``global`` in the workflow: every block function declares it global
        # too, so a plain walrus in the block binds the module global, as natively.
        return ast.NamedExpr(ast.Name(name, ast.Store()), v)

    def _comp(self, e: Any) -> ast.expr:
        k = self.uid()
        res = f"{SYNTH}{k}r"
        ren: dict[str, str] = {}
        for g in e.generators:
            for n in ast.walk(g.target):
                # Its own variables are the names it binds: in ``for d["k"] in xs`` (or
                # ``for b.n in xs``), ``d`` (``b``) is read, the workflow's own.
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    ren[n.id] = f"{SYNTH}{k}_{n.id}"
        what = _COMP_NAMES[type(e)]
        for name, slot in ren.items():
            self.slots[slot] = f"the variable {name!r} of the {what} at line {e.lineno}"
        self.slots[res] = f"the result being built by the {what} at line {e.lineno}"
        if COMPREHENSION_IS_COROUTINE:
            self.comp_nodes[res] = e
        e = copy.deepcopy(e)
        for n in ast.walk(e):
            if isinstance(n, ast.Await) and not hasattr(n, "_af_text"):
                n._af_text = self.source_of(n)  # type: ignore[attr-defined]
        first_iter = e.generators[0].iter
        for g in e.generators:
            _rename(g.target, ren)
            _rename(g.iter, ren) if g is not e.generators[0] else None
            for c in g.ifs:
                _rename(c, ren)
        if isinstance(e, ast.DictComp):
            _rename(e.key, ren)
            _rename(e.value, ren)
        else:
            _rename(e.elt, ren)
        # Variables that a lambda or generator expression made in the comprehension reads live
        # in a holder of this run (natively: cells of the comprehension's scope), so those
        # functions see their last values after the comprehension, and each run has its own.
        hold = f"{SYNTH}{k}c"
        e.generators[0].iter = ast.Constant(None)
        held = _hold_captured(e, ren, hold)
        e.generators[0].iter = first_iter
        if held:
            self.slots[hold] = (
                f"the variables {', '.join(repr(v) for v in sorted(held))} of the {what} at line "
                f"{e.lineno}, read by a function made in it"
            )
        if isinstance(e, ast.DictComp):
            init: ast.expr = ast.Dict([], [])
            add: ast.stmt = ast.Expr(rt_call("dict_put", ast.Name(res, ast.Load()), e.key, e.value))
        else:
            init = ast.List([], ast.Load()) if isinstance(e, ast.ListComp) else rt_call("newset")
            meth = "append" if isinstance(e, ast.ListComp) else "add"
            add = ast.Expr(
                ast.Call(ast.Attribute(ast.Name(res, ast.Load()), meth, ast.Load()), [e.elt], [])
            )
        inner: ast.stmt = add
        for g in reversed(e.generators):
            for c in reversed(g.ifs):
                inner = ast.If(c, [inner], [])
            inner = ast.For(g.target, g.iter if g is not e.generators[0] else first_iter, [inner], [])
            inner._af_comp = what  # type: ignore[attr-defined]  # how messages name its loop
            # Its filters decide what its partial result holds: part of the loop's structure.
            inner._af_ifs = list(g.ifs)  # type: ignore[attr-defined]
        stmts = [ast.Assign([ast.Name(res, ast.Store())], init), inner]
        if held:
            stmts.insert(0, ast.Assign([ast.Name(hold, ast.Store())], rt_call("Cells")))
        for s in stmts:
            fill_locations(s, e)
        # The loop variables and the result live on the frame only while the comprehension
        # runs, as in its own scope natively: they go when it ends, or when it raises.
        kept = [v for n, v in ren.items() if n not in held] + ([hold] if held else [])
        gone = tuple(Clear(Exit.UNBIND, v) for v in kept) + (Clear(Exit.UNBIND, res),)
        saved_region = self.region
        if saved_region.target is not None:
            self.region = saved_region.clearing(gone)
        self.structure.append(("comprehension", what, k))
        self.body(stmts)
        self.structure.pop()
        self.region = saved_region
        for var in kept:
            self.emit(ast.Expr(rt_call("unbind", frame_name(), ast.Constant(var))))
        return rt_call("take", frame_name(), ast.Constant(res))

    ex_ListComp = ex_SetComp = ex_DictComp = _comp


RT_NAME = "_af_rt"

# Whether nested ``and``/``or`` in a value test each operand once (CPython 3.11's jump threading).
_THREADED_BOOLOPS = sys.version_info < (3, 12)
# Whether a comprehension that awaits runs as a coroutine of its own (3.11; PEP 709 inlines it
# since 3.12): a StopIteration leaving it becomes a RuntimeError there (PEP 479).
COMPREHENSION_IS_COROUTINE = sys.version_info < (3, 12)


_COMP_NAMES = {
    ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression",
}


def _awaits_only_in_outer_iterable(e: Any) -> bool:
    """Whether a comprehension's awaits are all in its outermost iterable (evaluated in the
    enclosing scope, before the comprehension runs)."""
    gens = e.generators
    rest: list[ast.AST] = [gens[0].target, *gens[0].ifs]
    for g in gens[1:]:
        rest += [g.target, g.iter, *g.ifs]
    rest += [e.key, e.value] if isinstance(e, ast.DictComp) else [e.elt]
    return not any(has_await(x) for x in rest)


def _tuple_constant(items: list[Any]) -> ast.Constant:
    """A constant tuple (of constants) as one AST node: valid to compile, though typeshed's
    ``ast.Constant`` names only scalar values."""
    return ast.Constant(tuple(items))  # type: ignore[arg-type]


def _rename(node: ast.AST, ren: dict[str, str]) -> None:
    """Rename the comprehension variables ``ren`` in an expression of the comprehension, but
    not inside a lambda or comprehension nested in it that binds the same name."""
    if not ren:
        return
    if isinstance(node, ast.Name):
        if node.id in ren:
            node.id = ren[node.id]
        return
    if isinstance(node, ast.Lambda):
        a = node.args
        for d in a.defaults + [k for k in a.kw_defaults if k is not None]:
            _rename(d, ren)
        bound = set(arg_names(a)) | Bindings().scan([ast.Expr(node.body)]).bound
        _rename(node.body, {k: v for k, v in ren.items() if k not in bound})
        return
    if isinstance(node, COMPS):
        gens = node.generators
        _rename(gens[0].iter, ren)
        inner = {k: v for k, v in ren.items() if k not in {t for g in gens for t in target_names(g.target)}}
        for i, g in enumerate(gens):
            if i:
                _rename(g.iter, inner)
            for c in g.ifs:
                _rename(c, inner)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            _rename(part, inner)
        return
    for child in ast.iter_child_nodes(node):
        _rename(child, ren)


def _hold_captured(e: Any, ren: dict[str, str], hold: str) -> set[str]:
    """Move the (renamed) comprehension variables that a lambda or generator expression in
    ``e`` reads into attributes of the holder ``hold``; return their user names.

    Each outermost such function is wrapped as ``(lambda hold: function)(hold)``, so it keeps
    the holder of the run that made it, as a native closure keeps that run's cells. A generator
    expression's outermost iterable is evaluated before the wrapper is called (natively it is
    evaluated where the generator expression stands, in the comprehension).
    """
    user = {v: n for n, v in ren.items()}

    def deferred(n: Any) -> list[ast.AST]:
        # What runs later, when the function is called: not a lambda's defaults, nor a
        # generator expression's outermost iterable (both evaluated where they stand).
        if isinstance(n, ast.Lambda):
            return [n.body]
        g0 = n.generators[0]
        rest: list[ast.AST] = [g0.target, *g0.ifs, *n.generators[1:], n.elt]
        return rest

    captured: set[str] = set()
    for n in ast.walk(e):
        if isinstance(n, (ast.Lambda, ast.GeneratorExp)):
            for part in deferred(n):
                captured.update(m.id for m in ast.walk(part) if isinstance(m, ast.Name) and m.id in user)
    if not captured:
        return set()

    class Hold(ast.NodeTransformer):
        depth = 0

        def visit_Name(self, n: ast.Name) -> Any:
            if n.id in captured:
                a = ast.Attribute(ast.Name(hold, ast.Load()), user[n.id], n.ctx)
                return ast.copy_location(a, n)
            return n

        def wrap(self, n: Any) -> Any:
            self.depth += 1
            self.generic_visit(n)
            self.depth -= 1
            if self.depth or not any(
                isinstance(m, ast.Name) and m.id == hold for part in deferred(n) for m in ast.walk(part)
            ):
                return n
            params = [ast.arg(hold)]
            call_args: list[ast.expr] = [ast.Name(hold, ast.Load())]
            if isinstance(n, ast.GeneratorExp):
                g0 = n.generators[0]
                params.append(ast.arg("_af_gi"))
                call_args.append(rt_call("builtin_iter", g0.iter))
                g0.iter = ast.Name("_af_gi", ast.Load())
            args = ast.arguments(
                posonlyargs=[], args=params, vararg=None, kwonlyargs=[], kw_defaults=[],
                kwarg=None, defaults=[],
            )
            return ast.copy_location(ast.Call(ast.Lambda(args, n), call_args, []), n)

        def visit_Lambda(self, node: ast.Lambda) -> Any:
            return self.wrap(node)

        def visit_GeneratorExp(self, node: ast.GeneratorExp) -> Any:
            return self.wrap(node)

    Hold().visit(e)
    return {user[v] for v in captured}


_IOPS = {
    ast.Add: "iadd",
    ast.Sub: "isub",
    ast.Mult: "imul",
    ast.MatMult: "imatmul",
    ast.Div: "itruediv",
    ast.FloorDiv: "ifloordiv",
    ast.Mod: "imod",
    ast.Pow: "ipow",
    ast.LShift: "ilshift",
    ast.RShift: "irshift",
    ast.BitOr: "ior",
    ast.BitXor: "ixor",
    ast.BitAnd: "iand",
}


def _slots(e: ast.AST) -> list[tuple[Any, Any, str]]:
    """The child expressions of ``e`` in evaluation order, as (get, put, kind) triples.

    ``kind`` says what CPython does with the value at its position, besides evaluating it:
    ``"star_list"``/``"star_set"`` unpack it into the display (``*v``), ``"dstar"`` merges it into
    the dict display (``**v``); ``"plain"`` does nothing more.
    """
    out: list[tuple[Any, Any, str]] = []

    def field_slot(node: Any, name: str) -> None:
        v = getattr(node, name)
        if v is None:
            return
        if isinstance(v, ast.Slice):
            v = copy.copy(v)
            setattr(node, name, v)
            descend(v)
            return
        out.append((lambda: getattr(node, name), lambda x: setattr(node, name, x), "plain"))

    def list_slot(lst: list[Any], i: int, star: str = "plain", kind: str = "plain") -> None:
        v = lst[i]
        if isinstance(v, ast.Starred):
            v = copy.copy(v)
            lst[i] = v
            out.append((lambda: v.value, lambda x: setattr(v, "value", x), star))
            return
        if isinstance(v, ast.Slice):
            v = copy.copy(v)
            lst[i] = v
            descend(v)
            return
        out.append((lambda: lst[i], lambda x: lst.__setitem__(i, x), kind))

    def descend(node: Any) -> None:
        if isinstance(node, ast.Dict):
            node.keys = list(node.keys)
            node.values = list(node.values)
            for i in range(len(node.keys)):
                if node.keys[i] is not None:
                    list_slot(node.keys, i)
                    list_slot(node.values, i)
                else:
                    list_slot(node.values, i, kind="dstar")
            return
        star = "star_set" if isinstance(node, ast.Set) else "star_list"
        for name, v in ast.iter_fields(node):
            if isinstance(v, ast.expr):
                field_slot(node, name)
            elif isinstance(v, list):
                lst = list(v)
                setattr(node, name, lst)
                for i, x in enumerate(lst):
                    if isinstance(x, ast.expr):
                        list_slot(lst, i, star)

    descend(e)
    return out
