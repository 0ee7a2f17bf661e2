"""benchmarks/retention.py runs end to end on tiny sizes; its figures are never asserted, only
that it measured what it says (the file bounded by retention, every old workflow pruned)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

# The benchmark scripts run for real (many processes, servers): the slow tier.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "retention.py"


def _result(*args: str, tmp_path: pathlib.Path) -> dict:
    proc = subprocess.run([sys.executable, str(SCRIPT), *args, "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_steady_samples_size_rows_and_rate(tmp_path):
    r = _result("steady", "--duration", "5", "--retention", "1", "--every", "1", tmp_path=tmp_path)
    assert len(r["samples"]) >= 4
    assert all(s["file_mb"] > 0 and s["steps_per_s"] >= 0 for s in r["samples"])
    assert r["samples"][-1]["pruned"] > 0  # retention ran during the run


def test_bulk_prunes_every_finished_workflow(tmp_path):
    r = _result("bulk", "--n", "3000", "--running", "2", "--settle", "0.5", tmp_path=tmp_path)
    assert r["pruned"] == 3001  # the filled copies and the workflow they were copied from
    assert r["during"]["signals"] > 0 and r["before"]["signals"] > 0
