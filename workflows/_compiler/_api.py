"""``@workflow``: locate the source, validate, lower, generate block functions, register."""

from __future__ import annotations
import __future__

import ast
import builtins
import copy
import hashlib
import inspect
import itertools
import linecache
import os
import sys
import types
import warnings
from collections.abc import Callable, Coroutine
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

from .._errors import CompileError, CompileWarning
from .._registry import register, resolve
from . import _runtime
from ._lower import ROOT, Emitter, Lowered
from ._runtime import Continuation, Frame, SubCall
from ._scope import (
    FRAME,
    LOCAL,
    RT,
    Bindings,
    Rewriter,
    arg_names,
    fill_locations,
    frame_attr,
    rt_call,
    user_name,
)
from ._signals import awaited_signals
from ._signals import scan as scan_signals
from ._upgrade import PointTable, describe_points, start_point
from ._validate import Validator, compile_warnings, unawaited_commands

# 2: locals are frame attributes v_<name>; 3: a nested and/or as a value is lowered into the
# enclosing operator's jumps on 3.11, and comprehension variables read by a lambda made in the
# comprehension live in a holder per run (the same source compiles to other blocks and slots).
COMPILER_VERSION = "actorflow-compiler-3"
_PY312 = sys.version_info >= (3, 12)
# ``compile()`` inherits the caller's __future__ imports unless told not to: generated code must
# follow the workflow's own module instead (``from __future__ import annotations`` or not).
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag
_counter = itertools.count(1)
P = ParamSpec("P")
R = TypeVar("R")
# An upgrade function: (old point, old locals) -> (new point, new locals), or None.
UpgradeFunction = Callable[[str, dict[str, Any]], "tuple[str, dict[str, Any]] | None"]
U = TypeVar("U", bound=UpgradeFunction)


class CompiledCode:
    """The generated state machine of one workflow: blocks and their static tables."""

    def __init__(
        self,
        key: str,
        fingerprint: str,
        filename: str,
        blocks: list[Any],
        handlers: list[Any],
        hctx: list[Any],
        points: dict[int, tuple[int, str]],
        slots: dict[str, str],
    ) -> None:
        self.key = key
        self.fingerprint = fingerprint
        self.filename = filename
        self.blocks = blocks
        self.handlers = handlers
        self.hctx = hctx
        self.points = points
        self.slots = slots
        self.globals: dict[str, Any] = {}  # the workflow module's namespace
        self.block_asts: list[Any] = []
        self.stubs: dict[int, Any] = {}
        # 3.11: per lowered comprehension that awaits (by its result slot), a function that
        # raises at the comprehension's line, where a StopIteration leaving it becomes a
        # RuntimeError (empty since 3.12, where comprehensions are inlined).
        self.comp_stops: dict[str, Any] = {}
        self._point_text: dict[int, str] = {}  # describe_point's answers: asked at every step
        self.table: PointTable | None = None  # the points' identities, for upgrades (_upgrade)

    def dump(self) -> str:
        """The generated block functions as Python source (for debugging the compiler)."""
        out = []
        for label, fdef in enumerate(self.block_asts):
            if fdef is None:
                continue
            region = self.handlers[label]
            handling = ", ".join(f"{slot} ({kind.name.lower()})" for slot, kind in self.hctx[label])
            out.append(f"# block {label}  on exception -> {region.target} ({region.slot})"
                       f"{'  handling ' + handling if handling else ''}")
            out.append(ast.unparse(fdef))
        return "\n".join(out)

    def where(self, pc: int) -> str:
        """``file.py:12`` of the await that resumes at block ``pc``."""
        line = self.points.get(pc, (0, ""))[0]
        return f"{os.path.basename(self.filename)}:{line}"

    def describe_point(self, pc: int | None) -> str | None:
        """``file.py:12 await timer('t', 5)`` for a resume block, else None."""
        if pc is None:
            return None
        try:
            return self._point_text[pc]
        except KeyError:
            pass
        if pc not in self.points:
            return None
        line, text = self.points[pc]
        described = self._point_text[pc] = f"{os.path.basename(self.filename)}:{line} {text}"
        return described

    def describe_slot(self, name: str) -> str:
        """A readable name for a frame attribute (a local or an internal slot)."""
        if name in self.slots:
            return self.slots[name]
        if name.startswith("_af_t"):
            return "an intermediate value of an expression"
        if name == "_af_sent":
            return "the result of the last await"
        if name.startswith(LOCAL):
            return f"local {user_name(name)!r}"
        return "an internal value of the compiled workflow"


class WorkflowFunction(Generic[P, R]):
    """A compiled ``@workflow``: call it to await it inline, ``start`` it to get a continuation.

    Generic over the function's parameters ``P`` and return type ``R``, so a type checker checks
    ``await wf(x)``, ``spawn(wf, x)`` and ``system.start(wf, x)`` against them.
    """

    __workflow_key__: str

    def __init__(
        self, fn: Callable[P, Coroutine[Any, Any, R]], code: CompiledCode, binder: Callable[..., Any]
    ) -> None:
        self.__wrapped__ = fn
        self._code = code
        self._binder = binder
        self.__workflow_key__ = code.key
        self.fingerprint = code.fingerprint
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.__signature__ = inspect.signature(fn)
        self._signal_scan: tuple[frozenset[str] | None, tuple[str, ...]] = (None, ())
        self._upgraders: list[tuple[str, UpgradeFunction]] = []

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> SubCall[R]:
        """An awaitable call: ``await wf(x)`` inside a workflow runs ``wf`` inline."""
        # Bound now, as a native call binds them: a wrong call raises here, not at its await.
        return SubCall(self, args, kwargs, self._binder(*args, **kwargs))

    def start(self, *args: P.args, **kwargs: P.kwargs) -> Continuation:
        """A new continuation with the arguments bound (like the native call); runs nothing."""
        return Continuation([self._new_frame(args, kwargs)], self.__workflow_key__, self.fingerprint)

    def _new_frame(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Frame:
        return self._frame_of(self._binder(*args, **kwargs))

    def _frame_of(self, bound: dict[str, Any]) -> Frame:
        f = Frame.__new__(Frame)
        f._af_code = self._code
        d = f.__dict__
        for k, v in bound.items():
            d[LOCAL + k] = v
        d["_af_pc"] = 0
        return f

    @property
    def signal_names(self) -> frozenset[str] | None:
        """The signal names the code awaits (with ``subscribe``'s, and those of the workflows it
        awaits inline), or None when the source does not tell (a name that is not a literal)."""
        if "_signal_names" not in self.__dict__:
            own, inline = self._signal_scan
            self._signal_names = own  # a workflow that awaits itself inline ends the recursion
            g = getattr(self.__wrapped__, "__globals__", {})
            self._signal_names = awaited_signals(own, inline, g.get)
        names: frozenset[str] | None = self._signal_names
        return names

    def upgrade(self, from_version: str) -> Callable[[U], U]:
        """Register a function that moves continuations made by an older version of this code.

        ``from_version`` is the old code's fingerprint, or a prefix of it of at least 8 hex digits
        (as ``wf show`` and the ``VersionMismatch`` message print it). The function is called as
        ``fn(point, locals)`` with the old point's identity (``"timer 'walk' #1"``) and a dict of
        the old frame's locals, and returns ``(new_point, new_locals)``: the identity of an await
        of the new code and the locals to resume there with (every local live there must be
        given). It may return None to leave that point to the automatic rules. Its answer is
        checked before anything is stored; a wrong answer (or an exception) keeps the workflow
        held, with the reason.
        """
        if not isinstance(from_version, str) or len(from_version) < 8 or not all(
                c in "0123456789abcdef" for c in from_version):
            raise ValueError(
                f"{self.__workflow_key__}.upgrade(from_version={from_version!r}): give the old "
                "code's fingerprint, or its first 8 or more hex digits (lower case)"
            )
        if self.fingerprint.startswith(from_version):
            raise ValueError(
                f"{self.__workflow_key__}.upgrade(from_version={from_version!r}): that is this "
                "code's own fingerprint; give the fingerprint of the old code the stored "
                "continuations were made by"
            )

        def register_upgrade(fn: U) -> U:
            if not callable(fn):
                raise TypeError(f"@{self.__name__}.upgrade(...) decorates a function, got {fn!r}")
            self._upgraders.append((from_version, fn))
            return fn

        return register_upgrade

    def upgrader_for(self, fingerprint: str) -> UpgradeFunction | None:
        """The upgrade function registered for continuations made by code ``fingerprint``."""
        found = [fn for v, fn in self._upgraders if fingerprint.startswith(v)]
        return found[-1] if found else None

    def __reduce__(self) -> Any:
        return (resolve, ("workflow", self.__workflow_key__))

    def __repr__(self) -> str:
        return f"<workflow {self.__workflow_key__}>"


# --------------------------------------------------------------------------------------------


@overload
def workflow(
    fn: Callable[P, Coroutine[Any, Any, R]], /, *, name: str | None = None
) -> WorkflowFunction[P, R]: ...
@overload
def workflow(
    fn: None = None, /, *, name: str | None = None
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], WorkflowFunction[P, R]]: ...


def workflow(fn: Any = None, *, name: str | None = None) -> Any:
    """Compile an ``async def`` into a checkpointable workflow and register it.

    Use as ``@workflow`` or ``@workflow(name="custom.key")``. Unsupported constructs raise a
    ``CompileError`` (a ``SyntaxError``) at decoration time, listing every problem.
    """
    if fn is None:
        def deco(f: Any) -> WorkflowFunction[Any, Any]:
            compiled: WorkflowFunction[Any, Any] = workflow(f, name=name)
            return compiled
        return deco
    if isinstance(fn, WorkflowFunction):
        return fn
    if inspect.isasyncgenfunction(fn):
        _reject_async_generator(fn)
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"@workflow decorates an 'async def' function, got {fn!r}")
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"@workflow(name=...) must be a non-empty string, got {name!r}")
    filename = fn.__code__.co_filename
    lines = linecache.getlines(filename, fn.__globals__)
    if not lines:
        raise CompileError(
            f"cannot compile workflow {fn.__qualname__}: its source code is not available "
            f"({filename!r}; defined in the REPL, with -c or by exec()?); define it in a .py "
            "file, or compile it from text with compile_workflow_source(src, filename, name)",
            filename,
        )
    source = "".join(lines)
    node = _find(_parse(source, filename), fn)
    if node is None:
        raise CompileError(
            f"cannot compile workflow {fn.__qualname__}: no 'async def {fn.__name__}' starts at "
            f"line {fn.__code__.co_firstlineno} of {filename} (was the file edited after import?)",
            filename,
            fn.__code__.co_firstlineno,
        )
    key = name or f"{fn.__module__}:{fn.__qualname__}"
    enclosing = None
    if "<locals>" in fn.__qualname__:
        enclosing = fn.__qualname__.split(".<locals>")[-2].rpartition(".")[2]
    wf = _compile(fn, node, filename, lines, key, enclosing)
    register("workflow", wf, key)
    return wf


def _reject_async_generator(fn: Any) -> None:
    """An ``async def`` with ``yield``: a CompileError at its yield (file, line, what instead)."""
    filename = fn.__code__.co_filename
    lines = linecache.getlines(filename, fn.__globals__)
    node = _find(_parse("".join(lines), filename), fn) if lines else None
    if node is not None:
        _validate(node, filename, lines, fn.__code__.co_freevars, None)  # raises at the yield
    raise CompileError(
        f"@workflow {fn.__qualname__} is an async generator ('async def' with 'yield'), which "
        "cannot be checkpointed; a workflow returns one value: collect results in a list and "
        "return it, or report progress with send()/reducer()",
        filename,
        fn.__code__.co_firstlineno,
    )


_PARSED: dict[tuple[str, int], ast.Module] = {}


def _parse(source: str, filename: str) -> ast.Module:
    k = (filename, hash(source))
    tree = _PARSED.get(k)
    if tree is None:
        tree = ast.parse(source, filename)
        if len(_PARSED) >= 64:  # a module's workflows are decorated together; keep it small
            _PARSED.clear()
        _PARSED[k] = tree
    return tree


def _find(tree: ast.Module, fn: Any) -> ast.AsyncFunctionDef | None:
    first = fn.__code__.co_firstlineno
    for n in ast.walk(tree):
        if isinstance(n, ast.AsyncFunctionDef) and n.name == fn.__name__:
            start = min([n.lineno] + [d.lineno for d in n.decorator_list])
            if start == first:
                return n
    return None


def compile_workflow_source(
    src: str, filename: str, name: str, globals: dict[str, Any] | None = None
) -> WorkflowFunction[Any, Any]:
    """Compile the ``async def name`` defined in ``src`` (for tests and program generators).

    The whole source is executed in ``globals`` (by default a fresh namespace holding the public
    names of ``workflows``), so helpers it defines are visible to the workflow; tracebacks show
    ``filename`` and its lines. ``name`` is the async def's name or, when the source defines
    exactly one async def, the registry key to register it under.
    """
    if globals is None:
        # A fresh namespace that already has the authoring API (timer, signal, select, ...).
        import workflows

        g = {n: getattr(workflows, n) for n in workflows.__all__}
    else:
        g = globals
    g.setdefault("__name__", f"workflow_source_{next(_counter)}")
    g.setdefault("__builtins__", builtins)
    lines = src.splitlines(True)
    linecache.cache[filename] = (len(src), None, lines, filename)
    # Validate before executing: some rejected constructs (``yield`` with ``return value``,
    # ``yield from``) are errors to Python's own compiler too, and ours says what to do instead.
    tree = ast.parse(src, filename)
    defs = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef)]
    named = [n for n in defs if n.name == name]
    # ``name`` is the async def's name, or (when the source has one async def) its registry key.
    target = named[0] if named else (defs[0] if len(defs) == 1 else None)
    if target is None:
        raise NameError(
            f"compile_workflow_source: {filename} defines no 'async def {name}' (and not exactly "
            "one async def to register under that name)"
        )
    _validate(target, filename, lines, (), None)
    exec(compile(src, filename, "exec", dont_inherit=True), g)  # noqa: S102  (the caller's own source)
    obj = g.get(target.name)
    if isinstance(obj, WorkflowFunction):
        return obj
    fn: Callable[..., Coroutine[Any, Any, Any]] = cast(Any, obj)  # an async def: workflow() checks
    return workflow(fn, name=None if named else name)


# --------------------------------------------------------------------------------------------


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


def _compile(
    fn: Any,
    node: ast.AsyncFunctionDef,
    filename: str,
    lines: list[str],
    key: str,
    enclosing: str | None,
) -> WorkflowFunction[Any, Any]:
    b = Bindings().scan(node.body)
    params = arg_names(node.args)
    locals_ = (set(params) | b.bound) - b.globals
    _validate(node, filename, lines, fn.__code__.co_freevars, enclosing, fn.__globals__)

    # Names captured by nested scopes (or bound by except clauses) stay on the frame always.
    probe = Rewriter(locals_)
    for s in copy.deepcopy(node.body):
        probe.visit(s)
    no_cache = set(probe.captured)
    for n in ast.walk(node):
        if isinstance(n, ast.ExceptHandler) and n.name:
            no_cache.add(n.name)

    def source_of(e: ast.AST) -> str:
        return ast.unparse(e)

    em = Emitter(locals_, no_cache, source_of, filename)
    em.src = node.body[0]
    em.start(em.new_label())
    em.body(node.body)
    em.flush()
    if not em.ended:
        for s in em.leap("return", None, node.body[-1]):
            em.emit(s)
    low = Lowered(em.blocks, em.points, em.slots)

    fingerprint = _fingerprint(node)
    blocks, handlers, hctx, asts = _codegen(low, em, fn, filename, sorted(b.globals))
    code = CompiledCode(key, fingerprint, filename, blocks, handlers, hctx, low.points, low.slots)
    code.block_asts = asts
    code.globals = fn.__globals__
    code.stubs = {pc: _raiser(fn, filename, n) for pc, n in em.point_nodes.items()}
    code.comp_stops = {slot: _raiser(fn, filename, n) for slot, n in em.comp_nodes.items()}
    code.table = PointTable(
        describe_points(node, em.point_nodes, em.shapes, locals_, COMPILER_VERSION),
        start_point(params, COMPILER_VERSION),
        locals_,
        code.describe_slot,
    )
    _warn(fn, node, b, filename, key)
    wf = WorkflowFunction(fn, code, _binder(fn, node))
    wf._signal_scan = scan_signals(node)
    return wf


def _warn(fn: Any, node: ast.AsyncFunctionDef, b: Bindings, filename: str, key: str) -> None:
    """Issue a CompileWarning at the user's own line for each construct that may bite later."""
    g = fn.__globals__
    registry = g.setdefault("__warningregistry__", {})
    # The warnings machinery asks a module's loader for the source line; since 3.12 it refuses
    # globals without a __spec__.loader (a module built by types.ModuleType and exec). The lines
    # are in linecache already (the compiler read them), so such a module passes none.
    module_globals = g
    if "__spec__" in g and getattr(g["__spec__"], "loader", None) is None:
        module_globals = None
    for n, msg in compile_warnings(node, b):
        warnings.warn_explicit(
            f"workflow {key}: {msg}",
            CompileWarning,
            filename,
            getattr(n, "lineno", node.lineno),
            module=g.get("__name__"),
            registry=registry,
            module_globals=module_globals,
        )


def _validate(
    node: ast.AsyncFunctionDef,
    filename: str,
    lines: list[str],
    freevars: tuple[str, ...],
    enclosing: str | None,
    globals_: dict[str, Any] | None = None,
) -> None:
    """Raise one CompileError listing every problem of the workflow ``node``.

    With the workflow module's ``globals_``, commands built and dropped are problems too.
    """
    b = Bindings().scan(node.body)
    locals_ = (set(arg_names(node.args)) | b.bound) - b.globals
    problems = Validator(node, locals_, freevars, enclosing).run()
    if globals_ is not None:
        problems += unawaited_commands(node, locals_, globals_, WorkflowFunction)
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


def _fingerprint(node: ast.AsyncFunctionDef) -> str:
    n = copy.copy(node)
    n.decorator_list = []
    dump = ast.dump(n, include_attributes=False)
    return hashlib.sha256(f"{COMPILER_VERSION}\n{dump}".encode()).hexdigest()


def _codegen(
    low: Lowered, em: Emitter, fn: Any, filename: str, globals_: list[str]
) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    # Temporaries used in one block stay block locals; the rest live on the frame and are
    # cleared when consumed.
    where: dict[str, set[int]] = {}
    for label, blk in low.blocks.items():
        for s in blk.stmts:
            for n in ast.walk(s):
                if isinstance(n, ast.Name) and n.id.startswith("_af_t"):
                    where.setdefault(n.id, set()).add(label)
    cross = {name for name, ls in where.items() if len(ls) > 1}

    class Temps(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> Any:
            if n.id not in cross:
                return n
            if isinstance(n.ctx, ast.Store):
                return ast.copy_location(frame_attr(n.id, ast.Store()), n)
            if id(n) in em.peeks:
                return ast.copy_location(frame_attr(n.id), n)
            return ast.copy_location(
                rt_call("take", ast.Name(FRAME, ast.Load()), ast.Constant(n.id)), n
            )

    nblocks = max(low.blocks) + 1
    blocks: list[Any] = [None] * nblocks
    handlers: list[Any] = [ROOT] * nblocks
    hctx: list[Any] = [()] * nblocks
    asts: list[Any] = [None] * nblocks
    glob = fn.__globals__
    qualname = fn.__qualname__
    for label, blk in low.blocks.items():
        body = [Temps().visit(s) for s in blk.stmts] if cross else list(blk.stmts)
        if not body or not isinstance(body[-1], (ast.Return, ast.Raise)):
            body.append(ast.Return(ast.Call(ast.Attribute(ast.Name(RT, ast.Load()), "Done", ast.Load()), [ast.Constant(None)], [])))
        if globals_:
            body.insert(0, ast.Global(list(globals_)))
        src = blk.src
        for s in body:
            fill_locations(s, src)
        args = ast.arguments(
            posonlyargs=[], args=[ast.arg(FRAME), ast.arg(RT)], vararg=None, kwonlyargs=[],
            kw_defaults=[], kwarg=None, defaults=[],
        )
        kw: dict[str, Any] = {"type_params": []} if _PY312 else {}
        fdef = ast.FunctionDef(fn.__name__, args, body, [], None, None, **kw)
        fill_locations(fdef, src)
        mod = ast.Module([fdef], [])
        try:
            co = compile(mod, filename, "exec", fn.__code__.co_flags & _FUTURE_FLAGS, True)
        except Exception as e:  # a compiler bug: show the generated code
            raise RuntimeError(
                f"internal error compiling block {label} of {qualname}: {e}\n{ast.unparse(mod)}"
            ) from e
        fcode = next(c for c in co.co_consts if isinstance(c, types.CodeType))
        if hasattr(fcode, "co_qualname"):
            fcode = fcode.replace(co_qualname=qualname)
        f = types.FunctionType(fcode, glob, fn.__name__)
        f.__qualname__ = qualname
        blocks[label] = f
        asts[label] = fdef
        handlers[label] = blk.region
        hctx[label] = blk.hctx
    return blocks, handlers, hctx, asts


def _raiser(fn: Any, filename: str, node: ast.AST) -> Any:
    """A function that re-raises its argument at ``node``'s line, in the workflow's name.

    Per await: when a sub-workflow raises into its caller, passing the exception through the
    caller's function adds the caller's ``await helper(...)`` line to the traceback, as native
    code shows it. Per comprehension (3.11): the line of the RuntimeError a StopIteration
    leaving it becomes.
    """
    body: list[ast.stmt] = [ast.Raise(ast.Name("_af_e", ast.Load()), None)]
    args = ast.arguments(
        posonlyargs=[], args=[ast.arg("_af_e")], vararg=None, kwonlyargs=[],
        kw_defaults=[], kwarg=None, defaults=[],
    )
    kw: dict[str, Any] = {"type_params": []} if _PY312 else {}
    fdef = ast.FunctionDef(fn.__name__, args, body, [], None, None, **kw)
    fill_locations(fdef, node)
    co = compile(ast.Module([fdef], []), filename, "exec", dont_inherit=True)
    fcode = next(c for c in co.co_consts if isinstance(c, types.CodeType))
    if hasattr(fcode, "co_qualname"):
        fcode = fcode.replace(co_qualname=fn.__qualname__)
    return types.FunctionType(fcode, {}, fn.__name__)


def _binder(fn: Any, node: ast.AsyncFunctionDef) -> Callable[..., dict[str, Any]]:
    """A plain function with the workflow's signature that returns its bound arguments."""
    a = node.args
    parts: list[str] = []
    pos = a.posonlyargs + a.args
    first_default = len(pos) - len(a.defaults)
    for i, p in enumerate(pos):
        parts.append(p.arg + ("=None" if i >= first_default else ""))
        if a.posonlyargs and i == len(a.posonlyargs) - 1:
            parts.append("/")
    if a.vararg:
        parts.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        parts.append("*")
    for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        parts.append(k.arg + ("=None" if d is not None else ""))
    if a.kwarg:
        parts.append("**" + a.kwarg.arg)
    src = f"def {fn.__name__}({', '.join(parts)}):\n    return locals()\n"
    ns: dict[str, Any] = {}
    exec(src, ns)  # noqa: S102  (generated from the workflow's own parameter list)
    binder = ns[fn.__name__]
    binder.__defaults__ = fn.__defaults__
    binder.__kwdefaults__ = fn.__kwdefaults__
    binder.__qualname__ = fn.__qualname__
    return binder  # type: ignore[no-any-return]


__all__ = ["CompiledCode", "WorkflowFunction", "compile_workflow_source", "workflow", "_runtime"]
