"""Decoration-time checks: every construct a workflow cannot use, each with what to write instead
(``check`` raises them as one CompileError), and the CompileWarnings of constructs that may bite
later (``warn``)."""

from __future__ import annotations

import ast
import builtins
import random
import sys
import types
import warnings
from typing import Any

from .._errors import CompileError, CompileWarning
from ._lower import _awaits_only_in_outer_iterable, has_await
from ._scope import Bindings, arg_names

Problem = tuple[ast.AST, str]

_COMP_NAMES = {
    ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression",
}



class Validator(ast.NodeVisitor):
    """Collects every problem of one workflow (its own scope and what runs in it)."""

    def __init__(self, fn_node: ast.AsyncFunctionDef, locals_: set[str], freevars: tuple[str, ...],
                 enclosing: str | None) -> None:
        self.fn = fn_node
        self.locals = locals_
        self.freevars = set(freevars) - {"__class__"}
        # A workflow written as a method in which something reads the class cell (``__class__``,
        # zero-argument ``super()``): the function CPython compiled has it as a free variable.
        self.class_cell = "__class__" in freevars
        self.enclosing = enclosing
        self.problems: list[Problem] = []
        self.depth = 0  # nesting in defs/lambdas/classes inside the workflow
        self.nested: list[Any] = []  # those defs, lambdas and classes, innermost last
        self.reported_free: set[str] = set()
        self.called: set[int] = set()  # the Name nodes that are called (locals(), dir()...)
        # The names of the functions defined in the workflow (def, or a lambda assigned).
        self.functions = {
            d.name for d in ast.walk(fn_node) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d is not fn_node
        } | {
            t.id for a in ast.walk(fn_node) if isinstance(a, ast.Assign) and isinstance(a.value, ast.Lambda)
            for t in a.targets if isinstance(t, ast.Name)
        }

    def add(self, node: ast.AST, msg: str) -> None:
        self.problems.append((node, msg))

    def run(self) -> list[Problem]:
        for name in _param_names(self.fn.args):
            if name.startswith("_af_"):
                self.add(self.fn, f"parameter name {name!r} is reserved (names starting with _af_ are used by the workflow compiler); rename it")
        for s in self.fn.body:
            self.visit(s)
        self.problems.sort(key=lambda p: (getattr(p[0], "lineno", 0), getattr(p[0], "col_offset", 0)))
        return self.problems

    # -- workflow-scope constructs

    def visit_Yield(self, node: ast.AST) -> None:
        if self.depth == 0:
            self.add(node, "'yield' makes this an async generator, which cannot be checkpointed; a workflow returns one value: collect results in a list and return it, or report progress with send()/reducer()")
        self.generic_visit(node)

    visit_YieldFrom = visit_Yield

    def visit_AsyncFor(self, n: ast.AsyncFor) -> None:
        if self.depth == 0:
            self.add(n, "'async for' cannot be used in a workflow: an async iterator cannot be checkpointed; loop with a plain 'for' or 'while' and await commands in the body")
        self.generic_visit(n)

    def visit_AsyncWith(self, n: ast.AsyncWith) -> None:
        if self.depth == 0:
            self.add(n, "'async with' cannot be used in a workflow: an async context manager cannot be held across a suspension; use try/finally and await commands in the finally")
        self.generic_visit(n)

    def _comp(self, node: Any) -> None:
        if self.depth == 0:
            for g in node.generators:
                if g.is_async:
                    self.add(node, f"'async for' in a {_COMP_NAMES[type(node)]} cannot be used in a workflow: an async iterator cannot be checkpointed; use a plain for loop that awaits commands")
                    break
            if isinstance(node, ast.GeneratorExp) and has_await(node) and not _awaits_only_in_outer_iterable(node):
                self.add(node, "a generator expression containing 'await' cannot be checkpointed (it is an async generator); use a list comprehension [...] or a for loop instead")
            for g in node.generators:
                if has_await(g.target):
                    self.add(g.target, f"'await' in the target of a {_COMP_NAMES[type(node)]}'s for is not supported; await into a variable before it and use the variable in the target")
        self.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comp

    def visit_Nonlocal(self, n: ast.Nonlocal) -> None:
        if self.depth == 0:
            self.add(n, f"'nonlocal {', '.join(n.names)}' at workflow level is not allowed: a workflow cannot share variables with an enclosing function; pass the values as arguments")
        self.generic_visit(n)

    def visit_Try(self, n: ast.Try) -> None:
        for h in n.handlers:
            if h.type is not None and has_await(h.type):
                self.add(h.type, "'await' in an except clause's exception type is not supported; await the value into a variable before the try and name the variable in the except clause")
        self.generic_visit(n)

    def visit_TryStar(self, n: Any) -> None:
        if self.depth == 0 and has_await(n):
            self.add(n, "'await' inside try/except* is not supported in a workflow; use try/except ExceptionGroup and handle its .exceptions, or move the awaits out of the try")
        self.generic_visit(n)

    def visit_Assign(self, n: ast.Assign) -> None:
        for t in n.targets:
            self._target(t)
        self.generic_visit(n)

    def visit_With(self, n: ast.With) -> None:
        for item in n.items:
            if item.optional_vars is not None:
                self._target(item.optional_vars)
        self.generic_visit(n)

    def visit_For(self, n: ast.For) -> None:
        if has_await(n.target):
            self.add(n.target, "'await' in a for-loop target is not supported; await into a variable first")
        self.generic_visit(n)

    def visit_Delete(self, n: ast.Delete) -> None:
        for t in n.targets:
            if isinstance(t, (ast.Tuple, ast.List)) and has_await(t):
                self.add(t, "'await' inside a tuple of del targets is not supported; await into a variable first and write one del per target")
        self.generic_visit(n)

    def _target(self, t: ast.expr) -> None:
        if isinstance(t, (ast.Tuple, ast.List, ast.Starred)) and has_await(t):
            self.add(t, "'await' inside a tuple or list assignment target is not supported; await into a variable first and use the variable in the target")

    def visit_TypeAlias(self, n: Any) -> None:  # 3.12+
        if has_await(n):
            self.add(n, f"'await' cannot be used in the type alias {n.name.id!r}: its value is evaluated lazily, outside the workflow's steps; await into a variable before the 'type' statement and use the variable in the alias")
        self.generic_visit(n)

    # -- nested definitions

    def _nested_header(self, n: Any, what: str) -> None:
        if self.depth:
            return
        for d in n.decorator_list:
            if has_await(d):
                self.add(d, f"'await' in a decorator of the nested {what} {n.name!r} is not supported; await into a variable first and decorate with the variable")
        if isinstance(n, ast.ClassDef):
            for b in n.bases:
                if has_await(b):
                    self.add(b, f"'await' in the bases of the nested class {n.name!r} is not supported; await into a variable first and use the variable as the base")
            for k in n.keywords:
                if has_await(k.value):
                    kw = f"'{k.arg}='" if k.arg else "'**'"
                    self.add(k.value, f"'await' in the class keyword {kw} of the nested class {n.name!r} is not supported; await into a variable first and pass the variable")
            return
        a = n.args
        for d in a.defaults + [k for k in a.kw_defaults if k is not None]:
            if has_await(d):
                self.add(d, f"'await' in a default argument of the nested {what} {n.name!r} is not supported; await into a variable first and use the variable as the default")
        anns = [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None and x.annotation is not None]
        if n.returns is not None:
            anns.append(n.returns)
        for x in anns:
            if any(isinstance(s, ast.Await) for s in ast.walk(x)):
                self.add(x, f"'await' in an annotation of the nested {what} {n.name!r} is not supported; annotations must not suspend, use a plain expression")

    def _def(self, node: Any) -> None:
        if isinstance(node, ast.AsyncFunctionDef):
            self.add(node, f"a nested 'async def' ({node.name!r}) cannot run inside a workflow: its awaits would not be workflow steps; make it a module-level @workflow and 'await {node.name}(...)' (it runs inline, as a subroutine), or make it a plain def")
        self._nested_header(node, "function")
        self.depth += 1
        self.nested.append(node)
        self.generic_visit(node)
        self.nested.pop()
        self.depth -= 1

    def _frame_reader_in_function(self, n: ast.Call, name: str, nargs: int) -> None:
        """``locals()``, ``vars()``, ``dir()``, ``eval(src)`` or ``exec(src)`` in a function
        made in the workflow: natively they see the workflow variables it reads (its cells);
        compiled, it reads them from the workflow's frame, which they would show instead."""
        if name in ("vars", "dir") and n.args or name in ("eval", "exec") and nargs >= 2:
            return
        fn = self.nested[-1]
        if isinstance(fn, ast.ClassDef):
            return  # a class body's namespace: the same either way
        used = sorted(_workflow_names_read(fn, self.locals))
        if not used:
            return
        what = f"the function {fn.name!r}" if not isinstance(fn, ast.Lambda) else "a lambda"
        call = f"{name}()" if name in ("locals", "vars", "dir") else f"{name}() without explicit globals and locals"
        self.add(n, f"{call} in {what}, made in the workflow, cannot see the workflow variables it uses ({', '.join(map(repr, used))}): they live in the workflow's checkpointed frame, not in cells of the function; name the variables you need explicitly (e.g. build a dict), or pass explicit namespaces")

    visit_FunctionDef = visit_AsyncFunctionDef = _def

    def visit_ClassDef(self, n: ast.ClassDef) -> None:
        self._nested_header(n, "class")
        self.depth += 1
        self.nested.append(n)
        self.generic_visit(n)
        self.nested.pop()
        self.depth -= 1

    def visit_Lambda(self, n: ast.Lambda) -> None:
        if self.depth == 0:
            a = n.args
            for d in a.defaults + [k for k in a.kw_defaults if k is not None]:
                if has_await(d):
                    self.add(d, "'await' in a default argument of a lambda is not supported; await into a variable first and use the variable as the default")
        self.depth += 1
        self.nested.append(n)
        self.generic_visit(n)
        self.nested.pop()
        self.depth -= 1

    # -- names and calls

    def visit_Name(self, n: ast.Name) -> None:
        if n.id.startswith("_af_"):
            self.add(n, f"name {n.id!r} is reserved (names starting with _af_ are used by the workflow compiler); rename it")
        elif n.id in self.freevars and n.id not in self.reported_free:
            self.reported_free.add(n.id)
            where = f" {self.enclosing!r}" if self.enclosing else ""
            self.add(n, f"the workflow closes over {n.id!r}, a variable of the enclosing function{where}: a continuation cannot capture it; pass it as an argument, or make it a module-level global")
        elif n.id == "__class__" and self.depth == 0 and n.id not in self.locals:
            self.add(n, "__class__ cannot be used in a workflow: its body does not run in the frame of the method it is written as, whose class cell __class__ reads; name the class (MyClass) instead")
        elif n.id == "__class__" and self._reads_method_class_cell():
            self.add(n, "__class__ cannot be used in a function made in a workflow written as a method: the workflow's code does not run in the method's frame, whose class cell __class__ reads; name the class (MyClass) instead")
        elif (
            n.id == "locals" and self.depth == 0 and isinstance(n.ctx, ast.Load)
            and id(n) not in self.called and n.id not in self.locals
        ):
            self.add(n, "locals cannot be used in a workflow, called or passed on (get = locals; get()): its variables live in the checkpointed frame, not in a Python frame, so it would see none; name the variables you need explicitly (e.g. build a dict)")

    def visit_Attribute(self, n: ast.Attribute) -> None:
        v = n.value
        getframe = isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "_getframe"
        if (
            n.attr in ("f_locals", "f_back") and self.depth == 0 and isinstance(n.ctx, ast.Load)
            and not getframe  # (sys._getframe() is refused itself)
        ):
            self.add(n, f"frame.{n.attr} cannot be used in a workflow: workflow code does not run in one Python frame, so a frame (inspect.currentframe(), a traceback's tb_frame) holds none of its variables; pass what you need as values")
        elif self._made_here(v, n.attr):
            self.add(n, f"{n.attr} of a function made in a workflow cannot be used: such a function keeps the variables it closes over in the workflow's checkpointed frame, not in cells of its own, so its closure shows the compiler's frame; read the variables by name, or pass them to the function as arguments")
        self.generic_visit(n)

    def _reads_method_class_cell(self) -> bool:
        """Whether ``__class__`` here is the class cell of the method the workflow is written as
        (in a function or lambda made in it, not in a class made in it, which has its own)."""
        return (
            self.class_cell
            and self.depth > 0
            and not any(isinstance(x, ast.ClassDef) for x in self.nested)
            and "__class__" not in self.locals
        )

    def _made_here(self, v: ast.expr, attr: str) -> bool:
        """Whether ``v.<attr>`` reads the closure of a function defined in the workflow
        (``g.__closure__``, ``g.__code__.co_freevars``)."""
        if attr == "co_freevars" and isinstance(v, ast.Attribute) and v.attr == "__code__":
            v = v.value
        elif attr != "__closure__":
            return False
        return isinstance(v, ast.Name) and v.id in self.functions

    def visit_Call(self, n: ast.Call) -> None:
        f = n.func
        if isinstance(f, ast.Name):
            self.called.add(id(f))
        nargs = _namespaces_given(n)
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if (
            isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id in ("builtins", "__builtins__") and f.value.id not in self.locals
            and f.attr in _FRAME_READERS
        ):
            f = ast.Name(f.attr, ast.Load())  # builtins.locals() is locals()
        if self.nested and isinstance(f, ast.Name) and f.id in _FRAME_READERS and f.id not in self.locals:
            self._frame_reader_in_function(n, f.id, nargs)
        if name == "getclosurevars" and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id in self.functions:
            self.add(n, "getclosurevars() of a function made in a workflow cannot be used: such a function keeps the variables it closes over in the workflow's checkpointed frame, not in cells of its own, so its closure shows the compiler's frame; read the variables by name, or pass them to the function as arguments")
        if isinstance(f, ast.Name) and f.id not in self.locals:
            if f.id == "locals" and self.depth == 0:
                self.add(n, "locals() cannot be used in a workflow: its locals live in the checkpointed frame, not in a Python frame; name the variables you need explicitly (e.g. build a dict)")
            elif f.id == "dir" and not n.args and self.depth == 0:
                self.add(n, "dir() without an argument cannot be used in a workflow: its locals live in the checkpointed frame, not in a Python frame; list the names you need explicitly")
            elif f.id == "vars" and not n.args and self.depth == 0:
                self.add(n, "vars() without an argument cannot be used in a workflow: its locals live in the checkpointed frame; name the variables you need explicitly")
            elif f.id in ("exec", "eval") and nargs < 2 and self.depth == 0:
                self.add(n, f"{f.id}() without explicit globals and locals cannot see or change workflow variables; pass explicit namespaces: {f.id}(code, globals_dict, locals_dict)")
            elif f.id == "super" and not n.args and self.depth == 0:
                self.add(n, "zero-argument super() cannot be used in a workflow: its body does not run in the frame of a method, whose class cell and first argument super() reads; write super(Class, obj)")
            elif f.id == "super" and not n.args and self._reads_method_class_cell():
                self.add(n, "zero-argument super() cannot be used in a function made in a workflow written as a method: the workflow's code does not run in the method's frame, whose class cell super() reads; write super(Class, obj)")
        if isinstance(f, ast.Attribute) and f.attr == "_getframe":
            self.add(n, "sys._getframe() cannot be used in a workflow: workflow code does not run in one Python frame; pass what you need as values")
        self.generic_visit(n)


# The builtins that read the calling frame's variables (with no namespace given).
_FRAME_READERS = frozenset({"locals", "vars", "dir", "eval", "exec"})


_LOOPS = (ast.For, ast.AsyncFor, ast.While, *_COMP_NAMES)


def lazy_type_reads(fn_node: ast.AsyncFunctionDef, locals_: set[str]) -> list[Problem]:
    """Workflow variables read lazily by a ``type`` alias's value or a type parameter's bound,
    constraints or default (3.12+) and bound again after an await that follows the alias.

    Natively such a value is evaluated when it is first used, with the variable's value then; a
    checkpoint has to evaluate it at the await (a restore cannot rebuild a lazy value), so a
    value first used after the variable was bound again past that await would differ.
    """
    if sys.version_info < (3, 12):
        return []
    binds: dict[str, list[tuple[ast.AST, tuple[ast.AST, ...]]]] = {}
    awaits: list[tuple[ast.AST, tuple[ast.AST, ...]]] = []

    def walk(n: ast.AST, loops: tuple[ast.AST, ...]) -> None:
        for name in _bound_by(n):
            binds.setdefault(name, []).append((n, loops))
        if isinstance(n, ast.Await):
            awaits.append((n, loops))
        inner = loops + (n,) if isinstance(n, _LOOPS) else loops
        for child in ast.iter_child_nodes(n):
            walk(child, inner)

    for s in fn_node.body:
        walk(s, ())

    def rebound_after_an_await(made: ast.AST, name: str) -> bool:
        at = _pos(made)
        for b, b_loops in binds.get(name, []):
            if isinstance(b, ast.Nonlocal) and any(_pos(w) > at for w, _ in awaits):
                return True
            for w, w_loops in awaits:
                if at < _pos(w) < _pos(b):
                    return True
                for loop in set(map(id, w_loops)) & set(map(id, b_loops)):
                    end = next(lp for lp in w_loops if id(lp) == loop)
                    if at < (end.end_lineno or 0, end.end_col_offset or 0):
                        return True
        return False

    problems: list[Problem] = []
    for n in ast.walk(fn_node):
        lazy: list[ast.expr] = []
        if isinstance(n, ast.TypeAlias):  # type: ignore[attr-defined,unused-ignore]
            what = f"the type alias {n.name.id!r} reads"
            lazy.append(n.value)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.type_params:
            what = f"a type parameter of {n.name!r} (its bound, constraints or default) reads"
        else:
            continue
        params = {p.name for p in n.type_params}
        for p in n.type_params:
            lazy += [v for v in (getattr(p, "bound", None), getattr(p, "default_value", None)) if v]
        read = sorted(
            {
                m.id
                for e in lazy
                for m in ast.walk(e)
                if isinstance(m, ast.Name) and m.id in locals_ and m.id not in params
            }
        )
        for name in read:
            if rebound_after_an_await(n, name):
                problems.append((n, f"{what} the workflow variable {name!r} lazily (when it is first used), and {name!r} is bound again after an await: a checkpoint evaluates it at the await, so it would not see the later value; read a variable that keeps its value (bind a copy before: {name}_0 = {name}), or define it at module level"))
                break
    return problems


def _bound_by(n: ast.AST) -> list[str]:
    """The names ``n`` binds (in any scope: a nested function's local of the same name counts)."""
    if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
        return [n.id]
    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [n.name]
    if isinstance(n, ast.arg):
        return [n.arg]
    if isinstance(n, ast.alias):
        return [n.asname or n.name.split(".")[0]]
    if isinstance(n, ast.ExceptHandler) and n.name:
        return [n.name]
    if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
        return [n.name]
    if isinstance(n, ast.MatchMapping) and n.rest:
        return [n.rest]
    if isinstance(n, (ast.Global, ast.Nonlocal)):
        return list(n.names)
    return []


def _namespaces_given(n: ast.Call) -> int:
    """The arguments of a call, an explicit ``None`` after the first left out: ``eval(src, None)``
    reads the caller's namespaces as ``eval(src)`` does."""
    values = [*n.args[1:], *(k.value for k in n.keywords)]
    given = [a for a in values if not (isinstance(a, ast.Constant) and a.value is None)]
    return (1 if n.args else 0) + len(given)


def _workflow_names_read(fn: Any, workflow_locals: set[str]) -> set[str]:
    """The workflow variables a function or lambda made in the workflow reads (its free
    variables among them: neither its parameters nor names it binds itself)."""
    own = set(arg_names(fn.args))
    body = fn.body if isinstance(fn.body, list) else [fn.body]
    own |= Bindings().scan(body).bound if isinstance(fn.body, list) else set()
    return {
        x.id for x in ast.walk(fn)
        if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load) and x.id in workflow_locals
        and x.id not in own
    }


def unawaited_commands(
    fn_node: ast.AsyncFunctionDef, locals_: set[str], globals_: dict[str, Any], workflow_type: type
) -> list[Problem]:
    """Expression statements that build a workflow command (or a @workflow call) and drop it.

    ``timer("t", 1)`` on its own line does nothing: a command runs only when awaited. The callee
    is resolved in the workflow's module (a name bound in the workflow is not resolved).
    """
    from .. import _commands, _talk

    makers = {id(getattr(_commands, n)): n for n in ("timer", "signal", "procedure", "spawn", "select", "gather")}
    makers[id(_talk.request)] = "request"
    out: list[Problem] = []
    for n in _own_scope(fn_node.body):
        if not isinstance(n, ast.Expr):
            continue
        for call in _dropped_calls(n.value):
            problem = _dropped(call, locals_, globals_, makers, workflow_type)
            if problem is not None:
                out.append((n if call is n.value else call, problem))
    return out


def _dropped_calls(e: ast.expr) -> list[ast.Call]:
    """The calls of an expression statement whose results are dropped with the statement's:
    the statement itself, or a part of a tuple, list or set display, of ``and``/``or``, of a
    conditional expression or the element of a comprehension (``x and timer("t", 1)``)."""
    if isinstance(e, ast.Call):
        return [e]
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        return [c for x in e.elts for c in _dropped_calls(x.value if isinstance(x, ast.Starred) else x)]
    if isinstance(e, ast.BoolOp):
        return [c for x in e.values for c in _dropped_calls(x)]
    if isinstance(e, ast.IfExp):
        return _dropped_calls(e.body) + _dropped_calls(e.orelse)
    if isinstance(e, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return _dropped_calls(e.elt)
    return []


def _dropped(
    call: ast.Call, locals_: set[str], globals_: dict[str, Any], makers: dict[int, str], workflow_type: type
) -> str | None:
    """Why dropping the result of ``call`` does nothing (a command or a @workflow call), or None."""
    obj = _resolve_global(call.func, locals_, globals_)
    if obj is None:
        return None
    text = ast.unparse(call)
    if id(obj) in makers:
        return (
            f"'{text}' builds a workflow command and drops it: a command runs only when it "
            f"is awaited, so this line does nothing; write 'await {text}'"
        )
    if isinstance(obj, workflow_type):
        wname = getattr(obj, "__name__", "it")
        return (
            f"'{text}' calls the workflow {wname} without running it: calling a @workflow "
            f"only builds the call; write 'await {text}' to run it inline, or "
            f"'await spawn({wname}, ...)' to run it as a child workflow"
        )
    return None


def _resolve_global(f: ast.expr, locals_: set[str], globals_: dict[str, Any]) -> Any:
    """The object a callee names through module globals (``name`` or ``module.name``), or None."""
    if isinstance(f, ast.Name):
        if f.id in locals_:
            return None
        if f.id in globals_:
            return globals_[f.id]
        b = globals_.get("__builtins__", builtins)
        return (b if isinstance(b, dict) else vars(b)).get(f.id)
    if isinstance(f, ast.Attribute):
        base = _resolve_global(f.value, locals_, globals_)
        if isinstance(base, types.ModuleType):
            return vars(base).get(f.attr)
    return None


def compile_warnings(
    fn_node: ast.AsyncFunctionDef, b: Bindings, globals_: dict[str, Any] | None = None
) -> list[Problem]:
    """What a workflow may do wrong after a restart although it compiles, in source order.

    ``b`` holds the bindings of the workflow's own scope; ``globals_``, the module's, names
    what its calls call.
    """
    out: list[Problem] = []
    locals_ = (set(_param_names(fn_node.args)) | b.bound) - b.globals
    for n in _own_scope(fn_node.body):
        if globals_ is not None and isinstance(n, ast.Call):
            f = _resolve_global(n.func, locals_, globals_)
            if getattr(f, "__self__", None) is _SHARED_RANDOM and getattr(f, "__name__", "") in _SEEDING:
                out.append((n, (
                    f"{ast.unparse(n.func)}() sets the state of the random module's shared "
                    "generator, which is the process's, not the workflow's: a checkpoint does not "
                    "keep it, so after a restore in a new process random.random(), randint() and "
                    "choice() draw from that process's generator, not from the sequence this seed "
                    "began; hold a generator of the workflow's own, rng = random.Random(seed), "
                    "and draw from it (rng.random(), rng.randint(...)): it is checkpointed with "
                    "its state"
                )))
        if isinstance(n, ast.With) and any(has_await(s) for s in n.body):
            managers = ", ".join(ast.unparse(i.context_expr) for i in n.items)
            out.append((n, (
                f"the context manager of this 'with' ({managers}) stays open across an await in "
                "its body, so it is checkpointed with the workflow and must pickle (files, locks "
                "and connections do not: the checkpoint then fails); prefer try/finally with "
                "commands, or keep the awaits out of the 'with' body"
            )))
    declared = {name: g for g in _own_scope(fn_node.body) if isinstance(g, ast.Global)
                for name in g.names}
    for name in sorted(b.globals & b.first.keys(), key=lambda x: _pos(b.first[x])):
        out.append((b.first[name], (
            f"writing the module global {name!r} (declared global on line "
            f"{declared[name].lineno}): a checkpoint does not keep the global, so after a "
            f"restore in a new process {name!r} is whatever that process gave it (its import's "
            "value), not what the workflow wrote; a workflow variable holding what was written "
            "keeps it (by value: it stays the workflow's, not the module's), so keep the value "
            "in a workflow variable and read it from there, or record it with a reducer"
        )))
    out.sort(key=lambda p: _pos(p[0]))
    return out


# The generator behind random.random(), random.seed() and the module's other functions.
_SHARED_RANDOM = getattr(random.seed, "__self__", None)
_SEEDING = frozenset({"seed", "setstate"})


def _own_scope(body: list[ast.stmt]) -> Any:
    """Every node that runs in the workflow's own scope (not inside nested defs or lambdas)."""
    todo: list[ast.AST] = list(reversed(body))
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        todo.extend(reversed(list(ast.iter_child_nodes(n))))


def _pos(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _param_names(a: ast.arguments) -> list[str]:
    out = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if a.vararg:
        out.append(a.vararg.arg)
    if a.kwarg:
        out.append(a.kwarg.arg)
    return out


def _problem(msg: str, node: ast.AST, filename: str, lines: list[str]) -> CompileError:
    lineno = getattr(node, "lineno", None)
    col = getattr(node, "col_offset", None)
    text = lines[lineno - 1] if lineno and lineno <= len(lines) else None
    end_lineno = getattr(node, "end_lineno", None)
    end_col = getattr(node, "end_col_offset", None)
    return CompileError(
        msg,
        filename,
        lineno,
        None if col is None else col + 1,
        text,
        end_lineno,
        None if end_col is None else end_col + 1,
    )


_IN_MAIN = (
    "defined in the __main__ script, so it is stored under {key!r}: a process started another "
    "way (another script, `wf`, a test, or this file imported by name) looks for it under "
    "another name and its running workflows cannot recover there; move it to a module of its "
    "own and import it from the script (or give it a stable key: @workflow(name=\"app.{name}\"))"
)


def warn(fn: Any, node: ast.AsyncFunctionDef, b: Bindings, filename: str, key: str) -> None:
    """Issue a CompileWarning at the user's own line for each construct that may bite later, and
    at the ``async def`` of a workflow of ``__main__`` (once per function: the warnings registry
    of its module keeps each message and line once)."""
    g = fn.__globals__
    registry = g.setdefault("__warningregistry__", {})
    # The warnings machinery asks a module's loader for the source line; since 3.12 it refuses
    # globals without a __spec__.loader (a module built by types.ModuleType and exec). The lines
    # are in linecache already (the compiler read them), so such a module passes none.
    # A module run as ``python -m pkg.mod`` is ``__main__`` with pkg.mod's loader, which refuses
    # to read the source of ``__main__`` (ImportError): none passed for it either.
    module_globals = g
    if "__spec__" in g and getattr(g["__spec__"], "loader", None) is None or g.get("__name__") == "__main__":
        module_globals = None
    problems = compile_warnings(node, b, g)
    if key.startswith("__main__:"):
        problems.insert(0, (node, _IN_MAIN.format(key=key, name=fn.__name__)))
    for n, msg in problems:
        warnings.warn_explicit(
            f"workflow {key}: {msg}",
            CompileWarning,
            filename,
            getattr(n, "lineno", node.lineno),
            module=g.get("__name__"),
            registry=registry,
            module_globals=module_globals,
        )


def check(
    node: ast.AsyncFunctionDef,
    filename: str,
    lines: list[str],
    freevars: tuple[str, ...],
    enclosing: str | None,
    globals_: dict[str, Any] | None = None,
    workflow_type: type | None = None,
) -> None:
    """Raise one CompileError listing every problem of the workflow ``node``.

    With the workflow module's ``globals_`` (and the type of compiled workflows, whose calls are
    commands too), commands built and dropped are problems too.
    """
    b = Bindings().scan(node.body)
    locals_ = (set(arg_names(node.args)) | b.bound) - b.globals
    problems = Validator(node, locals_, freevars, enclosing).run()
    problems += lazy_type_reads(node, locals_)
    if globals_ is not None and workflow_type is not None:
        problems += unawaited_commands(node, locals_, globals_, workflow_type)
    problems.sort(key=lambda p: (getattr(p[0], "lineno", 0), getattr(p[0], "col_offset", 0)))
    if problems:
        errs = [_problem(m, n, filename, lines) for n, m in problems]
        first = errs[0]
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise CompileError(
            f"{first.msg}{more}",
            first.filename,
            first.lineno,
            first.offset,
            first.text,
            first.end_lineno,
            first.end_offset,
            problems=errs,
        )
