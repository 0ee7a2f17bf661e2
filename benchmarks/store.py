"""Benchmark the SQLite store: group-commit throughput, and recovery with 1,000,000 workflows.

Run: ``python benchmarks/store.py`` (``--n 100000`` for a quick run, ``--help`` for options).

1. Committed steps per second, one caller thread and 64 concurrent caller threads, next to raw
   sqlite3 single-row commits per second measured in the same run with the same durability
   setting (the baseline group commit must beat: goal >= 2x at 64 callers).
2. Time to find the workflows with work after reopening a file that holds N suspended workflows
   (each waiting on a signal, with an armed timer), a few of which have work.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import sqlite3
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from persistence import (  # noqa: E402
    NewWorkflow,
    StepWrite,
    dumps,
    open_store,
)

SYNC = {"normal": "NORMAL", "full": "FULL"}


def raw_commits_per_second(path: str, durability: str, seconds: float) -> float:
    """Measure single-row INSERT + COMMIT transactions/s on a WAL file with plain sqlite3."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {SYNC[durability]}")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
    payload = os.urandom(200)
    n, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(20):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (v) VALUES (?)", (payload,))
            conn.execute("COMMIT")
        n += 20
        if time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - start
    conn.close()
    return n / elapsed


def _typical_step(wid: str, seq: int, payload: bytes) -> StepWrite:
    """A step as the runtime writes it: new continuation, one wait, one history row, one reducer."""
    return StepWrite(
        workflow_id=wid,
        step_seq=seq,
        continuation=payload,
        waiting_on='{"signals": ["bid"]}',
        wait_signals=("bid",),
        updated_at=time.time(),
        history=[("step", '{"await": "bid"}')],
        reducers=[lambda db, wid=wid, seq=seq: db.execute(
            "INSERT INTO app_log (wid, seq) VALUES (?, ?)", (wid, seq))],
    )


def steps_per_second(path: str, durability: str, callers: int, seconds: float) -> tuple[float, float]:
    """Measure committed steps/s with ``callers`` threads each stepping its own workflow.

    Returns (steps per second, mean steps per group commit).
    """
    store = open_store(path, durability=durability)
    store._write_wait(lambda w: w.conn.execute(
        "CREATE TABLE IF NOT EXISTS app_log (wid TEXT, seq INTEGER)"))
    payload = dumps({"locals": list(range(40)), "pc": 7})
    for c in range(callers):
        store.create_workflow(NewWorkflow(f"c{c}", "bench:wf", payload, "fp", created_at=0.0))
    counts = [0] * callers
    stop = threading.Event()
    barrier = threading.Barrier(callers + 1)

    def run(c: int) -> None:
        barrier.wait()
        seq = 0
        while not stop.is_set():
            seq += 1
            store.commit_step(_typical_step(f"c{c}", seq, payload), timeout=60)
        counts[c] = seq

    threads = [threading.Thread(target=run, args=(c,)) for c in range(callers)]
    for t in threads:
        t.start()
    commits0 = store._writer.commits
    barrier.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    commits = store._writer.commits - commits0
    store.close()
    total = sum(counts)
    return total / elapsed, total / max(commits, 1)


def throughput(tmp: str, seconds: float) -> None:
    """Print the throughput table for both durabilities."""
    print(f"Group commit throughput ({seconds:.0f} s per figure, SQLite {sqlite3.sqlite_version})")
    print(f"{'durability':<11}{'raw 1-row commits/s':>21}{'1 caller steps/s':>18}"
          f"{'64 callers steps/s':>20}{'steps/commit':>14}{'64 callers / raw':>18}")
    for durability in ("normal", "full"):
        d = tempfile.mkdtemp(dir=tmp)
        raw = raw_commits_per_second(os.path.join(d, "raw.db"), durability, seconds)
        one, _ = steps_per_second(os.path.join(d, "one.db"), durability, 1, seconds)
        many, per_commit = steps_per_second(os.path.join(d, "many.db"), durability, 64, seconds)
        print(f"{durability:<11}{raw:>21,.0f}{one:>18,.0f}{many:>20,.0f}{per_commit:>14.1f}"
              f"{many / raw:>17.2f}x")


def build_idle_file(path: str, n: int, with_work: int) -> set[str]:
    """Write ``n`` suspended workflows (plus some with work) by bulk insert; return the busy ids."""
    open_store(path).close()  # the schema, created by the store itself
    rng = random.Random(1)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -200000")
    cont = dumps({"locals": {"hp": 100, "items": list(range(20))}, "pc": 12})
    now = time.time()
    batch = 50_000
    conn.execute("BEGIN")
    for lo in range(0, n, batch):
        ids = [f"wf-{i:08d}" for i in range(lo, min(n, lo + batch))]
        conn.executemany(
            "INSERT INTO workflows (id, type, status, detached, test_mode, continuation, "
            "fingerprint, waiting_on, step_seq, created_at, updated_at) "
            "VALUES (?, 'game:patrol', 'running', 0, 0, ?, 'fp', ?, ?, ?, ?)",
            [(i, cont, '{"signals": ["alarm"], "timers": ["tick"]}', rng.randint(1, 500), now, now)
             for i in ids],
        )
        conn.executemany("INSERT INTO waits (workflow_id, name) VALUES (?, 'alarm')",
                         [(i,) for i in ids])
        conn.executemany(
            "INSERT INTO timers (workflow_id, name, due_at) VALUES (?, 'tick', ?)",
            [(i, now + rng.uniform(3600, 86400)) for i in ids],
        )
        # 1% buffer a signal they do not await; 1% have a procedure in flight.
        conn.executemany(
            "INSERT INTO inbox (workflow_id, kind, name, payload, created_at) "
            "VALUES (?, 'signal', 'trade_offer', x'00', ?)",
            [(i, now) for i in ids[::100]],
        )
        conn.executemany(
            "INSERT INTO procedures (key, workflow_id, function, args, status, attempts, "
            "next_attempt_at, created_at) VALUES (?, ?, 'game:roll', x'00', 'pending', 0, 0, ?)",
            [(f"{i}:p", i, now) for i in ids[50::100]],
        )
    # The few with work, one quarter of each kind.
    busy = [f"wf-{rng.randrange(n):08d}" for _ in range(with_work)]
    q = len(busy) // 4
    for i in busy[:q]:
        conn.execute("INSERT INTO inbox (workflow_id, kind, name, payload, created_at) "
                     "VALUES (?, 'signal', 'alarm', x'00', ?)", (i, now))
    for i in busy[q : 2 * q]:
        conn.execute("INSERT INTO inbox (workflow_id, kind, name, payload, created_at) "
                     "VALUES (?, 'cancel', '', x'00', ?)", (i, now))
    for i in busy[2 * q : 3 * q]:
        conn.execute("INSERT OR REPLACE INTO procedures (key, workflow_id, function, args, status, "
                     "attempts, result, next_attempt_at, created_at) "
                     "VALUES (?, ?, 'game:roll', x'00', 'done', 1, x'00', 0, ?)", (f"{i}:d", i, now))
    for i in busy[3 * q :]:
        conn.execute("UPDATE workflows SET step_seq = 0 WHERE id = ?", (i,))
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()
    return set(busy)


def recovery(tmp: str, n: int) -> None:
    """Print the time to reopen a file of ``n`` suspended workflows and find those with work."""
    path = os.path.join(tmp, f"idle-{n}.db")
    print(f"\nRecovery scan: {n:,} suspended workflows (each awaiting a signal, a timer armed)")
    t0 = time.perf_counter()
    busy = build_idle_file(path, n, with_work=400)
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    print(f"  built in {time.perf_counter() - t0:.1f} s (bulk insert); file size "
          f"{size / 1e6:,.0f} MB")

    t0 = time.perf_counter()
    store = open_store(path)
    t_open = time.perf_counter() - t0
    t0 = time.perf_counter()
    found = set(store.workflows_with_work())
    t_work = time.perf_counter() - t0
    t0 = time.perf_counter()
    due = store.timers_due(time.time() + 7200, 100)
    t_due = time.perf_counter() - t0
    t0 = time.perf_counter()
    pending = sum(1 for _ in store.procedures_to_run())
    t_procs = time.perf_counter() - t0
    store.close()
    assert found == busy, (len(found), len(busy))
    print(f"  open_store:               {t_open * 1e3:8.1f} ms")
    print(f"  workflows_with_work():    {t_work * 1e3:8.1f} ms  ({len(found)} found, all correct)")
    print(f"  timers_due(now+2h, 100):  {t_due * 1e3:8.1f} ms  ({len(due)} timers)")
    print(f"  procedures_to_run():      {t_procs * 1e3:8.1f} ms  ({pending:,} pending)")
    os.remove(path)
    for suffix in ("-wal", "-shm", ".lock"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def main() -> None:
    """Parse arguments and run the benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000,
                        help="suspended workflows in the recovery file (default 1,000,000)")
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="duration of each throughput figure (default 3)")
    parser.add_argument("--dir", default="/tmp", help="where to put the files (default /tmp)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-recovery", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="actorflow-bench-", dir=args.dir) as tmp:
        if not args.skip_throughput:
            throughput(tmp, args.seconds)
        if not args.skip_recovery:
            recovery(tmp, args.n)


if __name__ == "__main__":
    main()
