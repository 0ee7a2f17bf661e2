"""What the ``__enter__`` of a ``with`` open across an await changed outside the workflow.

A checkpoint keeps the context manager (it must pickle), not what its ``__enter__`` did to the
process: the current directory (``contextlib.chdir``), ``sys.stdout`` (``redirect_stdout``), the
warnings filters (``warnings.catch_warnings``), the environment, ``sys.path``, decimal's context,
or the module-level data of the application (a ``Zone`` whose ``__enter__`` counts into a
module's dict). Restored in another process, the workflow goes on in the ``with`` body without
that change, and its ``__exit__`` then undoes a change that was never made there (a count goes
negative, the directory it goes back to is another). So ``with_enter`` compares that process
state before and after ``__enter__``, and a checkpoint refuses the manager that changed it,
naming the ``with`` and what changed.
"""

from __future__ import annotations

import contextlib
import decimal
import os
import sys
import types
import warnings
from typing import Any

from ._pickle_modules import slot_values, user_module
from ._pickle_values import ValueRefused

_BUDGET = 5000  # objects of module data compared, per module


class ProcessStateRefused(ValueRefused):
    """A context manager open across an await whose ``__enter__`` changed process state."""


_SKIP = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


def _digest(ns: dict[str, Any]) -> dict[str, list[Any]]:
    """What each global of a module's data holds, as (id, type, size, plain values) tokens, to
    compare in this process before and after a call; a class of the module by its data
    attributes. Up to ``_BUDGET`` objects in all (the rest compared by identity)."""
    out: dict[str, list[Any]] = {}
    seen: set[int] = set()
    budget = _BUDGET
    for name, v in list(ns.items()):
        if name.startswith("__"):
            continue
        if isinstance(v, type) and v.__module__ == ns.get("__name__"):
            stack = [x for k, x in vars(v).items() if not k.startswith("__") and not callable(x)]
        elif isinstance(v, _SKIP) or callable(v):
            continue
        else:
            stack = [v]
        tokens = out[name] = [id(v)]
        while stack:
            o = stack.pop()
            t = type(o)
            if o is None or t is bool or t is int or t is str or t is bytes:
                tokens.append(o)
                continue
            if t is float or t is complex:
                tokens.append(repr(o))
                continue
            i = id(o)
            tokens.append((i, t))
            if i in seen or isinstance(o, _SKIP) or budget <= 0:
                continue
            seen.add(i)
            budget -= 1
            try:
                if isinstance(o, dict):
                    tokens.append(len(o))
                    for k, x in dict.items(o):
                        stack.append(k)
                        stack.append(x)
                elif isinstance(o, (list, tuple, set, frozenset)):
                    tokens.append(len(o))
                    stack.extend(o)
                elif t.__module__ == "collections" and hasattr(o, "__len__"):
                    tokens.append(len(o))
                    stack.extend(o)
                try:
                    d = object.__getattribute__(o, "__dict__")
                except Exception:
                    d = None
                if type(d) is dict:
                    stack.append(d)
                stack.extend(slot_values(o).values())
            except Exception:  # contents that cannot be read: compared by identity
                continue
    return out


def _modules(m: Any, caller: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The namespaces of the application's modules a manager's ``__enter__`` may change: its
    class's module and the workflow's."""
    out: dict[str, dict[str, Any]] = {}
    for mod in (sys.modules.get(type(m).__module__),):
        if mod is not None and user_module(mod):
            out[mod.__name__] = vars(mod)
    if caller is not None:
        name = caller.get("__name__")
        mod = sys.modules.get(name) if isinstance(name, str) else None
        if mod is not None and vars(mod) is caller and user_module(mod):
            out[mod.__name__] = caller
    return out


def snapshot(m: Any, caller: dict[str, Any] | None) -> dict[str, Any]:
    """The process state ``m.__enter__`` may change, as of now."""
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    state: dict[str, Any] = {
        "the current directory (os.getcwd())": cwd,
        "sys.stdout": id(sys.stdout),
        "sys.stderr": id(sys.stderr),
        "sys.stdin": id(sys.stdin),
        "the warnings filters (warnings.filters)": (id(warnings.filters), list(warnings.filters)),
        "warnings.showwarning": (
            id(warnings.showwarning),
            id(getattr(warnings, "_showwarnmsg_impl", None)),
        ),
        "decimal's current context": (id(decimal.getcontext()), repr(decimal.getcontext())),
        "the environment (os.environ)": dict(os.environ),
        "sys.path": list(sys.path),
    }
    for name, ns in _modules(m, caller).items():
        state[name] = _digest(ns)
    return state


def _names_read(m: Any) -> set[str]:
    """The global names the methods of ``m``'s classes (and the functions they define) read,
    but for those that make and enter it."""
    out: set[str] = set()
    todo: list[Any] = []
    for k in type(m).__mro__:
        if k is object:
            continue
        for name, v in vars(k).items():
            if name in ("__enter__", "__init__", "__new__"):
                continue  # (what changes it, not what relies on it)
            f = getattr(v, "__func__", v)
            f = getattr(f, "fget", f)
            code = getattr(f, "__code__", None)
            if isinstance(code, types.CodeType):
                todo.append(code)
    while todo:
        code = todo.pop()
        out.update(code.co_names)
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return out


def changed(m: Any, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two snapshots that ``m``'s ``__exit__`` may rely on: the process
    state of the standard library's managers; module data (a global of the application) only
    if the manager's class reads it (a count, a stack its ``__exit__`` pops), or it is the
    manager or its class itself. A global changed and never read there (a log appended to, a
    metric counted) is a side effect done, as any other before a restart."""
    out = []
    reads: set[str] | None = None
    for k, v in before.items():
        now = after.get(k)
        if type(v) is dict and type(now) is dict and k in sys.modules:  # a module's globals
            if reads is None:
                reads = _names_read(m)
            ns = vars(sys.modules[k])
            names = [
                n for n in {**v, **now}
                if v.get(n) != now.get(n)
                and (n in reads or any(ns.get(n) is x for x in (m, *type(m).__mro__)))
            ]
            if names:
                out.append(f"the module-level data of module {k!r} ({', '.join(sorted(names)[:5])})")
        elif now != v:
            out.append(k)
    return out


def refusal(m: Any, what: list[str], held: Any) -> ProcessStateRefused:
    """The refusal of manager ``m`` (``held``: what the workflow's frame holds for it)."""
    return ProcessStateRefused(
        f"the __enter__ of this {type(m).__qualname__} changed "
        f"{', '.join(what[:-1]) + ' and ' if len(what) > 1 else ''}{what[-1]}, which belongs to "
        "the process, not to the workflow: a restore in another process goes on in the 'with' "
        "body without that change, and its __exit__ then undoes a change never made there",
        held,
    )


def _entered(obj: Any) -> str | None:
    """What an entered (not yet exited) manager of the standard library changed of the process
    (read from its private state, by ``getattr``: absent, it counts as not entered)."""
    if isinstance(obj, contextlib.chdir):
        return "the current directory (os.getcwd())" if getattr(obj, "_old_cwd", None) else None
    if isinstance(obj, (contextlib.redirect_stdout, contextlib.redirect_stderr)):
        stream = getattr(obj, "_stream", "stdout")
        return f"sys.{stream}" if getattr(obj, "_old_targets", None) else None
    if isinstance(obj, warnings.catch_warnings):
        module = getattr(obj, "_module", warnings)
        live = getattr(obj, "_entered", False) and getattr(module, "filters", None) is not getattr(
            obj, "_filters", None
        )
        return "the warnings filters (warnings.filters)" if live else None
    return None


def refuse_entered(_p: Any, obj: Any) -> Any:
    """A checkpoint's rule for ``contextlib.chdir``, ``redirect_stdout``/``redirect_stderr`` and
    ``warnings.catch_warnings``: refused while entered, however the workflow holds it (an
    ``ExitStack`` it was entered into too); pickled as usual otherwise."""
    what = _entered(obj)
    if what is None:
        return NotImplemented
    raise ProcessStateRefused(
        f"this {type(obj).__qualname__} is entered: it changed {what}, which belongs to the "
        "process, not to the workflow: a restore in another process goes on without that change, "
        "and its __exit__ then undoes a change never made there",
        obj,
    )


ENTERED_TYPES: tuple[type, ...] = (
    contextlib.chdir,
    contextlib.redirect_stdout,
    contextlib.redirect_stderr,
    warnings.catch_warnings,
)
