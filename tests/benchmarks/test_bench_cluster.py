"""benchmarks/cluster.py and cluster_profile.py run end to end on a real server (tiny N); figures
are never asserted."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from tests.pgserver import PgServer

# The benchmark scripts run for real (many processes, servers): the slow tier.
pytestmark = pytest.mark.slow

CLUSTER = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "cluster.py"
PROFILE = CLUSTER.with_name("cluster_profile.py")


def _result(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])  # type: ignore[no-any-return]


def test_cluster_benchmark_reports_every_workload_on_every_node_count(pg_server: PgServer) -> None:
    with pg_server.database("bench") as url:
        proc = subprocess.run(
            [sys.executable, str(CLUSTER), "--db", url, "--n", "12", "--nodes", "1,2",
             "--latency-samples", "5", "--no-dbos"],
            capture_output=True, text=True, timeout=600,
        )
    figures = _result(proc)
    assert set(figures["throughput"]) == {"steps", "signals_many", "fanout", "timers"}
    for row in figures["throughput"].values():
        assert set(row) == {"sqlite", "1 node", "2 nodes"} and all(v > 0 for v in row.values())
    assert figures["latency"]["samples"] == 5 and figures["latency"]["p50_ms"] > 0


def test_dbos_runs_with_as_many_processes_next_to_the_nodes(pg_server: PgServer) -> None:
    """Each DBOS process its share, with ids of its own: every workflow of every process ends."""
    pytest.importorskip("dbos")
    with pg_server.database("bench_dbos") as url:
        proc = subprocess.run(
            [sys.executable, str(CLUSTER), "--db", url, "--n", "12", "--nodes", "1,2", "--only",
             "signals_many", "--no-sqlite", "--latency-samples", "2"],
            capture_output=True, text=True, timeout=600,
        )
    row = _result(proc)["throughput"]["signals_many"]
    assert set(row) == {"1 node", "dbos 1", "2 nodes", "dbos 2"} and all(v > 0 for v in row.values())


def test_cluster_profile_reports_the_servers_counts_and_the_cpu_split(pg_server: PgServer, tmp_path: pathlib.Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(PROFILE), "--workload", "signals_many", "--nodes", "2", "--n", "20",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["n"] == 20 and report["nodes"] == 2
    assert set(report["cpu"]) == {"node-0", "node-1", "server", "machine"}
    fences = [s for s in report["statements"] if "af_fence(" in s["query"]]
    assert fences and fences[0]["calls"] >= 20  # at least each workflow's step that ends it
