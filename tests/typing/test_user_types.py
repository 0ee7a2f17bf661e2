"""The typed API, as a user meets it: the package built into a wheel, installed in a fresh venv
with mypy, and `mypy --strict` run on a user's own files there (SPEC §8)."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASES = pathlib.Path(__file__).resolve().parent / "cases"
GUIDE_EXAMPLE = ROOT / "examples" / "docs" / "typed_shop.py"
# What a wheel is built from: the packages and the files setuptools reads.
SOURCES = ["workflows", "persistence", "actors", "setup.cfg", "pyproject.toml", "README.md"]
EXPECT = re.compile(r"# E: \[([a-z-]+)\] (.*?)(?=\s+# E: |$)")
REPORTED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<text>.*)  \[(?P<code>[a-z-]+)\]$")

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: pathlib.Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH", "VIRTUAL_ENV")}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _check(out: subprocess.CompletedProcess[str], what: str) -> None:
    assert out.returncode == 0, f"{what} failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"


@pytest.fixture(scope="module")
def user_venv(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A venv holding the package installed from its wheel, and the mypy this project uses."""
    base = tmp_path_factory.mktemp("typing")
    src = base / "src"
    src.mkdir()
    for name in SOURCES:  # a copy, so that building leaves nothing in the work tree
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    wheels = base / "wheels"
    _check(_run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", str(wheels)], src), "pip wheel")
    (wheel,) = wheels.glob("actorflow-*.whl")
    venv = base / "venv"
    _check(_run([sys.executable, "-m", "venv", str(venv)], base), "python -m venv")
    python = venv / "bin" / "python"
    mypy = f"mypy=={importlib.metadata.version('mypy')}"
    _check(_run([str(python), "-m", "pip", "install", "-q", str(wheel), mypy], base), "pip install")
    return python


def _mypy(python: pathlib.Path, case: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess[str]:
    # Run from a folder of its own, so that nothing of the work tree can be imported.
    shutil.copy2(CASES / case if (CASES / case).exists() else GUIDE_EXAMPLE, tmp_path / case)
    return _run([str(python), "-m", "mypy", "--strict", "--no-incremental", "--show-error-codes",
                 "--no-color-output", "--no-error-summary", case], tmp_path)


def test_the_package_comes_from_the_wheel(user_venv: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """The venv's workflows and actors are the installed copies, with py.typed beside them."""
    out = _run([str(user_venv), "-c", "import actors, workflows, persistence; "
                "print(workflows.__file__); print(actors.__file__); print(persistence.__file__)"], tmp_path)
    _check(out, "import")
    for line in out.stdout.split():
        path = pathlib.Path(line)
        assert "site-packages" in path.parts, path
        assert (path.parent / "py.typed").exists(), path


def test_right_uses_pass_mypy_strict(user_venv: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """A user file using every part of the typed API rightly (with assert_type on each result:
    nothing is Any where the API promises a type) passes `mypy --strict` with no error."""
    out = _mypy(user_venv, "shop_ok.py", tmp_path)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_talking_to_workflows_passes_mypy_strict(user_venv: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """A user file that publishes, asks and reads history (``ask``/``published`` are ``Any``,
    ``await request(...)`` a ``Request``) passes `mypy --strict` with no error."""
    out = _mypy(user_venv, "talk_ok.py", tmp_path)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_the_guide_example_passes_mypy_strict_and_runs(user_venv: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """The typed program the guide shows passes `mypy --strict` and prints its receipt."""
    out = _mypy(user_venv, GUIDE_EXAMPLE.name, tmp_path)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr
    ran = _run([sys.executable, "-c", "from examples.docs.typed_shop import main; main()"], ROOT)
    _check(ran, "the guide's example")
    assert "order-1: paid 2.50" in ran.stdout.splitlines(), ran.stdout


def test_wrong_uses_are_each_reported(user_venv: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """Each wrong use in the user file is reported with the expected code and message, and
    nothing else is: wrong argument types to procedure, spawn, start and an inline call, a result
    assigned to the wrong type, a wrong return, options of the wrong type."""
    expected: set[tuple[int, str, str]] = set()
    for n, line in enumerate((CASES / "shop_wrong.py").read_text().splitlines(), 1):
        if "# E: [" in line:
            expected |= {(n, code, text) for code, text in EXPECT.findall(line)}
    assert len(expected) >= 15
    out = _mypy(user_venv, "shop_wrong.py", tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    reported = [m for m in map(REPORTED.match, out.stdout.splitlines()) if m]
    missing = [
        (n, code, text) for n, code, text in sorted(expected)
        if not any(int(m["line"]) == n and m["code"] == code and text in m["text"] for m in reported)
    ]
    unexpected = [
        m.group(0) for m in reported
        if not any(int(m["line"]) == n and m["code"] == code for n, code, _ in expected)
    ]
    assert not missing and not unexpected, (
        f"missing: {missing}\nunexpected: {unexpected}\nmypy said:\n{out.stdout}"
    )
    assert len(reported) == len(expected), out.stdout
