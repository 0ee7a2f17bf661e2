"""The benchmark workloads on DBOS Transact (SQLite system database, or PostgreSQL, its native one),
one per process.

The same workloads as ``workloads_actorflow.py``, written as DBOS documents them: ``@DBOS.step``
for procedures, ``DBOS.send``/``DBOS.recv`` for signals, ``DBOS.sleep`` for durable timers,
``DBOS.start_workflow`` for children. Needs ``pip install -e '.[bench]'``.

Run by ``benchmarks/run.py``; by hand: ``python benchmarks/workloads_dbos.py WORKLOAD --dir D
[--n N] [--journal delete|wal] [--sync full|normal] [--threads T] [--db postgresql://...]
[--executor NAME --start-after FILE]``.
With ``--db`` (workloads 1-4) DBOS keeps its system database on that PostgreSQL server, in the
URL's database (DBOS creates it if missing; give each run a database of its own), at the server's
durability (``synchronous_commit=on`` by default: full). Several processes on one database
(``benchmarks/cluster.py``) each get an ``--executor`` of their own and start together.
"""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
import shutil
import sqlite3
import sys
import threading
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import announce_ready, lateness, report, start_clock, wait_to_start  # noqa: E402
from dbos import DBOS, SetWorkflowID  # noqa: E402

WAIT = 600.0


@DBOS.step()
def inc(x: int) -> int:
    return x + 1


@DBOS.workflow()
def three_steps(x: int) -> int:
    return inc(inc(inc(x)))


@DBOS.workflow()
def collect(n: int) -> int:
    total = 0
    for _ in range(n):
        total += DBOS.recv("item", timeout_seconds=WAIT)
    return total


@DBOS.workflow()
def wait_one() -> Any:
    return DBOS.recv("item", timeout_seconds=WAIT)


@DBOS.workflow()
def child(x: int) -> int:
    return 2 * x


@DBOS.workflow()
def fan_out(n: int) -> int:
    handles = [DBOS.start_workflow(child, i) for i in range(n)]
    return sum(h.get_result() for h in handles)


@DBOS.workflow()
def nap(seconds: float) -> float:
    due = time.time() + seconds
    DBOS.sleep(seconds)
    return time.time() - due


@DBOS.workflow()
def parked() -> Any:
    return DBOS.recv("go", timeout_seconds=WAIT)


@DBOS.step()
def noop(i: int) -> int:
    return i


@DBOS.workflow()
def looper(n: int) -> int:
    for i in range(n):
        noop(i)
    DBOS.recv("go", timeout_seconds=WAIT)
    return n


def _engine(path: str, sync: str) -> Any:
    """A system-database engine like DBOS's own, with ``synchronous`` set on every connection."""
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{path}")

    @sa.event.listens_for(engine, "connect")
    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        # As DBOS's SQLite engine does (IMMEDIATE transactions, busy timeout, foreign keys) ...
        dbapi_conn.isolation_level = "IMMEDIATE"
        dbapi_conn.execute("PRAGMA busy_timeout=30000")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")
        # ... plus the durability under comparison.
        dbapi_conn.execute(f"PRAGMA synchronous={sync.upper()}")

    return engine


def launch(args: argparse.Namespace, path: str | None = None) -> str:
    """Configure and launch DBOS on a SQLite file in ``args.dir`` (return the file's path), or on
    the PostgreSQL database ``args.db`` names (return the URL)."""
    if args.db and path is None:
        DBOS(config={  # type: ignore[arg-type]
            "name": "actorflow-bench",
            "system_database_url": args.db,
            "log_level": "WARNING",
            "run_admin_server": False,
            **({"max_executor_threads": args.threads} if args.threads else {}),
            # One of several processes on one database: its own executor, so that its launch
            # recovers only its own pending workflows, never another process's.
            **({"executor_id": args.executor} if args.executor else {}),
        })
        DBOS.launch()
        _start_together(args)
        return str(args.db)
    path = path or os.path.join(args.dir, "dbos.sqlite")
    if args.journal == "wal" and not os.path.exists(path):
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")  # persistent: stored in the file
        conn.close()
    config: dict[str, Any] = {
        "name": "actorflow-bench",
        "system_database_url": f"sqlite:///{path}",
        "notification_listener_polling_interval_sec": 0.01,
        "log_level": "WARNING",
        "run_admin_server": False,
    }
    if args.threads:
        config["max_executor_threads"] = args.threads
    if args.sync != "full":
        config["system_database_engine"] = _engine(path, args.sync)
    DBOS(config=config)  # type: ignore[arg-type]
    DBOS.launch()
    return path


def _start_together(args: argparse.Namespace) -> None:
    """One process of several (benchmarks/cluster.py): once launched, say so, and start only when
    every process is launched, so that their runs overlap."""
    if not args.start_after:
        return
    wait_to_start(args.start_after, WAIT)


def _results(handles: list) -> list:
    return [h.get_result() for h in handles]


def steps(args: argparse.Namespace) -> None:
    """1: N workflows, each calling three steps, started one after another."""
    launch(args)
    t0 = start_clock()
    handles = [DBOS.start_workflow(three_steps, i) for i in range(args.n)]
    results = _results(handles)
    elapsed = time.perf_counter() - t0
    assert results == [i + 3 for i in range(args.n)], "wrong results"
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed)


def signals_one(args: argparse.Namespace) -> None:
    """2a: one workflow receiving N messages, sent one after another."""
    launch(args)
    with SetWorkflowID("collector"):
        handle = DBOS.start_workflow(collect, args.n)
    t0 = start_clock()
    for _ in range(args.n):
        DBOS.send("collector", 1, "item")
    total = handle.get_result()
    elapsed = time.perf_counter() - t0
    assert total == args.n
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed)


def signals_many(args: argparse.Namespace) -> None:
    """2b: N workflows each receiving one message."""
    launch(args)
    handles = []
    for i in range(args.n):
        with SetWorkflowID(f"{args.executor}w-{i}"):
            handles.append(DBOS.start_workflow(wait_one))
    t0 = start_clock()
    for i in range(args.n):
        DBOS.send(f"{args.executor}w-{i}", i, "item")
    results = _results(handles)
    elapsed = time.perf_counter() - t0
    assert results == list(range(args.n))
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed)


def fanout(args: argparse.Namespace) -> None:
    """3: a parent starting N child workflows and awaiting them all."""
    launch(args)
    t0 = start_clock()
    total = DBOS.start_workflow(fan_out, args.n).get_result()
    elapsed = time.perf_counter() - t0
    assert total == args.n * (args.n - 1)
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed)


def timers(args: argparse.Namespace) -> None:
    """4: N workflows each in DBOS.sleep(0.1): throughput and lateness."""
    launch(args)
    t0 = start_clock()
    handles = [DBOS.start_workflow(nap, 0.1) for _ in range(args.n)]
    late = _results(handles)
    elapsed = time.perf_counter() - t0
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed, **lateness(late))


def _pending(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT count(*) FROM workflow_status WHERE status = 'PENDING'"
        ).fetchone()[0]
    finally:
        conn.close()


def recovery(args: argparse.Namespace) -> None:
    """5: prepare N workflows blocked in recv and wait to be killed, or recover and finish them."""
    path = os.path.join(args.dir, "recovery.sqlite")
    if args.phase == "prepare":
        launch(args, path)
        for i in range(args.n):
            with SetWorkflowID(f"r-{i:08d}"):
                DBOS.start_workflow(parked)
        deadline = time.monotonic() + WAIT
        while _pending(path) < args.n and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # let every workflow thread reach its recv
        announce_ready()
        time.sleep(WAIT)
        return
    t0 = time.perf_counter()
    launch(args, path)
    ready = time.perf_counter() - t0
    ids = [f"r-{i:08d}" for i in range(args.n)]
    for wid in ids:
        DBOS.send(wid, "go", "go")
    results = _results([DBOS.retrieve_workflow(wid) for wid in ids])
    done = time.perf_counter() - t0
    assert results == ["go"] * args.n
    report(n=args.n, ready_s=ready, complete_s=done)


def resume(args: argparse.Namespace) -> None:
    """6: build a workflow that ran N steps and waits (phase build), or time one recovery of it."""
    base = os.path.join(args.dir, f"loop-{args.n}.sqlite")
    if args.phase == "build":
        t0 = time.perf_counter()
        launch(args, base)
        with SetWorkflowID("loop"):
            DBOS.start_workflow(looper, args.n)
        deadline = time.monotonic() + WAIT
        while len(DBOS.list_workflow_steps("loop")) < args.n and time.monotonic() < deadline:
            time.sleep(0.05)
        report(n=args.n, build_s=time.perf_counter() - t0)
        os._exit(0)  # leave it pending, as a crash would
    copy = os.path.join(args.dir, f"loop-{args.n}-{args.rep}.sqlite")
    for suffix in ("", "-wal"):
        if os.path.exists(base + suffix):
            shutil.copyfile(base + suffix, copy + suffix)
    t0 = time.perf_counter()
    launch(args, copy)
    opened = time.perf_counter()
    DBOS.send("loop", "go", "go")
    value = DBOS.retrieve_workflow("loop").get_result()
    t1 = time.perf_counter()
    assert value == args.n
    report(n=args.n, open_ms=(opened - t0) * 1e3, resume_ms=(t1 - opened) * 1e3,
           total_ms=(t1 - t0) * 1e3)


WORKLOADS = {
    "steps": steps,
    "signals_one": signals_one,
    "signals_many": signals_many,
    "fanout": fanout,
    "timers": timers,
    "recovery": recovery,
    "resume": resume,
}


def main() -> None:
    """Run one workload and print its result line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workload", choices=sorted(WORKLOADS))
    p.add_argument("--dir", required=True, help="an empty scratch directory")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--journal", choices=("delete", "wal"), default="delete",
                   help="delete: DBOS's default (SQLite's rollback journal); wal: set on the file first")
    p.add_argument("--sync", choices=("full", "normal"), default="full",
                   help="full: SQLite's default, as DBOS leaves it")
    p.add_argument("--threads", type=int, default=0, help="max_executor_threads (0: DBOS default)")
    p.add_argument("--db", default=None,
                   help="a postgresql:// URL of a database (created if missing) to run on instead of "
                   "a SQLite file (workloads 1-4)")
    p.add_argument("--executor", default="",
                   help="with --db, one of several processes: its executor id (and workflow id prefix)")
    p.add_argument("--start-after", dest="start_after", default=None,
                   help="with --db, once launched, wait for this file to exist before starting")
    p.add_argument("--phase", default="run")
    p.add_argument("--rep", type=int, default=0)
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    logging.getLogger("dbos").setLevel(logging.WARNING)
    try:
        WORKLOADS[args.workload](args)
    finally:
        threading.Thread(target=DBOS.destroy, daemon=True).start()
        time.sleep(0.2)
    os._exit(0)  # DBOS's background threads may outlive destroy(); the figures are printed


if __name__ == "__main__":
    main()
