"""Where a cluster node's time goes: one workload on several node processes, with the server's
counts and a sampling profile of the nodes.

    python benchmarks/cluster_profile.py [--workload signals_many] [--nodes 2] [--n 1000]
        [--spy] [--out DIR] [--against REV [--reps K]]

It starts a throwaway PostgreSQL server (production settings, fsync on) with
``pg_stat_statements`` loaded (``track = all``: the statements inside the fence and the routing
trigger are counted too), runs the workload as ``benchmarks/cluster.py`` does (each node its
share, all started together once every node is open), and reports, for the timed window only
(from the start signal to the last node's result):

- the server's counts: commits (``pg_stat_database.xact_commit``), statements by kind and their
  server-side time (``pg_stat_statements``), each per workflow of the workload;
- CPU seconds of each node process, of the PostgreSQL server (the postmaster and all its
  backends, ended ones included) and of the whole machine (everything else that ran);
- with ``--spy``: a ``py-spy`` sampling profile of every node over the window, of the samples
  in which a thread held the GIL (ran Python; a wait on the server, a lock or a sleep releases
  it): by thread, by the function running and by the functions on the stack. The samples against
  the window's (rate x seconds) say how much of the window the node ran Python. The raw
  profiles are kept in ``--out``.

``--against REV`` runs this script of a git revision (a worktree of it, made and removed here)
and of this checkout one after another, ``--reps`` times each (3 by default), each on a server
of its own, and prints the medians side by side: CPU milliseconds per workflow (nodes, server,
both), statements and commits per workflow, and how much of the machine other work took.

Needs ``pip install py-spy`` for ``--spy``. Figures from a machine that runs anything else are
not to be trusted: the machine's CPU line says how much else ran.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import READY_PREFIX, result_of  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
STATS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all",
         "pg_stat_statements.max": "5000"}

def cpu_of(pid: int, children: bool = False) -> float:
    """CPU seconds of a live process (and of its reaped children, if asked)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[11:15] are utime, stime, cutime, cstime (the 14th-17th of the whole line)
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def server_cpu(postmaster: int) -> float:
    """CPU seconds of the server: the postmaster, its ended backends and its live ones."""
    total = cpu_of(postmaster, children=True)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == postmaster:
                total += (int(fields[11]) + int(fields[12])) / TICK
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
    return total


def machine_cpu() -> float:
    """Busy CPU seconds of the whole machine (all cores) since boot."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + parts[4]
    return (sum(parts[:8]) - idle) / TICK


def postmaster_pid(directory: str) -> int:
    with open(os.path.join(directory, "data", "postmaster.pid")) as f:
        return int(f.readline())


def thread_of(first: str) -> str:
    """The name of a py-spy raw line's thread (``thread (TID): NAME``), numbers dropped, so that
    a pool's threads sum up."""
    name = first.split("): ", 1)[1] if "): " in first else first
    return name.rstrip("0123456789").rstrip("-_ ") or name


def read_spy(path: str) -> tuple[collections.Counter[str], collections.Counter[str], collections.Counter[str]]:
    """A py-spy raw profile (samples holding the GIL only): samples by thread, by function running (the
    leaf) and by function anywhere on the stack (inclusive)."""
    threads: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    with open(path) as f:
        for line in f:
            frames, _, count = line.rstrip("\n").rpartition(" ")
            if not frames:
                continue
            parts = frames.split(";")
            n = int(count)
            threads[thread_of(parts[0])] += n
            stack = [x.split(" (", 1)[0] for x in parts[1:]]
            if stack:
                own[parts[-1]] += n
            for fn in set(stack):
                incl[fn] += n
    return threads, own, incl


def compare(args: argparse.Namespace) -> None:
    """``--against``: this script of ``args.against`` and of this checkout, alternately."""
    import statistics

    from cluster import checkout

    rows = ("nodes ms/wf", "server ms/wf", "total ms/wf", "statements/wf", "commits/wf", "other work (cores)")
    figures: dict[str, list[tuple[float, ...]]] = {}
    with tempfile.TemporaryDirectory() as scratch, checkout(args.against, scratch) as old:
        assert old is not None
        trees = {f"{args.against}": old, "this checkout": ROOT}
        for rep in range(args.reps):
            for name, root in trees.items():
                out = os.path.join(scratch, f"run-{rep}-{len(figures.get(name, []))}-{name.replace('/', '_')}")
                done = subprocess.run(
                    [sys.executable, str(root / "benchmarks" / "cluster_profile.py"), "--workload", args.workload,
                     "--nodes", str(args.nodes), "--n", str(args.n), "--out", out],
                    cwd=root, capture_output=True, text=True)
                assert done.returncode == 0, f"{name} failed:\n{done.stderr[-3000:]}"
                with open(os.path.join(out, "report.json")) as f:
                    r = json.load(f)
                n, cpu = r["n"], r["cpu"]
                nodes = sum(v for k, v in cpu.items() if k.startswith("node-"))
                calls = sum(s["calls"] for s in r["statements"])
                row = (1e3 * nodes / n, 1e3 * cpu["server"] / n, 1e3 * (nodes + cpu["server"]) / n, calls / n,
                       r["commits_per_wf"], (cpu["machine"] - cpu["server"] - nodes) / r["wall_s"])
                figures.setdefault(name, []).append(row)
                print(f"{name:>16} run {rep + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in zip(rows, row, strict=True)),
                      flush=True)
    print(f"\n{args.workload} on {args.nodes} nodes, N = {args.n // args.nodes * args.nodes}, medians of {args.reps}:")
    print(f"| per workflow | {' | '.join(figures)} |")
    print(f"| --- |{' ---: |' * len(figures)}")
    for i, label in enumerate(rows):
        print(f"| {label} | " + " | ".join(f"{statistics.median(r[i] for r in runs):.2f}" for runs in figures.values())
              + " |")
    print("(statements: the 40 most called; other work: the machine's CPU beside the nodes and the server)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="signals_many",
                   choices=("steps", "signals_many", "fanout", "timers"))
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--spy", action="store_true", help="sample every node with py-spy")
    p.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    p.add_argument("--out", default=None, help="where the raw profiles go (default: a temporary directory)")
    p.add_argument("--against", default=None, help="a git revision to compare with (CPU per workflow)")
    p.add_argument("--reps", type=int, default=3, help="runs of each tree with --against")
    args = p.parse_args()
    if args.against is not None:
        if args.spy:
            p.error("--against compares CPU and counts only; run --spy without it")
        compare(args)
        return
    if args.spy and shutil.which("py-spy") is None and not (pathlib.Path(sys.executable).parent / "py-spy").exists():
        p.error("--spy needs py-spy: pip install py-spy")
    spy_bin = shutil.which("py-spy") or str(pathlib.Path(sys.executable).parent / "py-spy")
    out_dir = args.out or tempfile.mkdtemp(prefix="af-profile-")
    os.makedirs(out_dir, exist_ok=True)

    import psycopg

    from tests.pgserver import PgServer

    pg = PgServer.start(STATS)
    try:
        assert pg.directory is not None
        pm = postmaster_pid(pg.directory)
        url = pg.url("postgres")
        base = url + ("&" if "?" in url else "?") + f"schema=prof_{args.workload}"
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        scratch = tempfile.mkdtemp(prefix="af-profile-run-")
        go = os.path.join(scratch, "go")
        share = args.n // args.nodes
        procs = [subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "workloads_actorflow.py"), args.workload,
             "--dir", os.path.join(scratch, f"node-{k}"), "--n", str(share), "--durability", "full",
             "--db", base, "--start-after", go],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(args.nodes)]
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == READY_PREFIX, f"a node did not open: {line!r}"
        spies = []
        if args.spy:
            for k, proc in enumerate(procs):
                spies.append(subprocess.Popen(
                    [spy_bin, "record", "--pid", str(proc.pid), "--threads", "--gil", "--nonblocking",
                     "--rate", str(args.rate), "--format", "raw", "-o", os.path.join(out_dir, f"node-{k}.txt")],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(1.0)  # py-spy attached
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("SELECT pg_stat_statements_reset()")
            c.execute("SELECT pg_stat_reset()")
        time.sleep(0.6)  # the statistics collector's reset is seen
        with psycopg.connect(url, autocommit=True) as c:
            commits0 = int(c.execute("SELECT sum(xact_commit) FROM pg_stat_database").fetchone()[0])  # type: ignore[index]
        cpu0 = {k: cpu_of(proc.pid) for k, proc in enumerate(procs)}
        srv0, mach0, t0 = server_cpu(pm), machine_cpu(), time.monotonic()
        load0 = os.getloadavg()
        open(go, "w").close()
        cpu1: dict[int, float] = {}
        seconds: dict[int, float] = {}
        pending = dict(enumerate(procs))
        while pending:
            for k, proc in list(pending.items()):
                assert proc.stdout is not None
                line = proc.stdout.readline()
                if line.startswith("RESULT "):
                    cpu1[k] = cpu_of(proc.pid)
                    if spies:
                        spies[k].send_signal(2)  # the window ends: py-spy writes its profile
                    figures = result_of(line)
                    assert figures is not None
                    seconds[k] = float(figures["seconds"])
                    del pending[k]
                elif not line:
                    raise SystemExit(f"node {k} ended without a result:\n{proc.stderr.read() if proc.stderr else ''}")
        wall = time.monotonic() - t0
        srv1, mach1 = server_cpu(pm), machine_cpu()
        load1 = os.getloadavg()
        with psycopg.connect(url, autocommit=True) as c:
            commits = int(c.execute("SELECT sum(xact_commit) FROM pg_stat_database").fetchone()[0]) - commits0  # type: ignore[index]
            stmts = c.execute(
                "SELECT calls, total_exec_time, query FROM pg_stat_statements "
                "WHERE query NOT LIKE '%pg_stat%' ORDER BY calls DESC").fetchall()
        for proc in procs:
            proc.communicate(timeout=300)
        for sp in spies:
            sp.wait(timeout=60)

        n = share * args.nodes
        per_s = n / max(seconds.values())
        report: dict[str, Any] = {
            "workload": args.workload, "nodes": args.nodes, "n": n, "per_s": per_s, "wall_s": wall,
            "load": [load0, load1], "commits": commits, "commits_per_wf": commits / n,
            "cpu": {**{f"node-{k}": cpu1[k] - cpu0[k] for k in cpu0}, "server": srv1 - srv0,
                    "machine": mach1 - mach0},
            "statements": [{"calls": int(c), "per_wf": int(c) / n, "ms": float(t), "query": " ".join(q.split())[:160]}
                           for c, t, q in stmts[:40]],
        }
        print(f"{args.workload} on {args.nodes} nodes: {n} workflows, {per_s:.0f}/s, window {wall:.2f} s, "
              f"load average {load0[0]:.2f} -> {load1[0]:.2f}")
        print(f"commits {commits} ({commits / n:.2f} per workflow)")
        cpu = report["cpu"]
        print("CPU seconds in the window (2 cores = %.2f s available): " % (2 * wall)
              + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
              + f", everything else {cpu['machine'] - cpu['server'] - sum(cpu1[k] - cpu0[k] for k in cpu0):.2f}")
        total_calls = sum(int(c) for c, _, _ in stmts)
        print(f"statements {total_calls} ({total_calls / n:.1f} per workflow), by calls:")
        for s in report["statements"][:25]:
            print(f"  {s['calls']:7d} {s['per_wf']:6.2f}/wf {s['ms']:9.1f} ms  {s['query']}")
        if spies:
            report["threads"] = {}
            for k in range(args.nodes):
                path = os.path.join(out_dir, f"node-{k}.txt")
                if not os.path.exists(path):
                    print(f"no profile of node {k}")
                    continue
                threads, own, incl = read_spy(path)
                window = args.rate * wall
                print(f"node-{k}: samples running by thread (the window holds {window:.0f} per thread):")
                for name, c in threads.most_common():
                    print(f"  {c:7d}  {name}")
                total = sum(threads.values())
                print(f"  running, by function on the stack (of {total} samples):")
                for fn, c in incl.most_common(45):
                    print(f"    {c:7d} {100 * c / total:5.1f}%  {fn}")
                print("  running, by function running:")
                for fn, c in own.most_common(20):
                    print(f"    {c:7d} {100 * c / total:5.1f}%  {fn[:150]}")
                report["threads"][f"node-{k}"] = dict(threads)
                report.setdefault("inclusive", {})[f"node-{k}"] = dict(incl.most_common(200))
        with open(os.path.join(out_dir, "report.json"), "w") as f:
            json.dump(report, f, indent=1)
        print(f"raw profiles and report.json in {out_dir}")
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
