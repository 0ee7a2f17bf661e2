"""The layer rules of SPEC §2, checked from the source's imports."""

import ast
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
STDLIB = set(__import__("sys").stdlib_module_names)
ALLOWED = {
    "workflows": {"workflows", "cloudpickle"},
    "persistence": {"persistence", "sqlite_utils", "cloudpickle", "psycopg", "psycopg_pool"},
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


def test_a_store_runs_and_logs_with_no_library_of_the_runtime_loaded() -> None:
    """persistence on its own (no actors) opens a store and logs its events through ``logging``,
    loading neither structlog nor pykka; once actors is loaded the same loggers give structlog
    events."""
    code = """
import logging, sys
logging.basicConfig(level=logging.WARNING, format="%(name)s %(message)s", stream=sys.stdout)
import persistence
from persistence._log import part_log
persistence.open_store(":memory:").close()
part_log("store").warning("store_event", n=1)
print(sorted({m.split(".")[0] for m in sys.modules} & {"structlog", "pykka", "actors"}))
import structlog.testing
import actors
with structlog.testing.capture_logs() as logs:
    part_log("store").warning("store_event", n=2)
print(logs)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "actorflow.store store_event n=1"
    assert lines[1] == "[]"
    assert "'event': 'store_event'" in lines[2] and "'n': 2" in lines[2]


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


def test_actors_package_exports_the_errors_its_calls_raise() -> None:
    """The runtime's package exports what its own calls raise, those of the other layers too
    (a test written from SPEC §5 and §9 imports them from ``actors``): the same classes."""
    import actors
    import persistence
    import workflows

    for name in ("WorkflowFailed", "Cancelled", "CheckpointError"):
        assert getattr(actors, name) is getattr(workflows, name), name
    for name in ("DatabaseLocked", "NodeIdInUse", "InboxFull", "StorageUnavailable", "PersistenceError"):
        assert getattr(actors, name) is getattr(persistence, name), name
    for name in actors.__all__:
        assert hasattr(actors, name), name


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


def test_examples_use_the_public_api_only() -> None:
    """examples/ (SPEC §2: "the public API only") imports no private module or name of the three
    packages."""
    bad = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for path in (ROOT / "examples").rglob("*.py")
        for name in _names_imported(path)
        if name.split(".")[0] in ALLOWED and any(part.startswith("_") for part in name.split(".")[1:])
    )
    assert not bad, "\n".join(bad)


def _modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every module of the three packages under ``root``, by dotted name (packages by their
    ``__init__.py``), subpackages included."""
    found = {}
    for package in ALLOWED:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _module_imports(path: pathlib.Path, root: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports, at module level or inside functions:
    ``from a import b`` is module ``a.b`` if there is one, else ``a``; a name that is no module
    counts as its nearest enclosing module. Imports under ``if TYPE_CHECKING:`` never run, so
    they make no circle."""
    tree = ast.parse(path.read_text(), str(path))
    parts = path.relative_to(root).with_suffix("").parts
    package = parts[:-1]  # what a relative import starts from (a package's own __init__ included)
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    named: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            named.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            named.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    found = set()
    for name in named:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def import_circles(root: pathlib.Path) -> list[list[str]]:
    """The import circles among the modules of the three packages under ``root``: each a set of
    modules every one of which imports, directly or not, every other. A module importing its own
    package (``from . import x``) is no circle: Python imports the package first anyway."""
    modules = _modules(root)
    graph = {
        m: {n for n in _module_imports(p, root, modules) if n != m and not m.startswith(n + ".")}
        for m, p in modules.items()
    }
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return sorted(circles)


def test_no_module_of_the_packages_imports_in_a_circle() -> None:
    """No module of workflows/, persistence/ or actors/ (subpackages included) imports, directly
    or not, a module that imports it: shared code goes to a module both import."""
    circles = import_circles(ROOT)
    assert not circles, "import circles (each line: modules that import each other):\n" + "\n".join(
        " <-> ".join(c) for c in circles
    )


def test_a_circle_planted_in_a_subpackage_is_found(tmp_path: pathlib.Path) -> None:
    """The circle check reads subpackages: in a copy of the packages, persistence/_pg/_ddl.py
    made to import _schema (which imports it), inside a function as a lazy import would, is
    reported, and the copy without it is clean."""
    for package in ALLOWED:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    assert import_circles(tmp_path) == []
    ddl = tmp_path / "persistence" / "_pg" / "_ddl.py"
    ddl.write_text(ddl.read_text() + "\n\ndef _planted() -> None:\n    from persistence._pg._schema import quote  # noqa: F401\n")
    assert import_circles(tmp_path) == [["persistence._pg._ddl", "persistence._pg._schema"]]
