"""The benchmark workloads on actorflow, one per process.

Run by ``benchmarks/run.py``; by hand: ``python benchmarks/workloads_actorflow.py WORKLOAD --dir D
[--n N] [--durability full|normal] [--db postgresql://...]``. Prints one ``RESULT {json}`` line.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sqlite3
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    announce_ready,
    file_size_mb,
    lateness,
    quiet_structlog,
    report,
    rss_mb,
    start_clock,
    wait_to_start,
)

quiet_structlog()

from actors import ActorSystem  # noqa: E402
from workflows import gather, now, procedure, signal, spawn, subscribe, timer, workflow  # noqa: E402

WAIT = 600.0  # upper bound on any single wait; a stuck run fails loudly instead of hanging


@procedure
def inc(x: int) -> int:
    return x + 1


@workflow(name="workloads_actorflow:three_steps")
async def three_steps(x: int) -> int:
    a = await procedure(inc, x)
    b = await procedure(inc, a)
    return await procedure(inc, b)


@workflow(name="workloads_actorflow:collect")
async def collect(n: int) -> int:
    total = 0
    i = 0
    while i < n:
        total += await signal("item")
        i += 1
    return total


@workflow(name="workloads_actorflow:wait_one")
async def wait_one() -> object:
    return await signal("item")


@workflow(name="workloads_actorflow:child")
async def child(x: int) -> int:
    return 2 * x


@workflow(name="workloads_actorflow:fan_out")
async def fan_out(n: int) -> int:
    results = await gather(*[spawn(child, i) for i in range(n)])
    return sum(results)


@workflow(name="workloads_actorflow:nap")
async def nap(seconds: float) -> float:
    due = now() + seconds
    await timer("nap", seconds)
    return now() - due


@workflow(name="workloads_actorflow:parked")
async def parked() -> object:
    subscribe("go")
    return await signal("go")


@workflow(name="workloads_actorflow:looper")
async def looper(n: int) -> int:
    i = 0
    while i < n:
        await timer("tick", 0)
        i += 1
    await signal("go")
    return i


def _system(args: argparse.Namespace, db: str | None = None, **kw: object) -> ActorSystem:
    if getattr(args, "metrics", False):
        from prometheus_client import CollectorRegistry

        kw["metrics"] = CollectorRegistry()  # counted, as an application that exports them
    system = ActorSystem(db or args.db or os.path.join(args.dir, "af.db"), durability=args.durability, **kw)
    if args.start_after:
        # One node of several (benchmarks/cluster.py): open, say so, and start the clock only
        # when every node is open, so that the nodes' runs overlap.
        wait_to_start(args.start_after, WAIT)
    return system


def _wait_all(refs: list) -> list:
    return [r.result(timeout=WAIT) for r in refs]


# -- workloads 1-4 --------------------------------------------------------------------------
def steps(args: argparse.Namespace) -> None:
    """1: N workflows, each calling three procedures, started one after another."""
    _steps(args, lambda system: [system.start(three_steps, i) for i in range(args.n)])


def _steps(args: argparse.Namespace, start_all) -> None:
    with _system(args) as system:
        t0 = start_clock()
        results = _wait_all(start_all(system))
        elapsed = time.perf_counter() - t0
    assert results == [i + 3 for i in range(args.n)], "wrong results"
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed)


def signals_one(args: argparse.Namespace) -> None:
    """2a: one workflow consuming N signals, sent one after another."""
    with _system(args) as system:
        ref = system.start(collect, args.n)
        system.idle(timeout=WAIT)  # the receiver is parked on its first await
        t0 = start_clock()
        c0 = time.process_time()
        for _ in range(args.n):
            ref.signal("item", 1)
        total = ref.result(timeout=WAIT)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert total == args.n, f"consumed {total} of {args.n}"
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed, cpu_us_per=1e6 * cpu / args.n)


def signals_many(args: argparse.Namespace) -> None:
    """2b: N workflows each consuming one signal."""
    with _system(args) as system:
        refs = [system.start(wait_one) for _ in range(args.n)]
        system.idle(timeout=WAIT)
        t0 = start_clock()
        for i, r in enumerate(refs):
            r.signal("item", i)
        results = _wait_all(refs)
        elapsed = time.perf_counter() - t0
    assert results == list(range(args.n)), "wrong results"
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed)


def fanout(args: argparse.Namespace) -> None:
    """3: a parent spawning N children and gathering their results."""
    with _system(args) as system:
        t0 = start_clock()
        total = system.start(fan_out, args.n).result(timeout=WAIT)
        elapsed = time.perf_counter() - t0
    assert total == args.n * (args.n - 1), "wrong result"
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed)


def timers(args: argparse.Namespace) -> None:
    """4: N workflows each sleeping 0.1 s on a durable timer: throughput and lateness."""
    _timers(args, lambda system: [system.start(nap, 0.1) for _ in range(args.n)])


def _timers(args: argparse.Namespace, start_all) -> None:
    with _system(args) as system:
        t0 = start_clock()
        late = _wait_all(start_all(system))
        elapsed = time.perf_counter() - t0
    report(n=args.n, seconds=elapsed, per_s=args.n / elapsed, **lateness(late))


def steps_many(args: argparse.Namespace) -> None:
    """1, started together: the N workflows of workload 1 started by one ``start_many``."""
    _steps(args, lambda system: system.start_many(three_steps, [(i,) for i in range(args.n)]))


def timers_many(args: argparse.Namespace) -> None:
    """4, started together: the N sleepers of workload 4 started by one ``start_many``."""
    _timers(args, lambda system: system.start_many(nap, [(0.1,)] * args.n))


@workflow(name="workloads_actorflow:nap_until")
async def nap_until(due: float) -> float:
    await timer("due", at=due)
    return now() - due


def timer_burst(args: argparse.Namespace) -> None:
    """N workflows whose timers fall due spread evenly over the 10 s after they start: lateness."""
    with _system(args) as system:
        # Every workflow first takes its first step (arming its timer); the window of due times
        # opens after that, so the figure is the timer service's lateness, not the start-up's.
        lead = 5.0 + args.n / 500
        start = time.time() + lead
        t0 = time.perf_counter()
        refs = system.start_many(nap_until, [(start + 10.0 * i / args.n,) for i in range(args.n)])
        system.idle(timeout=WAIT)
        armed = time.perf_counter() - t0
        if armed > lead:
            print(f"warning: arming took {armed:.1f}s, longer than the {lead:.0f}s lead", file=sys.stderr)
        late = _wait_all(refs)
        rss = rss_mb()
    report(n=args.n, armed_s=armed, rss_mb=rss, **lateness(late))


# -- workload 5: recovery -------------------------------------------------------------------
def _clone(db: str, proto: str, n: int, prefix: str) -> None:
    """Copy the rows of one genuinely suspended workflow (id 0) to ids 1 to n - 1."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    series = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) "
    cols = [r[1] for r in conn.execute("PRAGMA table_info(workflows)")]
    rest = ", ".join(c for c in cols if c != "id")
    conn.execute(
        series + f"INSERT INTO workflows (id, {rest}) SELECT printf('{prefix}%08d', i), {rest} "
        "FROM c, workflows WHERE workflows.id = ?",
        (n - 1, proto),
    )
    for table, cols2 in (("waits", "name"), ("subscriptions", "name, filter_key")):
        conn.execute(
            series + f"INSERT INTO {table} (workflow_id, {cols2}) SELECT printf('{prefix}%08d', i), "
            f"{cols2} FROM c, {table} WHERE {table}.workflow_id = ?",
            (n - 1, proto),
        )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _build_parked(db: str, n: int, durability: str, prefix: str, genuine: bool) -> None:
    """A file holding ``n`` workflows parked on ``await signal("go")``."""
    with ActorSystem(db, durability=durability) as system:
        if genuine:
            lock = threading.Lock()
            ids = iter(range(n))

            def starter() -> None:
                while True:
                    with lock:
                        i = next(ids, None)
                    if i is None:
                        return
                    system.start(parked, id=f"{prefix}{i:08d}")

            threads = [threading.Thread(target=starter) for _ in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            system.start(parked, id=f"{prefix}{0:08d}")
        system.idle(timeout=WAIT)
    if not genuine:
        _clone(db, f"{prefix}{0:08d}", n, prefix)


def recovery(args: argparse.Namespace) -> None:
    """5: prepare N parked workflows and wait to be killed, or recover them and finish them all."""
    db = os.path.join(args.dir, "recovery.db")
    if args.phase == "prepare":
        _build_parked(db, args.n, args.durability, "r-", genuine=not args.clone)
        system = _system(args, db)  # the running process the runner kills
        announce_ready()
        time.sleep(WAIT)
        system.shutdown()
        return
    t0 = time.perf_counter()
    system = _system(args, db)
    ready = time.perf_counter() - t0
    ids = [f"r-{i:08d}" for i in range(args.n)]
    if args.broadcast:
        delivered = system.broadcast("go", None, "go")
        assert delivered == args.n, f"broadcast reached {delivered} of {args.n}"
        system.idle(timeout=WAIT)
        running = system._rt.store.running_count()
        assert running == 0, f"{running} workflows still running"
    else:
        refs = [system.get(i) for i in ids]
        for r in refs:
            r.signal("go", "go")
        assert _wait_all(refs) == ["go"] * args.n
    done = time.perf_counter() - t0
    system.shutdown()
    report(n=args.n, ready_s=ready, complete_s=done, clone=args.clone, broadcast=args.broadcast)


# -- workload 6: resume cost against history length -----------------------------------------
def resume(args: argparse.Namespace) -> None:
    """6: build a workflow that looped N times (phase build), or time one resume of a copy.

    With ``--db`` (PostgreSQL), the build phase leaves ``--reps`` such workflows (``loop-0``,
    ``loop-1``, ...) in the URL's schema, and run ``--rep R`` opens the schema and resumes
    ``loop-R``: a schema cannot be copied like a file.
    """
    if args.db:
        _resume_pg(args)
        return
    base = os.path.join(args.dir, f"loop-{args.n}.db")
    if args.phase == "build":
        t0 = time.perf_counter()
        with ActorSystem(base, durability="normal") as system:
            system.start(looper, args.n, id="loop")
            system.idle(timeout=WAIT * 3)
            info = system.get("loop").info()
        assert info.waiting_on and "go" in info.waiting_on, info
        report(n=args.n, build_s=time.perf_counter() - t0)
        return
    copy = os.path.join(args.dir, f"loop-{args.n}-{args.rep}.db")
    for suffix in ("", "-wal"):
        if os.path.exists(base + suffix):
            shutil.copyfile(base + suffix, copy + suffix)
    _time_resume(args, copy, "loop")


def _time_resume(args: argparse.Namespace, db: str | None, workflow_id: str) -> None:
    """Open the system, signal the waiting workflow ``workflow_id``, wait for its result."""
    t0 = time.perf_counter()
    system = _system(args, db)
    opened = time.perf_counter()
    ref = system.get(workflow_id)
    ref.signal("go")
    value = ref.result(timeout=WAIT)
    t1 = time.perf_counter()
    system.shutdown()
    assert value == args.n
    report(n=args.n, open_ms=(opened - t0) * 1e3, resume_ms=(t1 - opened) * 1e3,
           total_ms=(t1 - t0) * 1e3)


def _resume_pg(args: argparse.Namespace) -> None:
    if args.phase == "build":
        t0 = time.perf_counter()
        with ActorSystem(args.db, durability="normal") as system:
            refs = [system.start(looper, args.n, id=f"loop-{r}") for r in range(args.reps)]
            system.idle(timeout=WAIT * 3)
            infos = [r.info() for r in refs]
        assert all(i.waiting_on and "go" in i.waiting_on for i in infos), infos
        report(n=args.n, build_s=time.perf_counter() - t0)
        return
    _time_resume(args, None, f"loop-{args.rep}")


# -- workload 7: scale ----------------------------------------------------------------------
def scale(args: argparse.Namespace) -> None:
    """7: N suspended workflows in one file: file size, start-up time, RSS; wake a few."""
    db = os.path.join(args.dir, "scale.db")
    if args.phase == "build":
        t0 = time.perf_counter()
        _build_parked(db, args.n, "normal", "s-", genuine=False)
        report(n=args.n, build_s=time.perf_counter() - t0, file_mb=file_size_mb(db))
        return
    rss0 = rss_mb()
    t0 = time.perf_counter()
    system = _system(args, db)
    startup = time.perf_counter() - t0
    rss_open = rss_mb()
    step = max(1, args.n // 100)
    # Each repetition wakes other workflows (those of earlier ones have completed).
    refs = [system.get(f"s-{i:08d}") for i in range(args.rep % step, args.n, step)]
    t1 = time.perf_counter()
    for r in refs:
        r.signal("go", "go")
    assert _wait_all(refs) == ["go"] * len(refs)
    woke = time.perf_counter() - t1
    rss_end = rss_mb()
    running = system._rt.store.running_count()
    system.shutdown()
    report(n=args.n, startup_s=startup, file_mb=file_size_mb(db), rss_before_mb=rss0,
           rss_open_mb=rss_open, rss_end_mb=rss_end, woken=len(refs), wake_s=woke,
           running_after=running)


WORKLOADS = {
    "steps": steps,
    "signals_one": signals_one,
    "signals_many": signals_many,
    "fanout": fanout,
    "timers": timers,
    "steps_many": steps_many,
    "timers_many": timers_many,
    "timer_burst": timer_burst,
    "recovery": recovery,
    "resume": resume,
    "scale": scale,
}


def main() -> None:
    """Run one workload and print its result line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workload", choices=sorted(WORKLOADS))
    p.add_argument("--dir", required=True, help="an empty scratch directory")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--db", default=None,
                   help="a postgresql:// URL to run on instead of a SQLite file in --dir "
                        "(workloads 1-4)")
    p.add_argument("--durability", choices=("full", "normal"), default="full")
    p.add_argument("--phase", default="run", help="prepare/recover, build/run")
    p.add_argument("--rep", type=int, default=0)
    p.add_argument("--reps", type=int, default=3, help="resume on --db: workflows the build leaves")
    p.add_argument("--clone", action="store_true", help="recovery: build the file by cloning rows")
    p.add_argument("--start-after", dest="start_after", default=None,
                   help="once open, wait for this file to exist before starting (several nodes)")
    p.add_argument("--broadcast", action="store_true", help="recovery: wake all by one broadcast")
    p.add_argument("--metrics", action="store_true", help="count Prometheus metrics (ActorSystem(metrics=...))")
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    WORKLOADS[args.workload](args)


if __name__ == "__main__":
    main()
