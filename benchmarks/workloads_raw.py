"""The physical baselines, one per process: raw sqlite3 commits, raw pykka tell and ask.

Run by ``benchmarks/run.py``; by hand: ``python benchmarks/workloads_raw.py sqlite --dir D
--journal wal --sync full`` or ``python benchmarks/workloads_raw.py pykka --n 20000``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sqlite3
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import report  # noqa: E402


def sqlite_commits(args: argparse.Namespace) -> None:
    """Single-row INSERT + COMMIT transactions per second, one connection, for ``args.seconds``."""
    path = os.path.join(args.dir, f"raw-{args.journal}-{args.sync}.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode = {args.journal}")
    conn.execute(f"PRAGMA synchronous = {args.sync}")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
    payload = os.urandom(200)
    n, start = 0, time.perf_counter()
    deadline = start + args.seconds
    while time.perf_counter() < deadline:
        for _ in range(10):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (v) VALUES (?)", (payload,))
            conn.execute("COMMIT")
        n += 10
    elapsed = time.perf_counter() - start
    conn.close()
    report(n=n, seconds=elapsed, per_s=n / elapsed, journal=args.journal, sync=args.sync)


def pykka_messages(args: argparse.Namespace) -> None:
    """Messages per second to one pykka ThreadingActor: tell (until all handled), and ask."""
    import pykka

    done = threading.Event()

    class Counter(pykka.ThreadingActor):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.seen = 0
            self.n = n

        def on_receive(self, message: object) -> object:
            self.seen += 1
            if self.seen == self.n:
                done.set()
            return message

    ref = Counter.start(args.n)
    t0 = time.perf_counter()
    for i in range(args.n):
        ref.tell(i)
    if not done.wait(120):
        raise TimeoutError("pykka actor did not handle every tell within 120 s")
    tell = time.perf_counter() - t0
    ref.stop()
    ref = Counter.start(args.n)
    m = max(1, args.n // 4)
    t0 = time.perf_counter()
    for i in range(m):
        ref.ask(i, timeout=30)
    ask = time.perf_counter() - t0
    ref.stop()
    report(n=args.n, tell_per_s=args.n / tell, ask_per_s=m / ask)


def main() -> None:
    """Run one baseline and print its result line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("baseline", choices=("sqlite", "pykka"))
    p.add_argument("--dir", default=".")
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--journal", choices=("wal", "delete"), default="wal")
    p.add_argument("--sync", choices=("full", "normal"), default="full")
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    (sqlite_commits if args.baseline == "sqlite" else pykka_messages)(args)


if __name__ == "__main__":
    main()
