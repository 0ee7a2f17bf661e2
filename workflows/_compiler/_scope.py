"""Scope analysis and the name rewriter.

Workflow locals live on the frame object, so every reference to one in the workflow's own scope
becomes ``_af_f.<name>`` (or a block-local copy, in optimised runs), and every reference from a
nested function, lambda or class becomes ``_af_f.<name>`` too: closures capture the frame, not a
cell, which keeps late binding native and the closure picklable.

``symtable`` is not used: since Python 3.12 it no longer reports comprehension scopes (PEP 709).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from typing import Any

FRAME = "_af_f"
RT = "_af_rt"
SYNTH = "_af_s"  # prefix of synthetic frame locals (desugared with/comprehensions)
# A workflow local ``x`` is the frame attribute ``v_x``: user names never collide with the
# frame's own attributes (``__dict__``, ``__reduce__``, ``__class__``, ...) or its internal slots
# (which start with ``_af_``), and the attribute never starts with ``__``, so no class body
# mangles it.
LOCAL = "v_"


def lkey(name: str) -> str:
    """The frame attribute holding the workflow-scope name ``name``."""
    return name if name.startswith("_af_") else LOCAL + name


def user_name(key: str) -> str:
    """The workflow-scope name held by the frame attribute ``key`` (inverse of ``lkey``)."""
    return key[len(LOCAL):] if key.startswith(LOCAL) else key


_COMP_VAR = re.compile(r"_af_s\d+_(.+)")


def variable_of(key: str) -> str | None:
    """The user's variable a frame attribute holds (a local, or a lowered comprehension's
    variable), or None for the compiler's own slots."""
    if key.startswith(LOCAL):
        return key[len(LOCAL):]
    m = _COMP_VAR.fullmatch(key)
    return m.group(1) if m else None

COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def frame_attr(name: str, ctx: ast.expr_context | None = None) -> ast.Attribute:
    """``_af_f.<name>``."""
    return ast.Attribute(ast.Name(FRAME, ast.Load()), name, ctx or ast.Load())


def rt_attr(name: str) -> ast.Attribute:
    """``_af_rt.<name>``."""
    return ast.Attribute(ast.Name(RT, ast.Load()), name, ast.Load())


def rt_call(name: str, *args: ast.expr) -> ast.Call:
    """``_af_rt.<name>(*args)``."""
    return ast.Call(rt_attr(name), list(args), [])


def frame_name() -> ast.Name:
    """``_af_f``."""
    return ast.Name(FRAME, ast.Load())


def target_names(t: ast.AST) -> list[str]:
    """Names bound by an assignment target."""
    out = []
    for n in ast.walk(t):
        if isinstance(n, ast.Name):
            out.append(n.id)
    return out


def pattern_captures(p: ast.AST) -> list[str]:
    """Names captured by a match pattern."""
    out = []
    for n in ast.walk(p):
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            out.append(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.append(n.rest)
    return list(dict.fromkeys(out))


class Bindings(ast.NodeVisitor):
    """Names bound in one scope (not descending into nested scopes)."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.first: dict[str, ast.AST] = {}  # name -> its earliest binding node (for warnings)

    def scan(self, body: Iterable[ast.AST]) -> Bindings:
        for s in body:
            self.visit(s)
        return self

    def _add(self, name: str, node: ast.AST) -> None:
        self.bound.add(name)
        old = self.first.get(name)
        if old is None or _pos(node) < _pos(old):
            self.first[name] = node

    def visit_Name(self, n: ast.Name) -> None:
        if isinstance(n.ctx, (ast.Store, ast.Del)):
            self._add(n.id, n)

    def _def(self, node: Any) -> None:
        self._add(node.name, node)
        for d in node.decorator_list:
            self.visit(d)
        a = node.args
        for d in a.defaults + [k for k in a.kw_defaults if k is not None]:
            self.visit(d)
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
            if arg is not None and arg.annotation is not None:
                self.visit(arg.annotation)
        if node.returns is not None:
            self.visit(node.returns)

    visit_FunctionDef = visit_AsyncFunctionDef = _def

    def visit_Lambda(self, n: ast.Lambda) -> None:
        for d in n.args.defaults + [k for k in n.args.kw_defaults if k is not None]:
            self.visit(d)

    def visit_ClassDef(self, n: ast.ClassDef) -> None:
        self._add(n.name, n)
        for x in n.decorator_list + n.bases + [k.value for k in n.keywords]:
            self.visit(x)

    def _comp(self, node: Any) -> None:
        self.visit(node.generators[0].iter)
        for sub in ast.walk(node):
            if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                self._add(sub.target.id, sub.target)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comp

    def visit_Global(self, n: ast.Global) -> None:
        self.globals.update(n.names)

    def visit_Nonlocal(self, n: ast.Nonlocal) -> None:
        self.nonlocals.update(n.names)

    def visit_Import(self, n: ast.Import) -> None:
        for a in n.names:
            self._add(a.asname or a.name.split(".")[0], n)

    def visit_ImportFrom(self, n: ast.ImportFrom) -> None:
        for a in n.names:
            if a.name != "*":
                self._add(a.asname or a.name, n)

    def visit_ExceptHandler(self, n: ast.ExceptHandler) -> None:
        if n.name:
            self._add(n.name, n)
        self.generic_visit(n)

    def visit_MatchAs(self, n: ast.MatchAs) -> None:
        if n.name:
            self._add(n.name, n)
        self.generic_visit(n)

    def visit_MatchStar(self, n: ast.MatchStar) -> None:
        if n.name:
            self._add(n.name, n)

    def visit_MatchMapping(self, n: ast.MatchMapping) -> None:
        if n.rest:
            self._add(n.rest, n)
        self.generic_visit(n)

    def visit_TypeAlias(self, n: Any) -> None:  # 3.12+
        self._add(n.name.id, n)


def _pos(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def arg_names(a: ast.arguments) -> list[str]:
    """Parameter names of an ``arguments`` node, in order."""
    out = [x.arg for x in a.posonlyargs + a.args]
    if a.vararg:
        out.append(a.vararg.arg)
    out += [x.arg for x in a.kwonlyargs]
    if a.kwarg:
        out.append(a.kwarg.arg)
    return out


class Scope:
    __slots__ = ("kind", "bound", "globals", "nonlocals")

    def __init__(self, kind: str, bound: set[str], glob: set[str], nonloc: set[str]) -> None:
        self.kind = kind
        self.bound = bound
        self.globals = glob
        self.nonlocals = nonloc


def _func_scope(n: Any, kind: str = "func") -> Scope:
    b = Bindings()
    if isinstance(n, ast.Lambda):
        b.visit(n.body)
    else:
        b.scan(n.body)
    bound = (b.bound | set(arg_names(n.args))) - b.globals - b.nonlocals
    return Scope(kind, bound, b.globals, b.nonlocals)


def _comp_scope(n: Any) -> Scope:
    bound: set[str] = set()
    for g in n.generators:
        bound.update(target_names(g.target))
    return Scope("genexp" if isinstance(n, ast.GeneratorExp) else "comp", bound, set(), set())


LeapFn = Callable[[str, ast.expr | None, ast.AST], list[ast.stmt]]


class Rewriter(ast.NodeTransformer):
    """Rewrite names of workflow locals to frame attributes, and escaping leaps to block exits.

    Args:
        locals_: the workflow's frame locals.
        cached: names kept as block locals in this run (loaded before, written back after).
        leap: builds the statements for an escaping ``break``/``continue``/``return``.
    """

    def __init__(
        self,
        locals_: set[str],
        cached: set[str] | frozenset[str] = frozenset(),
        leap: LeapFn | None = None,
        *,
        lazy_annotations: bool = False,
    ) -> None:
        self.locals = locals_
        # ``from __future__ import annotations``: annotations are kept as the text of their
        # source, never evaluated, so they are left as written (not rewritten to frame reads).
        self.lazy_annotations = lazy_annotations
        self.cached = cached
        self.leap = leap
        self.scopes: list[Scope] = []
        self.classes: list[str] = []  # names of the class bodies being rewritten (mangling)
        self.loop_depth = 0
        self.captured: set[str] = set()
        self.used: set[str] = set()  # cached names read or written
        self.written: set[str] = set()  # cached names bound or deleted
        self.uid = 0

    # -- resolution

    def is_local(self, name: str) -> bool:
        return name in self.locals or name.startswith(SYNTH)

    def resolve(self, name: str, walrus: bool = False) -> str | None:
        """``"frame"``, ``"cached"`` or None (leave the name alone)."""
        nested = False
        for i, sc in enumerate(reversed(self.scopes)):
            if sc.kind == "class":
                if i and name == "__class__":
                    # A function in a class body gets the class's implicit ``__class__`` cell
                    # (what zero-argument super() uses), whatever the workflow binds.
                    return None
                if i == 0 and name in sc.bound:
                    return None
                if name in sc.globals:
                    return None
                nested = True
                continue
            if sc.kind in ("comp", "genexp"):
                if walrus:
                    continue
                if name in sc.bound:
                    return None
                if sc.kind == "genexp":
                    nested = True
                continue
            if name in sc.globals:
                return None
            if name in sc.nonlocals:
                nested = True
                continue
            if name in sc.bound:
                return None
            nested = True
        if not self.is_local(name):
            return None
        if nested:
            self.captured.add(name)
            return "frame"
        if name in self.cached:
            self.used.add(name)
            return "cached"
        return "frame"

    def at_top(self) -> bool:
        return not self.scopes

    def in_workflow_body(self) -> bool:
        return all(s.kind in ("comp",) for s in self.scopes)

    # -- expressions

    def visit_Name(self, n: ast.Name) -> Any:
        name = self.mangle(n.id)
        r = self.resolve(name)
        if r == "frame":
            return ast.copy_location(frame_attr(lkey(name), n.ctx), n)
        if r == "cached" and not isinstance(n.ctx, ast.Load):
            self.written.add(name)
        return n

    def mangle(self, name: str) -> str:
        """``__x`` inside a class body (and what it encloses) is ``_Class__x``, as CPython
        compiles it; a workflow local of that (mangled) name is what it refers to."""
        if not name.startswith("__") or name.endswith("__") or not self.classes:
            return name
        cls = self.classes[-1].lstrip("_")
        return f"_{cls}{name}" if cls else name

    def visit_NamedExpr(self, n: ast.NamedExpr) -> Any:
        n.value = self.visit(n.value)
        name = n.target.id
        r = self.resolve(name, walrus=True)
        if r == "frame":
            return ast.copy_location(
                rt_call("setlocal", frame_name(), ast.Constant(lkey(name)), n.value), n
            )
        if r == "cached":
            self.written.add(name)
        return n

    def visit_Lambda(self, n: ast.Lambda) -> Any:
        n.args = self._visit_args_outer(n.args)
        self.scopes.append(_func_scope(n))
        saved = self.loop_depth, self.leap
        self.loop_depth, self.leap = 0, None
        n.body = self.visit(n.body)
        self.loop_depth, self.leap = saved
        self.scopes.pop()
        return n

    def _visit_args_outer(self, a: ast.arguments) -> ast.arguments:
        a.defaults = [self.visit(d) for d in a.defaults]
        a.kw_defaults = [self.visit(d) if d is not None else None for d in a.kw_defaults]
        return a

    def _comp(self, node: Any) -> Any:
        gens = node.generators
        gens[0].iter = self.visit(gens[0].iter)
        self.scopes.append(_comp_scope(node))
        for i, g in enumerate(gens):
            g.target = self.visit(g.target)
            if i:
                g.iter = self.visit(g.iter)
            g.ifs = [self.visit(x) for x in g.ifs]
        if isinstance(node, ast.DictComp):
            node.key = self.visit(node.key)
            node.value = self.visit(node.value)
        else:
            node.elt = self.visit(node.elt)
        self.scopes.pop()
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comp

    # -- nested definitions

    def _bind_stmt(self, node: ast.stmt, name: str) -> Any:
        """After a statement that binds ``name`` natively, copy it to the frame if needed."""
        if not self.in_workflow_body():
            return node
        r = self.resolve(name)
        if r == "frame":
            a = ast.Assign([frame_attr(lkey(name), ast.Store())], ast.Name(name, ast.Load()))
            return [node, _loc(a, node)]
        if r == "cached":
            self.written.add(name)
        return node

    def _push_type_params(self, n: Any) -> bool:
        """Enter the annotation scope of a generic def, class or type alias (3.12+), if any.

        Its type parameters shadow workflow locals; their bounds and defaults are evaluated in it.
        """
        params = getattr(n, "type_params", None)
        if not params:
            return False
        self.scopes.append(Scope("func", {p.name for p in params}, set(), set()))
        for p in params:
            for field in ("bound", "default_value"):
                v = getattr(p, field, None)
                if v is not None:
                    setattr(p, field, self.visit(v))
        return True

    def visit_TypeAlias(self, n: Any) -> Any:
        # ``type X = value`` (3.12+): the value is evaluated lazily in an annotation scope, so
        # workflow locals it names are read from the frame when it is evaluated (late binding,
        # as for a closure). X itself is bound natively, then copied to the frame.
        pushed = self._push_type_params(n)
        self.scopes.append(Scope("func", set(), set(), set()))
        n.value = self.visit(n.value)
        self.scopes.pop()
        if pushed:
            self.scopes.pop()
        return self._bind_stmt(n, n.name.id)

    def _def(self, node: Any) -> Any:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args = self._visit_args_outer(node.args)
        pushed = self._push_type_params(node)
        for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs + [node.args.vararg, node.args.kwarg]:
            if arg is not None and arg.annotation is not None:
                arg.annotation = self._annotation(arg.annotation)
        if node.returns is not None:
            node.returns = self._annotation(node.returns)
        sc = _func_scope(node)
        drop = self._frame_nonlocals(sc.nonlocals)
        self.scopes.append(sc)
        saved = self.loop_depth, self.leap
        self.loop_depth, self.leap = 0, None
        node.body = self._scope_body(node.body, drop)
        self.loop_depth, self.leap = saved
        self.scopes.pop()
        if pushed:
            self.scopes.pop()
        return self._bind_stmt(node, node.name)

    def _frame_nonlocals(self, names: set[str]) -> set[str]:
        """The ``nonlocal`` names of a new scope that are workflow locals (held by the frame)."""
        return {x for x in names if self._resolves_outside_to_frame(x)}

    def _scope_body(self, stmts: list[ast.stmt], drop: set[str]) -> list[ast.stmt]:
        """Rewrite a nested scope's body; ``nonlocal`` of names in ``drop`` goes (the frame
        holds them, so there is no cell to declare)."""
        body: list[ast.stmt] = []
        for s in stmts:
            if isinstance(s, ast.Nonlocal) and drop:
                keep = [x for x in s.names if x not in drop]
                if keep:
                    s.names = keep
                    body.append(s)
                else:
                    body.append(_loc(ast.Pass(), s))
                continue
            r = self.visit(s)
            body.extend(r if isinstance(r, list) else [r])
        return body

    def _resolves_outside_to_frame(self, name: str) -> bool:
        for sc in reversed(self.scopes):
            if sc.kind == "func" and (name in sc.bound or name in sc.globals):
                return False
        return self.is_local(name)

    visit_FunctionDef = visit_AsyncFunctionDef = _def

    def visit_ClassDef(self, n: ast.ClassDef) -> Any:
        n.decorator_list = [self.visit(d) for d in n.decorator_list]
        pushed = self._push_type_params(n)
        n.bases = [self.visit(b) for b in n.bases]
        for k in n.keywords:
            k.value = self.visit(k.value)
        b = Bindings().scan(n.body)
        drop = self._frame_nonlocals(b.nonlocals)
        self.scopes.append(Scope("class", b.bound - b.globals - b.nonlocals, b.globals, b.nonlocals))
        saved = self.loop_depth, self.leap
        self.loop_depth, self.leap = 0, None
        self.classes.append(n.name)
        n.body = self._scope_body(n.body, drop)
        self.classes.pop()
        self.loop_depth, self.leap = saved
        self.scopes.pop()
        if pushed:
            self.scopes.pop()
        return self._bind_stmt(n, n.name)

    # -- statements binding names without an assignable target

    def visit_Import(self, n: ast.Import) -> Any:
        out: Any = n
        for a in n.names:
            name = a.asname or a.name.split(".")[0]
            r = self._bind_stmt(ast.Pass(), name)
            if isinstance(r, list):
                out = (out if isinstance(out, list) else [out]) + [_loc(r[1], n)]
        return out

    def visit_ImportFrom(self, n: ast.ImportFrom) -> Any:
        out: Any = n
        for a in n.names:
            name = a.asname or a.name
            r = self._bind_stmt(ast.Pass(), name)
            if isinstance(r, list):
                out = (out if isinstance(out, list) else [out]) + [_loc(r[1], n)]
        return out

    def visit_Global(self, n: ast.Global) -> Any:
        if self.at_top():
            return _loc(ast.Pass(), n)  # declared once per block function instead
        return n

    def _annotation(self, a: ast.expr) -> Any:
        return a if self.lazy_annotations else self.visit(a)

    def visit_AnnAssign(self, n: ast.AnnAssign) -> Any:
        if not self.at_top():
            n.target = self.visit(n.target)
            n.annotation = self._annotation(n.annotation)
            if n.value is not None:
                n.value = self.visit(n.value)
            return n
        # Annotations of locals are never evaluated; the target may become an attribute.
        if n.value is None:
            # ``obj.a: T`` evaluates obj; ``d[k]: T`` evaluates d and k (each part of a slice
            # on its own); the annotation is never evaluated in a function.
            parts = annotated_target_parts(n.target)
            if not parts:
                return _loc(ast.Pass(), n)
            return [_loc(ast.Expr(self.visit(p)), n) for p in parts]
        a = ast.Assign([n.target], n.value)
        return self.visit(_loc(a, n))

    def visit_Delete(self, n: ast.Delete) -> Any:
        if not self.in_workflow_body():
            return self._delete_nested(n)
        out: list[ast.stmt] = []
        for t in n.targets:
            if isinstance(t, ast.Name):
                r = self.resolve(t.id)
                if r == "frame":
                    out.append(_loc(ast.Expr(rt_call("delete", frame_name(), ast.Constant(lkey(t.id)))), n))
                    continue
                if r == "cached":
                    self.written.add(t.id)
                out.append(_loc(ast.Delete([t]), n))
            elif isinstance(t, (ast.Tuple, ast.List)):
                out.extend(self.visit_Delete(_loc(ast.Delete(list(t.elts)), n)))
            else:
                out.append(_loc(ast.Delete([self.visit(t)]), n))
        return out

    def _delete_nested(self, n: ast.Delete) -> Any:
        # ``del x`` in a nested function of a workflow local (``nonlocal x``): through the
        # runtime, which raises a free variable's NameError when it is unbound.
        out: list[ast.stmt] = []
        for t in n.targets:
            if isinstance(t, ast.Name) and self.resolve(self.mangle(t.id)) == "frame":
                key = lkey(self.mangle(t.id))
                out.append(_loc(ast.Expr(rt_call("delete_free", frame_name(), ast.Constant(key))), n))
            elif isinstance(t, (ast.Tuple, ast.List)):
                out.extend(self._delete_nested(_loc(ast.Delete(list(t.elts)), n)))
            else:
                out.append(_loc(ast.Delete([self.visit(t)]), n))
        return out

    def visit_ExceptHandler(self, h: ast.ExceptHandler) -> Any:
        if h.type is not None:
            h.type = self.visit(h.type)
        body = []
        for s in h.body:
            r = self.visit(s)
            body.extend(r if isinstance(r, list) else [r])
        h.body = body
        if h.name and self.in_workflow_body():
            r = self.resolve(h.name)
            if r == "frame":
                self.uid += 1
                tmp = f"_af_h{self.uid}"
                name = h.name
                h.name = tmp
                copy_in = _loc(
                    ast.Assign([frame_attr(lkey(name), ast.Store())], ast.Name(tmp, ast.Load())), h
                )
                fin = _loc(ast.Expr(rt_call("unbind", frame_name(), ast.Constant(lkey(name)))), h)
                h.body = [copy_in, _loc(ast.Try(h.body, [], [], [fin]), h)]
            elif r == "cached":
                self.written.add(h.name)
        return h

    def visit_match_case(self, c: ast.match_case) -> Any:
        caps = pattern_captures(c.pattern)
        ren: dict[str, str] = {}
        if self.in_workflow_body():
            for name in caps:
                r = self.resolve(name)
                if r == "frame":
                    self.uid += 1
                    ren[name] = f"_af_p{self.uid}"
                elif r == "cached":
                    self.written.add(name)
        c.pattern = self._pattern(c.pattern, ren)
        guard = self.visit(c.guard) if c.guard is not None else None
        if ren:
            names = ast.Tuple([ast.Constant(lkey(k)) for k in ren], ast.Load())
            vals = ast.Tuple([ast.Name(v, ast.Load()) for v in ren.values()], ast.Load())
            b = rt_call("bind", frame_name(), names, vals)
            guard = b if guard is None else ast.BoolOp(ast.And(), [b, guard])
            guard = _loc(guard, c.pattern)
        c.guard = guard
        body = []
        for s in c.body:
            r = self.visit(s)
            body.extend(r if isinstance(r, list) else [r])
        c.body = body
        return c

    def _pattern(self, p: ast.AST, ren: dict[str, str]) -> Any:
        return rewrite_pattern(p, ren, self.visit)

    # -- leaps

    def _loop(self, node: Any) -> Any:
        if isinstance(node, ast.While):
            node.test = self.visit(node.test)
        else:
            node.target = self.visit(node.target)
            node.iter = self.visit(node.iter)
        self.loop_depth += 1
        body = []
        for s in node.body:
            r = self.visit(s)
            body.extend(r if isinstance(r, list) else [r])
        node.body = body
        self.loop_depth -= 1
        orelse = []
        for s in node.orelse:
            r = self.visit(s)
            orelse.extend(r if isinstance(r, list) else [r])
        node.orelse = orelse
        return node

    visit_For = visit_While = visit_AsyncFor = _loop

    def visit_Break(self, n: ast.Break) -> Any:
        if self.leap is not None and self.at_top() and self.loop_depth == 0:
            return self.leap("break", None, n)
        return n

    def visit_Continue(self, n: ast.Continue) -> Any:
        if self.leap is not None and self.at_top() and self.loop_depth == 0:
            return self.leap("continue", None, n)
        return n

    def visit_Return(self, n: ast.Return) -> Any:
        value = self.visit(n.value) if n.value is not None else None
        if self.leap is not None and self.at_top():
            return self.leap("return", value, n)
        n.value = value
        return n


def annotated_target_parts(t: ast.expr) -> list[ast.expr]:
    """What ``target: T`` (without a value) evaluates, in order, as CPython does."""
    if isinstance(t, ast.Attribute):
        return [t.value]
    if isinstance(t, ast.Subscript):
        out = [t.value]

        def sub(s: ast.expr) -> None:
            if isinstance(s, ast.Slice):
                for x in (s.lower, s.upper, s.step):
                    if x is not None:
                        out.append(x)
            elif isinstance(s, ast.Tuple):
                for x in s.elts:
                    sub(x)
            else:
                out.append(s)

        sub(t.slice)
        return out
    return []


def _loc(node: Any, src: ast.AST) -> Any:
    """Give ``node`` and its location-less descendants the location of ``src``."""
    return fill_locations(node, src)


def fill_locations(node: Any, src: ast.AST) -> Any:
    """Copy ``src``'s position onto every node under ``node`` that has none."""
    lineno = getattr(src, "lineno", 1)
    col = getattr(src, "col_offset", 0)
    end_lineno = getattr(src, "end_lineno", lineno) or lineno
    end_col = getattr(src, "end_col_offset", col) or col
    if end_lineno != lineno:
        # Generated code stands for its statement's first line, without columns. Spanning the
        # statement's lines, an attribute load would be reported at the last one (the
        # interpreter's rule for multi-line attributes since 3.11), unlike the native code.
        col, end_lineno, end_col = -1, lineno, -1

    def walk(n: Any, ln: int, c: int, el: int, ec: int) -> None:
        if "lineno" in n._attributes:
            if getattr(n, "lineno", None) is None:
                n.lineno, n.col_offset, n.end_lineno, n.end_col_offset = ln, c, el, ec
            else:
                ln, c = n.lineno, n.col_offset
                el = getattr(n, "end_lineno", None) or ln
                end_col = getattr(n, "end_col_offset", None)
                ec = c if end_col is None else end_col
        for child in ast.iter_child_nodes(n):
            walk(child, ln, c, el, ec)

    walk(node, lineno, col, end_lineno, end_col)
    return node


def rewrite_pattern(p: ast.AST, ren: dict[str, str], rw: Any) -> Any:
    """Rename a match pattern's captures by ``ren`` and rewrite its value expressions with ``rw``."""
    for n in ast.walk(p):
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name in ren:
            n.name = ren[n.name]
        elif isinstance(n, ast.MatchMapping) and n.rest in ren:
            n.rest = ren[n.rest]
        elif isinstance(n, ast.MatchValue):
            n.value = rw(n.value)
        elif isinstance(n, ast.MatchClass):
            n.cls = rw(n.cls)
        elif isinstance(n, ast.MatchMapping):
            n.keys = [rw(k) for k in n.keys]
    return p
