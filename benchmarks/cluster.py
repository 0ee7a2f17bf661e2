"""A cluster of nodes on one PostgreSQL database against one SQLite process, same run.

    python benchmarks/cluster.py [--db postgresql://...] [--n 1000] [--nodes 1,2,3] [--no-dbos]
        [--only steps,signals_many,fanout,timers] [--against REV] [--reps K] [--no-sqlite]

``--against REV`` also runs the nodes of a git revision (a worktree of it, made and removed
here) next to this one's, in the same run: each node count gets a column for each.

Throughput: workloads 1 (three procedures per workflow), 2b (one signal to each of N parked
workflows), 3 (a parent gathering children) and 4 (0.1 s timers) with their N workflows split
over 1, 2 and 3 node processes on one schema (each node starts its share, all nodes start
together once all are open; the figure is N over the slowest node's time), next to one SQLite
process running all N, at durability "full" on both, and next to DBOS with as many processes on
the same server (each process its share, its own executor id, all started together in the same
way; DBOS's system database, a fresh one per run, at the server's durability: full).

Cross-node signal latency: two nodes in one process (``actors.testing.Cluster``, a real clock);
one at a time, a signal sent through one node to a workflow that the other runs, until that
workflow's result is back at the sender: the send's commit, the wake-up to the owner, its step's
commit and the notice of the end back to the sender. p50 and p99.

Without ``--db`` it starts a throwaway PostgreSQL server with production settings (fsync on), as
the tests do. Figures from a machine that runs anything else are not to be trusted.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import READY_PREFIX, dbos_available, percentile, quiet_structlog, result_of  # noqa: E402

from workflows import signal, workflow  # noqa: E402

WORKLOADS = {"steps": "1. workflows x 3 procedures", "signals_many": "2b. one signal each",
             "fanout": "3. parent gathers children", "timers": "4. 0.1 s timers"}


@contextmanager
def checkout(rev: str | None, scratch: str) -> Iterator[pathlib.Path | None]:
    """A worktree of ``rev`` (removed afterwards), or None."""
    if rev is None:
        yield None
        return
    path = pathlib.Path(scratch) / "against"
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)


@contextmanager
def server(url: str | None) -> Iterator[tuple[str, object]]:
    if url:
        yield url, None
        return
    from tests.pgserver import DURABLE, PgServer

    pg = PgServer.start(DURABLE)
    try:
        yield pg.url("postgres"), pg
    finally:
        pg.stop()


def with_schema(url: str, schema: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != "schema"] + [("schema", schema)]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def with_database(url: str, database: str) -> str:
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path="/" + database))


def _ready(p: subprocess.Popen[str]) -> None:
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == READY_PREFIX, f"a node did not open: {line!r} {p.stderr.read() if p.stderr else ''}"


def run_nodes(workload: str, db: str | None, nodes: int, n: int, scratch: str, engine: str = "actorflow",
              root: pathlib.Path = ROOT) -> float:
    """Throughput (workflows/s) of ``nodes`` processes sharing ``n`` workflows of ``workload``.

    ``engine`` "actorflow" (``db`` a schema's URL, or None for one SQLite process) or "dbos"
    (``db`` a database's URL that DBOS creates); ``root`` the checkout whose workload runs."""
    go = os.path.join(scratch, f"go-{engine}-{workload}-{nodes}-{time.monotonic_ns()}")
    procs = []
    for k in range(nodes):
        argv = [sys.executable, str(root / "benchmarks" / f"workloads_{engine}.py"), workload,
                "--dir", os.path.join(scratch, f"{engine}-{workload}-{nodes}-{k}"), "--n", str(n // nodes)]
        if engine == "actorflow":
            argv += ["--durability", "full"]
        else:
            argv += ["--executor", f"node-{k + 1}-"]
        if db is not None:
            argv += ["--db", db, "--start-after", go]
        procs.append(subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        if engine == "dbos":
            _ready(procs[-1])  # one at a time: DBOS creates and migrates its database at launch
    if db is not None:
        if engine == "actorflow":
            for p in procs:  # every node open before any starts
                _ready(p)
        open(go, "w").close()
    seconds = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        figures = result_of(out)
        assert p.returncode == 0 and figures is not None, f"{workload} failed:\n{err[-3000:]}"
        seconds.append(float(figures["seconds"]))
    return (n // nodes) * nodes / max(seconds)


@workflow(name="benchmarks.cluster.wait_one")
async def wait_one() -> object:
    return await signal("item")


def latency(url: str, samples: int) -> dict[str, float]:
    quiet_structlog()
    from actors.testing import Cluster

    with Cluster(with_schema(url, "bench_latency"), 2, clock=None) as cluster:
        sender, owner = cluster["node-1"], cluster["node-2"]
        ids = [i for i in (f"lat-{k}" for k in range(samples * 20)) if cluster.owner(i) == "node-2"][:samples]
        refs = [sender.start(wait_one, id=i) for i in ids]
        cluster.idle(60)
        took = []
        for r in refs:
            t0 = time.perf_counter()
            r.signal("item", 1)
            r.result(timeout=60)
            took.append(time.perf_counter() - t0)
        assert owner.nodes()
    return {"p50_ms": percentile(took, 50) * 1e3, "p99_ms": percentile(took, 99) * 1e3,
            "mean_ms": statistics.fmean(took) * 1e3, "samples": len(took)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--db", default=None, help="a postgresql:// URL (default: a throwaway server)")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--nodes", default="1,2,3")
    p.add_argument("--latency-samples", type=int, default=300)
    p.add_argument("--no-dbos", action="store_true", help="leave out the DBOS columns")
    p.add_argument("--only", default=",".join(WORKLOADS), help="the workloads to run, by key")
    p.add_argument("--against", default=None, help="a git revision whose nodes run next to these")
    p.add_argument("--no-sqlite", action="store_true", help="leave out the SQLite column")
    p.add_argument("--reps", type=int, default=1, help="repetitions (the median is kept)")
    args = p.parse_args()
    counts = [int(c) for c in args.nodes.split(",")]
    chosen = [w for w in args.only.split(",") if w]
    unknown = sorted(set(chosen) - set(WORKLOADS))
    if unknown:
        p.error(f"--only: unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    use_dbos = not args.no_dbos and dbos_available()
    if not use_dbos:
        print("DBOS not run (not installed: pip install -e '.[bench]', or --no-dbos)", flush=True)
    out: dict[str, object] = {"n": args.n, "throughput": {}, "latency": {}}
    with server(args.db) as (url, _pg), tempfile.TemporaryDirectory() as scratch, \
            checkout(args.against, scratch) as old:
        table: dict[str, dict[str, float]] = {}
        for wl in chosen:
            n = 100 if wl == "fanout" else args.n
            runs: dict[str, list[float]] = {}

            def measure(column: str, *a: Any, runs: dict[str, list[float]] = runs, **kw: Any) -> None:
                runs.setdefault(column, []).append(run_nodes(*a, **kw))

            for rep in range(args.reps):  # the columns one after another, each repetition
                if not args.no_sqlite:
                    measure("sqlite", wl, None, 1, n, scratch)
                for c in counts:
                    name = f"{c} node{'s' if c > 1 else ''}"
                    if old is not None:
                        measure(f"{name} ({args.against})", wl, with_schema(url, f"bench_{wl}_{c}_{rep}_against"),
                                c, n, scratch, root=old)
                    measure(name, wl, with_schema(url, f"bench_{wl}_{c}_{rep}"), c, n, scratch)
                    if use_dbos:
                        measure(f"dbos {c}", wl, with_database(url, f"dbos_{wl}_{c}_{rep}_{os.getpid()}"), c, n,
                                scratch, engine="dbos")
            row = {k: statistics.median(v) for k, v in runs.items()}
            table[wl] = row
            print(f"{WORKLOADS[wl]:<32}" + "  ".join(f"{k}: {v:6.0f}/s" for k, v in row.items())
                  + f"  (load average {os.getloadavg()[0]:.1f})", flush=True)
            if use_dbos:
                print(" " * 32 + "  ".join(f"{c}: {row[f'{c} node' + ('s' if c > 1 else '')] / row[f'dbos {c}']:.1f}x DBOS"
                                           for c in counts), flush=True)
        out["throughput"] = table
        out["load_average"] = os.getloadavg()
        out["latency"] = lat = latency(url, args.latency_samples)
        print(f"cross-node signal to result: p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms "
              f"({lat['samples']} samples)")
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
