"""The physical baselines, one per process: raw sqlite3 commits, raw pykka tell and ask, and the
floor of workloads 1, 2a and 4 (their rows, written by a plain loop with no engine: sqlite3 on a
file, or psycopg on a PostgreSQL schema).

Run by ``benchmarks/run.py``; by hand: ``python benchmarks/workloads_raw.py sqlite --dir D
--journal wal --sync full``, ``python benchmarks/workloads_raw.py pykka --n 20000``,
``python benchmarks/workloads_raw.py floor --workload timers --dir D --n 1000 --sync full`` or
``python benchmarks/workloads_raw.py floor --workload steps --n 1000 --db postgresql://...``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sqlite3
import sys
import threading
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
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


# -- the floor of workloads 1 and 4 -------------------------------------------------------------
# The statements actorflow's writer runs for these workflows (what `set_trace_callback` shows),
# written here by hand. Continuations are random bytes of the size these workflows' have.
_INSERT_WORKFLOW = (
    "INSERT OR IGNORE INTO workflows (id, type, status, parent_id, detached, test_mode, "
    "continuation, fingerprint, waiting_on, result, error, step_seq, created_at, "
    "updated_at, recent_steps) VALUES (?, ?, 'running', NULL, 0, 0, ?, ?, ?, NULL, NULL, 1, ?, ?, "
    "?)"
)
_STEP = (
    "UPDATE workflows SET continuation = coalesce(?, continuation), fingerprint = coalesce(?, "
    "fingerprint), waiting_on = ?, result = NULL, error = NULL, step_seq = ?, updated_at = ?, "
    "recent_steps = coalesce(?, recent_steps) "
    "WHERE id = ? AND step_seq = ? AND status = 'running'"
)
_END = (
    "UPDATE workflows SET status = 'completed', continuation = coalesce(NULL, continuation), "
    "fingerprint = coalesce(NULL, fingerprint), waiting_on = NULL, result = ?, error = NULL, "
    "step_seq = ?, updated_at = ?, "
    "recent_steps = coalesce(?, recent_steps) WHERE id = ? AND step_seq = ? AND status = 'running'"
)
_INSERT_PROCEDURE = (
    "INSERT INTO procedures (key, workflow_id, function, args, status, attempts, "
    "next_attempt_at, created_at) VALUES (?, ?, 'workloads_actorflow:inc', ?, 'pending', 1, 0.0, ?)"
)
_RESULT = (
    "SELECT id, type, status, parent_id, detached, test_mode, continuation, fingerprint, "
    "waiting_on, result, error, step_seq, created_at, updated_at, recent_steps "
    "FROM workflows WHERE id = ?"
)
FINGERPRINT = "0" * 64
# A step's line in its row's recent_steps (what woke it), as the engine writes them.
_STARTED = '[{:d},"started",{{"step":1}}]'
_WOKE = '\n[{:d},"procedure",{{"step":{:d},"function":"workloads_actorflow:inc","attempts":1,"ok":true}}]'
_FIRED = '\n[{:d},"timer",{{"step":2,"name":"nap"}}]'


def _end(conn: sqlite3.Connection, wid: str, seq: int, result: bytes, recent: str) -> None:
    """A workflow's last step: its row completed, what it held dropped, one history row."""
    at = time.time()
    conn.execute(_END, (result, seq, at, recent, wid, seq - 1))
    for table in ("timers", "procedures", "subscriptions", "inbox"):
        conn.execute(f"DELETE FROM {table} WHERE workflow_id = ?", (wid,))
    conn.execute("INSERT INTO history (workflow_id, at, event, detail) VALUES (?, ?, ?, ?)",
                 (wid, at, "completed", '{"result": "3"}'))


def floor(args: argparse.Namespace) -> None:
    """Workload 1 or 4 as rows only: the least SQLite work that actorflow's layout asks for
    (``--db postgresql://...``: the least PostgreSQL work, ``floor_pg``).

    N workflows are started one after another, each in its own commit (a start returns only once
    it is durable). Everything else rides in those commits, as if group commit were perfect:
    workload 1's workflows advance one procedure per commit (their procedures take no time),
    workload 4's end in the first commit after their 0.1 s timer falls due. Then the
    workflows' rows are read back, once each, as ``result()`` does. No threads, no pickling,
    no workflow code: what is left is SQLite's own cost, the floor of what any engine keeping
    these rows can reach on this machine.
    """
    from persistence import open_store

    if args.db:
        floor_pg(args)
        return
    if args.workload == "signals_one":
        raise SystemExit("the floor of 2a on SQLite is the raw commits baseline (`sqlite`)")
    path = os.path.join(args.dir, f"floor-{args.workload}-{args.sync}.db")
    open_store(path, durability=args.sync, owner=True).close()  # actorflow's schema and pragmas
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {args.sync}")
    conn.execute("PRAGMA journal_size_limit = 67108864")
    conn.execute("PRAGMA cache_size = -32000")
    blob = os.urandom(800)
    ids = [f"wf-{os.urandom(6).hex()}" for _ in range(args.n)]
    live: dict[str, tuple[int, str]] = {}  # workload 1: each running workflow's step, recent_steps
    due: list[tuple[float, str, int]] = []  # workload 4: each running workflow's timer (due, id)

    def start(wid: str) -> None:
        now = time.time()
        if args.workload == "steps":
            recent = _STARTED.format(int(now * 1000))
            conn.execute(_INSERT_WORKFLOW, (wid, "workloads_actorflow:three_steps", blob, FINGERPRINT,
                                            '{"mode": "one", "arms": [{"kind": "procedure"}]}', now, now,
                                            recent))
            conn.execute(_INSERT_PROCEDURE, (f"{wid}#1.0", wid, blob[:120], now))
            live[wid] = (1, recent)
        else:
            conn.execute(_INSERT_WORKFLOW, (wid, "workloads_actorflow:nap", blob, FINGERPRINT,
                                            '{"mode": "one", "arms": [{"kind": "timer"}]}', now, now,
                                            _STARTED.format(int(now * 1000))))
            cur = conn.execute("INSERT INTO timers (workflow_id, name, due_at) VALUES (?, ?, ?)",
                               (wid, "nap", now + 0.1))
            due.append((now + 0.1, wid, cur.lastrowid))

    def advance() -> None:
        """What the other workflows have ready, in the open transaction."""
        if args.workload == "steps":
            for wid, (seq, recent) in list(live.items()):
                conn.execute("DELETE FROM procedures WHERE workflow_id = ? AND key IN (?)",
                             (wid, f"{wid}#{seq}.0"))
                now = time.time()
                recent += _WOKE.format(int(now * 1000), seq + 1)
                if seq == 3:
                    _end(conn, wid, seq + 1, blob[:10], recent)
                    del live[wid]
                    continue
                conn.execute(_STEP, (blob, FINGERPRINT, '{"mode": "one"}', seq + 1, now, recent, wid, seq))
                conn.execute(_INSERT_PROCEDURE, (f"{wid}#{seq + 1}.0", wid, blob[:120], now))
                live[wid] = (seq + 1, recent)
        else:
            now = time.time()
            while due and due[0][0] <= now:
                _, wid, timer_id = due.pop(0)
                conn.execute("DELETE FROM timers WHERE workflow_id = ? AND id IN (?)", (wid, timer_id))
                recent = _STARTED.format(int(now * 1000)) + _FIRED.format(int(now * 1000))
                _end(conn, wid, 2, blob[:26], recent)

    t0 = time.perf_counter()
    for wid in ids:
        conn.execute("BEGIN IMMEDIATE")
        advance()  # what was ready before this start: it is committed with it
        start(wid)
        conn.execute("COMMIT")
    while live or due:
        if due:
            time.sleep(max(0.0, due[0][0] - time.time()))
        conn.execute("BEGIN IMMEDIATE")
        advance()
        conn.execute("COMMIT")
    for wid in ids:
        row = conn.execute(_RESULT, (wid,)).fetchone()
        if row[2] != "completed":
            raise AssertionError(f"{wid} is {row[2]}, not completed")
    elapsed = time.perf_counter() - t0
    conn.close()
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed, workload=args.workload, sync=args.sync)


def floor_pg(args: argparse.Namespace) -> None:
    """Workload 1, 2a or 4 as rows only, on PostgreSQL: the statements actorflow's writer sends
    for these workflows (its dialect's own templates), from a plain psycopg loop on the same
    schema. As on SQLite: one transaction per start (per signal for 2a), everything else riding
    in those transactions, then every result read once. Each transaction is one round trip (a
    pipeline: BEGIN, the statements and COMMIT sent together, answered at once), the least any
    client can do; no cluster fence, no commit token, no threads, no pickling."""
    import psycopg

    from persistence import open_store
    from persistence._pg._schema import parse_url
    from persistence._sql import INSERT_HISTORY, INSERT_PROCEDURE, INSERT_TIMER, postgresql

    open_store(args.db, durability=args.sync).close()  # actorflow's schema, created if missing
    url, schema = parse_url(args.db)
    d = postgresql(f'"{schema}"')
    insert_workflow, step, ending = d.sql(d.insert_workflow), d.sql(d.step_running), d.sql(d.step_ending)
    insert_procedure, insert_timer = d.sql(INSERT_PROCEDURE), d.sql(INSERT_TIMER + " RETURNING id")
    insert_history = d.sql(INSERT_HISTORY)
    consume_procedure = d.sql("DELETE FROM {s}.procedures WHERE workflow_id = ? AND key = ANY(?::text[])")
    consume_timer = d.sql("DELETE FROM {s}.timers WHERE workflow_id = ? AND id = ANY(?::bigint[])")
    drop = [d.sql(t) for t in d.delete_of_workflow(("timers", "procedures", "subscriptions", "inbox"))]
    result = d.sql(_RESULT.replace("FROM workflows", "FROM {s}.workflows"))
    conn = psycopg.connect(url, autocommit=True)
    blob = os.urandom(800)
    ids = [f"wf-{os.urandom(6).hex()}" for _ in range(args.n)]
    live: dict[str, tuple[int, str]] = {}
    due: list[tuple[float, str, int]] = []
    timer_ids: list[Any] = []

    def end(wid: str, seq: int, value: bytes, recent: str) -> None:
        at = time.time()
        conn.execute(ending, ("completed", at, FINGERPRINT, None, value, None, seq, at, recent, wid, seq - 1))
        for statement in drop:
            conn.execute(statement, (wid,) * statement.count("%s"))
        conn.execute(insert_history, (wid, at, "completed", '{"result": "3"}'))

    def start(wid: str) -> None:
        now = time.time()
        recent = _STARTED.format(int(now * 1000))
        kind = {"steps": "three_steps", "timers": "nap", "signals_one": "collect"}[args.workload]
        conn.execute(insert_workflow, (wid, f"workloads_actorflow:{kind}", "running", None, False, False,
                                       blob, FINGERPRINT, '{"mode": "one"}', None, None, 1, now, now,
                                       recent, None, False))
        if args.workload == "steps":
            conn.execute(insert_procedure, (f"{wid}#1.0", wid, "workloads_actorflow:inc", blob[:120], 0.0, now))
            live[wid] = (1, recent)
        elif args.workload == "timers":
            timer_ids.append((now + 0.1, wid, conn.execute(insert_timer, (wid, "nap", now + 0.1))))

    def advance() -> None:
        now = time.time()
        if args.workload == "steps":
            for wid, (seq, recent) in list(live.items()):
                conn.execute(consume_procedure, (wid, [f"{wid}#{seq}.0"]))
                recent += _WOKE.format(int(now * 1000), seq + 1)
                if seq == 3:
                    end(wid, seq + 1, blob[:10], recent)
                    del live[wid]
                    continue
                conn.execute(step, (blob, FINGERPRINT, '{"mode": "one"}', None, None, seq + 1, now, recent,
                                    wid, seq))
                conn.execute(insert_procedure, (f"{wid}#{seq + 1}.0", wid, "workloads_actorflow:inc",
                                                blob[:120], 0.0, now))
                live[wid] = (seq + 1, recent)
        elif args.workload == "timers":
            while due and due[0][0] <= now:
                _, wid, timer_id = due.pop(0)
                conn.execute(consume_timer, (wid, [timer_id]))
                end(wid, 2, blob[:26], _STARTED.format(int(now * 1000)) + _FIRED.format(int(now * 1000)))

    def transaction(work: Any) -> None:
        with conn.pipeline():  # one round trip: everything, COMMIT included, answered at the end
            conn.execute("BEGIN")
            work()
            conn.execute("COMMIT")
        while timer_ids:  # ids the server gave (answered now): workload 4's due timers
            at, wid, cur = timer_ids.pop(0)
            due.append((at, wid, cur.fetchone()[0]))

    t0 = time.perf_counter()
    if args.workload == "signals_one":
        wid = ids[0]
        transaction(lambda: start(wid))
        t0 = time.perf_counter()
        for seq in range(1, args.n + 1):
            now = time.time()
            transaction(lambda seq=seq, now=now: conn.execute(
                step, (blob, FINGERPRINT, '{"mode": "one"}', None, None, seq + 1, now, None, wid, seq)))
        transaction(lambda: end(wid, args.n + 2, blob[:10], ""))
        ids = [wid]
    else:
        for wid in ids:
            transaction(lambda wid=wid: (advance(), start(wid)))
        while live or due:
            if due:
                time.sleep(max(0.0, due[0][0] - time.time()))
            transaction(advance)
    for wid in ids:
        row = conn.execute(result, (wid,)).fetchone()
        if row is None or row[2] != "completed":
            raise AssertionError(f"{wid} is {row[2] if row else 'missing'}, not completed")
    elapsed = time.perf_counter() - t0
    conn.close()
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed, workload=args.workload, sync=args.sync,
           backend="postgresql")


def main() -> None:
    """Run one baseline and print its result line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("baseline", choices=("sqlite", "pykka", "floor"))
    p.add_argument("--dir", default=".")
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--journal", choices=("wal", "delete"), default="wal")
    p.add_argument("--sync", choices=("full", "normal"), default="full")
    p.add_argument("--workload", choices=("steps", "timers", "signals_one"), default="steps",
                   help="floor: workload 1 (steps), 4 (timers) or, on PostgreSQL, 2a (signals_one)")
    p.add_argument("--db", default=None, help="floor: a postgresql:// URL (with schema=) instead of "
                   "a SQLite file")
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    {"sqlite": sqlite_commits, "pykka": pykka_messages, "floor": floor}[args.baseline](args)


if __name__ == "__main__":
    main()
