"""Registry of workflows, procedures and reducers by ``module:qualname``.

A restarted process finds code by key: a key not registered yet is resolved by importing its module
(which runs the decorators) and, failing that, by walking the qualname from the module.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from ._errors import UnknownWorkflowType

_REGISTRY: dict[str, dict[str, Any]] = {"workflow": {}, "procedure": {}, "reducer": {}}
_OPTIONS_ATTR = "__actorflow_options__"


def function_key(fn: Any, kind: str) -> str:
    """The durable key of a function: ``module:qualname``."""
    key = getattr(fn, "__workflow_key__", None)
    if key is not None and kind == "workflow":
        return str(key)
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module or not qualname:
        raise TypeError(f"{kind} {fn!r} has no __module__/__qualname__; use a plain def function")
    return f"{module}:{qualname}"


def check_findable(kind: str, key: str) -> None:
    """Refuse a key that no process could import (a lambda, a function defined inside another)
    unless this process registered it (decorated it): the runtime calls this as a step asks for a
    procedure, so the mistake is raised at the await, not after the call's attempts.
    """
    if "<" in key and key not in _REGISTRY[kind]:
        raise TypeError(
            f"{kind}() needs a function that a restarted process can find by 'module:qualname', "
            f"but {key!r} is a lambda or a function defined inside another function. Define it "
            f"at module level (with @{kind}), or decorate the nested function with @{kind} "
            f"(then only this process can run it)."
        )


# Keys of workflows defined inside a function while their module's own code ran (``JOB =
# make_job()`` at module level, or a script's run): running the module again (importing it, as
# ``resolve`` does) defines them again, so a restarted process finds them.
_WITH_MODULE: set[str] = set()


def note_defined_with_module(key: str) -> None:
    """``key``, a nested workflow's, was defined as its module's code ran (``_WITH_MODULE``)."""
    _WITH_MODULE.add(key)


def found_after_restart(key: str) -> bool:
    """Whether a restarted process can find the workflow ``key`` by importing its module: not
    one defined inside a function, unless a run of its module's code defined it. (A ``name=``
    key is found as the application imports the module that registers it.)"""
    _, sep, qualname = key.partition(":")
    return not sep or "<locals>" not in qualname or key in _WITH_MODULE


def register(kind: str, obj: Any, key: str | None = None, **options: Any) -> str:
    """Register ``obj`` as a ``kind`` under ``key`` (default ``module:qualname``)."""
    key = key or function_key(obj, kind)
    if options and kind != "workflow":
        setattr(obj, _OPTIONS_ATTR, dict(options))
    _REGISTRY[kind][key] = obj
    return key


def lookup_options(fn: Any) -> dict[str, Any]:
    """Options given to ``@procedure(...)``/``@reducer`` for ``fn`` (empty if none)."""
    return dict(getattr(fn, _OPTIONS_ATTR, None) or {})


def resolve(kind: str, key: str) -> Any:
    """The registered ``kind`` named ``key``, importing its module if needed.

    Raises ``UnknownWorkflowType`` naming the key and what to do.
    """
    table = _REGISTRY[kind]
    obj = table.get(key)
    if obj is not None:
        return obj
    module_name, sep, qualname = key.partition(":")
    if not sep or not module_name or not qualname:
        raise UnknownWorkflowType(
            f"{kind} key {key!r} is malformed: expected 'module:qualname'", key=key, kind=kind
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UnknownWorkflowType(
            f"{kind} {key!r} cannot be found: importing module {module_name!r} failed ({e}). "
            f"Make the module importable (on sys.path) in the process that opens the database.",
            key=key,
            kind=kind,
        ) from e
    obj = table.get(key)
    if obj is None and "<locals>" not in qualname:
        target: Any = module
        for part in qualname.split("."):
            target = getattr(target, part, None)
            if target is None:
                break
        if target is not None and kind != "workflow":
            obj = target
        elif target is not None and getattr(target, "__workflow_key__", None) == key:
            obj = target
    if obj is None:
        hint = (
            " It was defined inside a function, so only the process that defined it knows it."
            if "<locals>" in qualname
            else ""
        )
        raise UnknownWorkflowType(
            f"{kind} {key!r} is not registered: module {module_name!r} was imported but defines no "
            f"{kind} named {qualname!r}.{hint} Decorate it with @{kind} at module level, or "
            f"import the module that does before opening the database.",
            key=key,
            kind=kind,
        )
    return obj


def check_plain(fn: Any, what: str) -> None:
    """A procedure or a reducer is a plain function: an ``async def`` one (or a ``@workflow``)
    would only make a coroutine, never run (a reducer's writes were silently dropped, a
    procedure's result was the coroutine)."""
    if getattr(fn, "__workflow_key__", None) is not None:
        name = getattr(fn, "__qualname__", repr(fn))
        raise TypeError(
            f"{what} {name} is a @workflow, which a {what.lstrip('@')} cannot run: await {name}(...) "
            f"to run it inline, or await spawn({name}, ...) to run it as a child workflow"
        )
    kind, wanted = getattr(fn, "__actorflow_kind__", None), what.lstrip("@")
    if kind in ("procedure", "reducer") and kind != wanted and not what.startswith("@"):
        name = getattr(fn, "__qualname__", repr(fn))
        instead = (
            f"await procedure({name}, ...)" if kind == "procedure" else f"reducer({name}, ...)"
        )
        raise TypeError(
            f"{wanted}() got {name}, which is a @{kind}: a {kind} is called as {instead}"
        )
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        name = getattr(fn, "__qualname__", repr(fn))
        if "reducer" in what:
            advice = (
                "a reducer runs synchronously inside the step's transaction: write it as a plain "
                "def (its db calls are not awaited)"
            )
        else:
            advice = (
                "procedures run as plain functions on the procedure pool's threads: write it as "
                "a plain def (one that needs asyncio can call asyncio.run(...) inside)"
            )
        raise TypeError(f"{what} {name} is an 'async def', which would never run; {advice}")
