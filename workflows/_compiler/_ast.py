"""``ast.parse`` and ``compile`` of a tree, one thread at a time.

CPython 3.11 counts the depth of its conversions between C and Python syntax trees in one counter
per interpreter, not per thread: two threads converting at once (a finalizer switching threads
midway is enough) fail with ``SystemError: AST constructor recursion depth mismatch``. The
compiler parses in whichever thread imports a workflow, upgrades a checkpoint or reads a
workflow's signal names (``wf signal`` beside a running system), so each conversion here takes one
lock.
"""

from __future__ import annotations

import ast
import threading
from types import CodeType

_LOCK = threading.RLock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)`` under the lock."""
    with _LOCK:
        return ast.parse(source, filename)


def compile_tree(tree: ast.Module, filename: str, flags: int = 0) -> CodeType:
    """``compile(tree, filename, "exec", flags, dont_inherit=True)`` under the lock."""
    with _LOCK:
        code: CodeType = compile(tree, filename, "exec", flags, True)
    return code
