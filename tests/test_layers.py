"""The layer rules of SPEC §2, checked from the source's imports."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
STDLIB = set(__import__("sys").stdlib_module_names)
ALLOWED = {
    "workflows": {"workflows", "cloudpickle"},
    "persistence": {"persistence", "sqlite_utils", "cloudpickle", "psycopg", "psycopg_pool"},
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


OPTIONAL = {"psycopg", "psycopg_pool"}  # the extra actorflow[postgres]


def _top_level_imports(path: pathlib.Path) -> set[str]:
    """Modules imported when ``path`` is imported (not those imported inside functions)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return found


def test_psycopg_is_loaded_only_with_the_postgresql_backend() -> None:
    """psycopg is imported by persistence/_pg/ only, and that package is imported nowhere at
    module level: a program on SQLite never needs the extra installed."""
    bad = []
    for package in ALLOWED:
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("persistence", "_pg"):
                continue
            for mod in _top_level_imports(path):
                if mod.split(".")[0] in OPTIONAL or mod.startswith("persistence._pg"):
                    bad.append(f"{rel} imports {mod} at module level")
            for mod in _imports(path) & OPTIONAL:
                bad.append(f"{rel} imports {mod} (only persistence/_pg/ may)")
    assert not bad, "\n".join(bad)


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
