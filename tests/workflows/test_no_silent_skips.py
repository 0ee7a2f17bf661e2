"""The compiler's test modules never turn an import failure into a skip.

A module-level ``pytest.skip`` in an ``except ImportError`` (or any handler) would make a broken
import of the compiler silently skip its oracle (the differential corpus, the fuzzer, the
rejection and runtime-error checks) instead of failing the suite.
"""

from __future__ import annotations

import ast
import pathlib

HERE = pathlib.Path(__file__).parent


def _skips_in_handlers(tree: ast.Module) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ExceptHandler):
            continue
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and sub.func.attr == "skip"
                and any(k.arg == "allow_module_level" for k in sub.keywords)
            ):
                lines.append(sub.lineno)
    return lines


def test_no_module_level_skip_on_import_errors():
    """No test module of the compiler skips itself from an exception handler."""
    found = {}
    for path in sorted(HERE.glob("test_*.py")):
        lines = _skips_in_handlers(ast.parse(path.read_text(), str(path)))
        if lines:
            found[path.name] = lines
    assert not found, f"module-level skips in exception handlers: {found}"
