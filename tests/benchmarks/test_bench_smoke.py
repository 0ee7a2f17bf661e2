"""The benchmark suite runs end to end (actorflow side, tiny N); figures are never asserted."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

# The benchmark scripts run for real (many processes, servers): the slow tier.
pytestmark = pytest.mark.slow

RUN = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "run.py"


def test_smoke_run_produces_every_figure(tmp_path):
    """run.py --smoke --no-dbos exits 0 and writes a figure for every workload and target."""
    out = tmp_path / "results.json"
    md = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--smoke", "--no-dbos", "--quiet", "--json", str(out),
         "--markdown", str(md), "--dir", str(tmp_path), "--timeout", "120"],
        capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert all(entry["ok"] for entry in figures["log"])
    keys = [row["key"] for row in figures["rows"]]
    assert keys == ["steps", "signals_one", "signals_many", "fanout", "timers", "steps_many", "timers_many"]
    # The started-together rows have no peer figure and are not judged against a target.
    assert [row["key"] for row in figures["rows"] if row.get("informative")] == ["steps_many", "timers_many"]
    assert not any("started together" in t["target"] for t in figures["targets"])
    assert all(row["actorflow"] and row["actorflow"] > 0 for row in figures["rows"])
    assert all(row["dbos"] is None for row in figures["rows"])
    # Workloads 1 and 4 are measured next to their floor: their rows by a plain sqlite3 loop.
    floors = {row["key"]: row.get("floor_per_s") for row in figures["rows"] if not row.get("informative")}
    assert floors["steps"] > 0 and floors["timers"] > 0
    assert all(floors[k] is None for k in ("signals_one", "signals_many", "fanout"))
    assert figures["recovery"]["actorflow_complete_s"] > 0
    assert figures["recovery_big"]["complete_s"] > 0
    assert set(figures["resume"]["actorflow"]) == {"2", "5"}
    assert figures["scale"]["rss_end_mb"] > 0
    assert "| workload |" in md.read_text()
    assert "| floor, workflows/s |" in md.read_text()


def test_against_runs_another_revision_beside_this_code(tmp_path):
    """run.py --against REV installs REV into a temporary venv from a temporary git worktree,
    runs the same workloads on it next to this code's, reports both figures and their ratio,
    and removes the worktree afterwards."""
    out = tmp_path / "results.json"
    md = tmp_path / "RESULTS.md"
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=RUN.parent, capture_output=True,
                         text=True, check=True).stdout.strip()
    proc = subprocess.run(
        [sys.executable, str(RUN), "--smoke", "--no-dbos", "--quiet", "--only", "steps",
         "--against", "HEAD", "--json", str(out), "--markdown", str(md), "--dir", str(tmp_path),
         "--timeout", "120"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["against"] == {"rev": "HEAD", "sha": rev}
    assert [row["key"] for row in figures["rows"]] == ["steps", "steps_many"]
    assert all(row["against"] > 0 and row["actorflow"] > 0 for row in figures["rows"])
    # The other revision's processes ran this workload module on its own interpreter (its venv).
    theirs = [e for e in figures["log"] if e["run"].startswith(f"workloads_actorflow@{rev[:7]} ")]
    assert len(theirs) == 2 and all(e["ok"] for e in theirs)
    text = md.read_text()
    assert f"| workload | durability | unit | this code | {rev[:7]} | this / {rev[:7]} |" in text
    assert f">= 1.25x {rev[:7]}" in text
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=RUN.parent, capture_output=True,
                               text=True, check=True).stdout
    assert str(tmp_path) not in worktrees


def test_against_stopped_by_sigterm_removes_its_worktree(tmp_path):
    """A run with --against stopped by SIGTERM while it measures removes its git worktree (it was
    left behind, registered in the repository)."""
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, str(RUN), "--smoke", "--no-dbos", "--only", "steps", "--against", "HEAD",
         "--json", str(tmp_path / "r.json"), "--dir", str(tmp_path), "--timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "@" in line and "workloads_actorflow" in line:  # the other revision is running
                break
        else:
            raise AssertionError("the run ended before it measured the other revision")
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=RUN.parent, capture_output=True,
                               text=True, check=True).stdout
    assert str(tmp_path) not in worktrees
    assert not list(tmp_path.glob("actorflow-bench-*"))


def test_against_an_unknown_revision_is_refused(tmp_path):
    """--against a revision git does not know stops before anything runs, naming it."""
    proc = subprocess.run(
        [sys.executable, str(RUN), "--smoke", "--no-dbos", "--quiet", "--only", "steps",
         "--against", "no-such-rev-anywhere", "--json", str(tmp_path / "r.json"), "--dir",
         str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "no-such-rev-anywhere" in proc.stderr and not (tmp_path / "r.json").exists()


THREADS = RUN.parent / "threads.py"


def test_threads_meter_reports_every_thread_group(tmp_path):
    """threads.py --quick exits 0 and reports, per workload, CPU and switches per workflow, with
    the per-thread figures adding up to no more than the process's."""
    out = tmp_path / "threads.json"
    proc = subprocess.run([sys.executable, str(THREADS), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert set(figures["workloads"]) == {"steps", "timers"}
    for name, w in figures["workloads"].items():
        m = w["median"]
        assert m["per_s"] > 0 and m["cpu_us"] > 0 and m["switches"] > 0, (name, m)
        groups = m["threads"]
        assert set(groups) == {"starting thread", "engine threads", "procedure threads", "timer thread",
                               "writer", "other"}
        assert groups["starting thread"]["cpu_us"] > 0 and groups["engine threads"]["cpu_us"] > 0
        assert sum(g["cpu_us"] for g in groups.values()) <= m["cpu_us"] * 1.01, (name, m)
    assert figures["workloads"]["steps"]["median"]["threads"]["procedure threads"]["cpu_us"] > 0
    assert figures["workloads"]["timers"]["median"]["threads"]["timer thread"]["switches"] > 0
    assert "voluntary switches per workflow" in proc.stdout


def test_handoff_reports_cpu_and_switches_per_signal():
    """handoff.py (tiny N, one repetition) prints wall and CPU time and thread switches per
    signal for workloads 2a and 2b, each figure a positive number."""
    proc = subprocess.run(
        [sys.executable, str(RUN.parent / "handoff.py"), "--n", "30", "--reps", "1"],
        capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith(("2a ", "2b "))]
    assert [r[0] for r in rows] == ["2a", "2b"]
    for r in rows:
        wall, cpu, switches = (float(x.replace(",", "")) for x in r[-3:])
        assert wall > 0 and cpu > 0 and switches > 0


def test_scaling_reports_cpu_per_item_for_every_case_and_size():
    """scaling.py (tiny sizes) runs every case at each N to its end (each asserts its outcome)
    and prints a positive CPU figure per item for each."""
    proc = subprocess.run(
        [sys.executable, str(RUN.parent / "scaling.py"), "--sizes", "5,10"],
        capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {line.split()[0]: line.split()[-2:] for line in proc.stdout.splitlines()
            if line.split() and line.split()[0] in ("children", "procedures", "held", "broadcast", "timers")}
    assert sorted(rows) == ["broadcast", "children", "held", "procedures", "timers"]
    assert all(float(v.replace(",", "")) > 0 for figures in rows.values() for v in figures)


@pytest.mark.parametrize("workload", ["steps", "signals_one", "timers"])
def test_the_postgresql_floor_writes_each_workload_to_the_end(pg_store_url, workload):
    """``workloads_raw.py floor --db URL`` writes a workload's rows with plain psycopg into the
    store's own schema, every workflow read back completed (it fails otherwise)."""
    raw = RUN.parent / "workloads_raw.py"
    proc = subprocess.run([sys.executable, str(raw), "floor", "--workload", workload, "--n", "20",
                           "--db", pg_store_url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT ", 1)[1].splitlines()[0])
    assert result["n"] == 20 and result["per_s"] > 0 and result["backend"] == "postgresql"
