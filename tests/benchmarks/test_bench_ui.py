"""benchmarks/ui.py runs end to end on a tiny database; its figures are never asserted, only that
it measured every page it names."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

# The benchmark scripts run for real (many processes, servers): the slow tier.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "ui.py"


def test_every_page_is_measured(tmp_path):
    pytest.importorskip("starlette")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--n", "2000", "--reps", "2", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    r = json.loads(line[len("RESULT "):])
    assert r["n"] == 2000 and r["backend"] == "sqlite"
    assert len(r["pages"]) == 11
    assert all(p["p50_ms"] > 0 and p["reads_p50_ms"] > 0 and p["bytes"] > 0 for p in r["pages"])
