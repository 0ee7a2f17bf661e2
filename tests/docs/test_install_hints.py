"""Every hint to install an extra works from a checkout (the package is on no index) and says so
in the same words: ``pip install -e '.[EXTRA]'``, naming the extra."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["README.md", "docs", "actors", "persistence", "workflows", "benchmarks", "examples"]


def _files() -> list[Path]:
    out: list[Path] = []
    for name in SOURCES:
        p = ROOT / name
        out += [p] if p.is_file() else [f for f in p.rglob("*") if f.suffix in (".py", ".md")]
    return out


def test_no_hint_names_an_index_package():
    """``pip install 'actorflow[ui]'`` points at an index that has no actorflow."""
    bad = [
        f"{f.relative_to(ROOT)}:{n}"
        for f in _files()
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if re.search(r"pip install [\"']?actorflow", line)
    ]
    assert not bad, f"install hints that point at an index: {bad}"


def test_wf_ui_without_the_extra_says_what_to_install_from_a_checkout(tmp_path: Path):
    program = (
        "import sys\n"
        "sys.modules['starlette'] = None  # as if the extra were not installed\n"
        "from actors.cli import main\n"
        "sys.exit(main(['ui', '--db', sys.argv[1]]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path / "a.db")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "install the ui extra from a checkout with pip install -e '.[ui]'" in out.stderr, (
        out.stderr
    )
