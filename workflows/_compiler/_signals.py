"""The signal names a workflow's code awaits, read from its source.

``signal("bid")`` and ``subscribe("raid_call", ...)`` name a signal with a literal, and
``request("withdraw")`` an ask's name (signals and asks share the one set of names); the runtime
and ``wf signal`` use the set to warn about a signal no code of the workflow ever awaits (a typo,
or a signal meant for another workflow). A name that is not a literal, or an awaited call whose
target cannot be told from the source, makes the set unknown: nothing is warned about then.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from ._ast import parse

# The commands that take a signal (or request) name as their first argument.
_NAMED = {"signal", "subscribe", "request"}
# Awaited calls that are commands (their own arguments are scanned), not inline workflows.
_COMMANDS = {"signal", "request", "timer", "select", "gather", "procedure", "spawn"}


def _callee(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def scan(
    node: ast.AsyncFunctionDef, named: frozenset[str] | set[str] = _NAMED
) -> tuple[frozenset[str] | None, tuple[str, ...]]:
    """The literal signal names in ``node`` (None if one is not a literal) and the names of the
    functions it awaits directly (``await helper(x)``), which may be inline workflows. ``named``:
    the commands whose names count (all of them: signals, subscriptions and requests)."""
    names: set[str] = set()
    known = True
    inline: list[str] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and _callee(n) in named:
            first = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg == "name"), None)
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
            else:
                known = False
        elif isinstance(n, ast.Await) and isinstance(n.value, ast.Call):
            callee = _callee(n.value)
            if callee is None:
                known = False
            elif callee not in _COMMANDS:
                if not isinstance(n.value.func, ast.Name):
                    known = False  # module.helper(x): not worth resolving
                else:
                    inline.append(callee)
    return (frozenset(names) if known else None), tuple(inline)


def awaited_signals(
    own: frozenset[str] | None, inline: tuple[str, ...], lookup: Callable[[str], Any]
) -> frozenset[str] | None:
    """``own`` and the names awaited by each inline workflow ``lookup`` finds (None: unknown)."""
    if own is None:
        return None
    names = set(own)
    for callee in inline:
        target = lookup(callee)
        sub = getattr(target, "signal_names", None) if target is not None else None
        if target is None or (sub is None and hasattr(target, "__workflow_key__")):
            return None  # unknown, or a workflow whose names are unknown
        if sub is not None:
            names |= sub
    return frozenset(names)


def names_in_source(
    source: str, name: str, named: frozenset[str] | set[str] = _NAMED
) -> frozenset[str] | None:
    """The signal names the module-level workflow ``name`` awaits, read from the module's source
    without running it (for tools such as ``wf signal``); None if the source does not tell.
    ``named`` as for ``scan`` (``{"request"}``: the names of its asks alone)."""
    try:
        tree = parse(source)
    except SyntaxError:
        return None
    defs = {n.name: n for n in tree.body if isinstance(n, ast.AsyncFunctionDef)}
    found: dict[str, frozenset[str] | None] = {}

    def of(fname: str) -> frozenset[str] | None:
        if fname in found:
            return found[fname]
        node = defs.get(fname)
        if node is None:
            return None
        own, inline = scan(node, named)
        found[fname] = own  # a workflow that awaits itself inline ends the recursion
        names: set[str] | None = set(own) if own is not None else None
        for callee in inline:
            if names is None:
                break
            # One imported from elsewhere cannot be told from this source.
            sub = of(callee) if callee in defs else None
            names = None if sub is None else names | sub
        found[fname] = frozenset(names) if names is not None else None
        return found[fname]

    return of(name)
