"""Benchmark retention: a long run stays flat, and pruning a million does not stall the others.

Run: ``python benchmarks/retention.py steady`` and ``python benchmarks/retention.py bulk``
(``--help`` on each for options; ``--quick`` for a short run of either).

steady
    A long run of short workflows (each: a procedure call, a 0.2 s timer, a result: three steps)
    started back to back by driver threads on a real clock, with ``retention=60``. Every
    ``--every`` seconds it prints the file's size (database plus write-ahead log), the number of
    workflow rows, and the step rate of that window. Past the first minute (when the first
    finished workflows reach their retention) the size, the rows and the rate must stay flat.
bulk
    A file holding ``--n`` (1,000,000) finished workflows, each row shaped like a real one (the
    row and the history event that a short workflow leaves), and a system on it whose running
    workflows take signals from driver threads throughout. It measures the signal latency (a
    ``signal()`` returns once the step that takes it has committed, so it is that step's pause)
    for a few seconds before, then ``system.prune(older_than=0)``: how long it takes, and the
    latency of the running workflows' steps meanwhile (p50, p99, max).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sqlite3
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import file_size_mb, percentile, quiet_structlog, report  # noqa: E402

from actors import ActorSystem  # noqa: E402
from workflows import procedure, signal, timer, workflow  # noqa: E402


@procedure
def work(x: int) -> int:
    return x * 2


@workflow(name="benchmarks.retention.short")
async def short(x: int) -> int:
    v = await procedure(work, x)
    await timer("cool", 0.2)
    return v


@workflow(name="benchmarks.retention.quick")
async def quick(x: int) -> int:
    return x


@workflow(name="benchmarks.retention.pinger")
async def pinger() -> int:
    total = 0
    while True:
        total += await signal("ping")
        if total < 0:
            return total


def _rows(db: str) -> int:
    con = sqlite3.connect(db, timeout=30)
    try:
        n: int = con.execute("SELECT count(*) FROM workflows").fetchone()[0]
        return n
    finally:
        con.close()


def steady(args: argparse.Namespace) -> None:
    quiet_structlog()
    directory = tempfile.mkdtemp(prefix="af-retention-", dir=args.dir)
    db = os.path.join(directory, "steady.db")
    done = [0]
    lock = threading.Lock()
    stop = threading.Event()
    samples: list[dict[str, float]] = []
    with ActorSystem(db, retention=args.retention) as system:

        def drive(k: int) -> None:
            i = 0
            while not stop.is_set():
                refs = system.start_many(short, [(k * 1_000_000 + i + j,) for j in range(args.batch)])
                for r in refs:
                    r.result(timeout=60)
                i += args.batch
                with lock:
                    done[0] += len(refs)

        threads = [threading.Thread(target=drive, args=(k,), daemon=True) for k in range(args.drivers)]
        for t in threads:
            t.start()
        start = last_t = time.monotonic()
        last_done = 0
        print(f"{'t (s)':>6} {'file MB':>8} {'db MB':>7} {'rows':>7} {'wf/s':>7} {'steps/s':>8} {'pruned':>8}", flush=True)
        while True:
            time.sleep(args.every)
            now = time.monotonic()
            with lock:
                n = done[0]
            rate = (n - last_done) / (now - last_t)
            last_done, last_t = n, now
            sample = {
                "t": round(now - start, 1),
                "file_mb": round(file_size_mb(db), 2),
                "db_mb": round(os.path.getsize(db) / 1e6, 2),
                "rows": _rows(db),
                "workflows_per_s": round(rate, 1),
                "steps_per_s": round(3 * rate, 1),
                "pruned": system._retention.pruned,
            }
            samples.append(sample)
            print(f"{sample['t']:>6} {sample['file_mb']:>8} {sample['db_mb']:>7} {sample['rows']:>7} "
                  f"{sample['workflows_per_s']:>7} {sample['steps_per_s']:>8} {sample['pruned']:>8}", flush=True)
            if now - start >= args.duration:
                break
        stop.set()
        for t in threads:
            t.join(60)
    late = [s for s in samples if s["t"] > 2 * args.retention]
    report(workload="retention_steady", retention=args.retention, duration=args.duration,
           samples=samples,
           late_file_mb=[min(s["file_mb"] for s in late), max(s["file_mb"] for s in late)] if late else None,
           late_rows=[min(s["rows"] for s in late), max(s["rows"] for s in late)] if late else None,
           late_steps_per_s=[min(s["steps_per_s"] for s in late), max(s["steps_per_s"] for s in late)] if late else None)


def _fill(db: str, n: int, finished_at: float) -> None:
    """``n`` finished workflows, each a copy of a real short workflow's row and history event."""
    with ActorSystem(db, retention=None) as system:
        ref = system.start(quick, 1, id="model")
        ref.result(timeout=60)
    con = sqlite3.connect(db, isolation_level=None)
    try:
        con.execute("BEGIN")
        cols = [r[1] for r in con.execute("PRAGMA table_info(workflows)")]
        picked = ", ".join(
            {"id": "'done-' || x", "finished_at": "?", "updated_at": "?", "created_at": "?"}.get(c, c)
            for c in cols
        )
        con.execute(
            f"INSERT INTO workflows ({', '.join(cols)}) WITH RECURSIVE seq(x) AS "
            f"(SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < ?) "
            f"SELECT {picked} FROM seq, workflows WHERE workflows.id = 'model'",
            (n, finished_at, finished_at, finished_at),
        )
        con.execute(
            "INSERT INTO history (workflow_id, at, event, detail) WITH RECURSIVE seq(x) AS "
            "(SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < ?) "
            "SELECT 'done-' || x, ?, event, detail FROM seq, history WHERE history.workflow_id = 'model'",
            (n, finished_at),
        )
        con.execute("COMMIT")
    finally:
        con.close()


def bulk(args: argparse.Namespace) -> None:
    quiet_structlog()
    directory = tempfile.mkdtemp(prefix="af-retention-", dir=args.dir)
    db = os.path.join(directory, "bulk.db")
    t0 = time.perf_counter()
    _fill(db, args.n, time.time() - 3600)
    fill_s = time.perf_counter() - t0
    size_before = file_size_mb(db)
    print(f"filled {args.n:,} finished workflows in {fill_s:.1f}s ({size_before:.0f} MB)", flush=True)
    with ActorSystem(db, retention=None) as system:
        refs = [system.start(pinger, id=f"ping-{i}") for i in range(args.running)]
        system.idle(timeout=60)
        phase = ["before"]
        latencies: dict[str, list[float]] = {"before": [], "during": [], "after": []}
        stop = threading.Event()

        def drive(ref: object) -> None:
            while not stop.is_set():
                t = time.perf_counter()
                ref.signal("ping", 1)  # type: ignore[attr-defined]
                latencies[phase[0]].append(time.perf_counter() - t)

        threads = [threading.Thread(target=drive, args=(r,), daemon=True) for r in refs]
        for t in threads:
            t.start()
        time.sleep(args.settle)
        phase[0] = "during"
        t0 = time.perf_counter()
        pruned = system.prune(older_than=0)
        prune_s = time.perf_counter() - t0
        phase[0] = "after"
        time.sleep(min(args.settle, 2.0))
        stop.set()
        for t in threads:
            t.join(30)
        batch = system._retention.batch
    figures: dict[str, object] = {
        "workload": "retention_bulk", "n": args.n, "pruned": pruned, "prune_s": round(prune_s, 2),
        "pruned_per_s": round(pruned / prune_s), "running": args.running, "final_batch": batch,
        "file_mb_before": round(size_before, 1), "file_mb_after": round(file_size_mb(db), 1),
    }
    for name, values in latencies.items():
        if values:
            figures[name] = {
                "signals": len(values),
                "signals_per_s": round(len(values) / (prune_s if name == "during" else args.settle if name == "before" else min(args.settle, 2.0))),
                "p50_ms": round(percentile(values, 50) * 1e3, 2),
                "p99_ms": round(percentile(values, 99) * 1e3, 2),
                "max_ms": round(max(values) * 1e3, 2),
            }
    print(json.dumps(figures, indent=2), flush=True)
    report(**figures)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    sp = sub.add_parser("steady", help="a long run of short workflows with a one-minute retention")
    sp.add_argument("--duration", type=float, default=300.0, help="real seconds (default 300)")
    sp.add_argument("--retention", type=float, default=60.0, help="seconds (default 60)")
    sp.add_argument("--every", type=float, default=10.0, help="seconds between samples (default 10)")
    sp.add_argument("--drivers", type=int, default=4, help="threads starting workflows (default 4)")
    sp.add_argument("--batch", type=int, default=50, help="workflows per start_many (default 50)")
    sp.add_argument("--quick", action="store_true", help="20 s, retention 5 s, a sample a second")
    sp.add_argument("--dir", default=None, help="directory for the file (default: a temporary one)")
    sb = sub.add_parser("bulk", help="prune 1,000,000 finished workflows while others run")
    sb.add_argument("--n", type=int, default=1_000_000, help="finished workflows (default 1,000,000)")
    sb.add_argument("--running", type=int, default=8, help="running workflows taking signals (default 8)")
    sb.add_argument("--settle", type=float, default=5.0, help="seconds measured before the prune (default 5)")
    sb.add_argument("--quick", action="store_true", help="20,000 workflows")
    sb.add_argument("--dir", default=None, help="directory for the file (default: a temporary one)")
    args = p.parse_args(argv)
    if args.what == "steady":
        if args.quick:
            args.duration, args.retention, args.every = 20.0, 5.0, 1.0
        steady(args)
    else:
        if args.quick:
            args.n, args.settle = 20_000, 2.0
        bulk(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
