"""The packages pass the project's static checks: ruff here; `mypy --strict` on the three packages
(they ship py.typed, so users' type checkers read these annotations) is a step of its own in
.ci/run, with a warm cache, rather than a cold run inside each Python's suite."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _run(*args: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "RUFF_CACHE_DIR": str(tmp_path / "ruff")},
    )


def test_ruff_finds_nothing(tmp_path: pathlib.Path) -> None:
    """`ruff check` with the settings in pyproject.toml reports nothing, tests and examples included."""
    out = _run("ruff", "check", ".", tmp_path=tmp_path)
    assert out.returncode == 0, f"ruff check found problems:\n{out.stdout[-6000:]}{out.stderr[-2000:]}"
