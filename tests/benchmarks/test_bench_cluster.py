"""benchmarks/cluster.py runs end to end on a real server (tiny N); figures are never asserted."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from tests.pgserver import PgServer

CLUSTER = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "cluster.py"


def test_cluster_benchmark_reports_every_workload_on_every_node_count(pg_server: PgServer) -> None:
    with pg_server.database("bench") as url:
        proc = subprocess.run(
            [sys.executable, str(CLUSTER), "--db", url, "--n", "12", "--nodes", "1,2",
             "--latency-samples", "5"],
            capture_output=True, text=True, timeout=600,
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    figures = json.loads(line[len("RESULT "):])
    assert set(figures["throughput"]) == {"steps", "signals_many", "fanout", "timers"}
    for row in figures["throughput"].values():
        assert set(row) == {"sqlite", "1 node", "2 nodes"} and all(v > 0 for v in row.values())
    assert figures["latency"]["samples"] == 5 and figures["latency"]["p50_ms"] > 0
