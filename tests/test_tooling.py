"""The packages pass the project's static checks: ruff, and mypy --strict (they ship py.typed, so
users' type checkers read these annotations)."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ["workflows", "persistence", "actors"]


def _run(*args: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "RUFF_CACHE_DIR": str(tmp_path / "ruff")},
    )


def test_the_packages_type_check_under_mypy_strict(tmp_path: pathlib.Path) -> None:
    """`mypy --strict` on workflows, persistence and actors reports nothing."""
    out = _run("mypy", "--strict", "--cache-dir", str(tmp_path / "mypy"), *PACKAGES, tmp_path=tmp_path)
    assert out.returncode == 0, f"mypy --strict found problems:\n{out.stdout[-6000:]}{out.stderr[-2000:]}"


def test_ruff_finds_nothing(tmp_path: pathlib.Path) -> None:
    """`ruff check` with the settings in pyproject.toml reports nothing, tests and examples included."""
    out = _run("ruff", "check", ".", tmp_path=tmp_path)
    assert out.returncode == 0, f"ruff check found problems:\n{out.stdout[-6000:]}{out.stderr[-2000:]}"
