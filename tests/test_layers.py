"""The layer rules of SPEC §2, checked from the source's imports."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
STDLIB = set(__import__("sys").stdlib_module_names)
ALLOWED = {
    "workflows": {"workflows", "cloudpickle"},
    "persistence": {"persistence", "sqlite_utils", "cloudpickle"},
    "actors": {"actors", "workflows", "persistence", "pykka", "structlog", "rich", "sqlite_utils", "cloudpickle", "pytest"},
}


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_its_layer(package: str) -> None:
    """Each package imports only the standard library and what its layer allows."""
    bad = []
    for path in (ROOT / package).rglob("*.py"):
        for mod in _imports(path) - STDLIB - ALLOWED[package]:
            bad.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert not bad, "layer rule broken:\n" + "\n".join(bad)


def test_workflows_package_exports_spec_names() -> None:
    """The public names of SPEC §3 are exported, and only through __all__."""
    import workflows

    spec = {
        "workflow", "procedure", "reducer", "timer", "signal", "select", "spawn", "gather",
        "subscribe", "unsubscribe", "send", "broadcast", "now", "workflow_id", "info", "Event",
        "Status", "WorkflowError", "CompileError", "WorkflowFailed", "ProcedureFailed",
        "ChildFailed", "Cancelled",
    }
    assert spec <= set(workflows.__all__)
    for name in workflows.__all__:
        assert hasattr(workflows, name), name
