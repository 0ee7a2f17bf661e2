"""The layer rules of SPEC §2, checked from the source's imports."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
STDLIB = set(__import__("sys").stdlib_module_names)
ALLOWED = {
    "workflows": {"workflows", "cloudpickle"},
    "persistence": {"persistence", "sqlite_utils", "cloudpickle", "psycopg", "psycopg_pool", "structlog"},
    "actors": {"actors", "workflows", "persistence", "pykka", "structlog", "rich", "sqlite_utils", "cloudpickle", "pytest",
               "starlette", "uvicorn", "jinja2", "cronsim", "prometheus_client"},
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


UI = {"starlette", "uvicorn", "jinja2", "multipart", "python_multipart"}  # the extra actorflow[ui]


def test_the_web_view_is_loaded_only_by_wf_ui() -> None:
    """The ui extra's libraries are imported by actors/_ui/ only, and that package is imported
    nowhere at module level: the runtime and the other wf commands never need the extra."""
    bad = []
    for package in ALLOWED:
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("actors", "_ui"):
                continue
            for mod in _top_level_imports(path):
                if mod.split(".")[0] in UI or mod.startswith("actors._ui"):
                    bad.append(f"{rel} imports {mod} at module level")
            for mod in _imports(path) & UI:
                bad.append(f"{rel} imports {mod} (only actors/_ui/ may)")
    assert not bad, "\n".join(bad)


def test_workflows_package_exports_spec_names() -> None:
    """The public names of SPEC §3 are exported, and only through __all__."""
    import workflows

    spec = {
        "workflow", "procedure", "reducer", "timer", "signal", "select", "spawn", "gather",
        "subscribe", "unsubscribe", "send", "broadcast", "now", "workflow_id", "info", "Event",
        "Status", "WorkflowError", "CompileError", "WorkflowFailed", "ProcedureFailed",
        "ChildFailed", "Cancelled", "WorkflowFunction",
    }
    assert spec <= set(workflows.__all__)
    for name in workflows.__all__:
        assert hasattr(workflows, name), name


def _names_imported(path: pathlib.Path) -> set[str]:
    """Every module and ``module.name`` imported by ``path``, relative imports made absolute."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def test_actors_import_no_private_part_of_pykka() -> None:
    """pykka is used through its public modules (docs/design.md says which Actor methods)."""
    bad = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for path in (ROOT / "actors").rglob("*.py")
        for name in _names_imported(path)
        if name.startswith("pykka.") and any(part.startswith("_") for part in name.split(".")[1:])
    )
    assert not bad, "\n".join(bad)


def test_the_modules_of_actors_import_no_circle() -> None:
    """No module of actors/ imports, directly or not, a module that imports it."""
    modules = {f"actors.{p.stem}": p for p in (ROOT / "actors").glob("*.py") if p.stem != "__init__"}
    graph = {m: {n for n in _names_imported(p) if n in modules and n != m} for m, p in modules.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            m = todo.pop()
            if m == goal:
                return True
            if m not in seen:
                seen.add(m)
                todo.extend(graph[m])
        return False

    circles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if reaches(b, a))
    assert not circles, "import circles in actors/:\n" + "\n".join(circles)
