"""What talking to a workflow costs: ask round trips beside signal round trips, and the whole
history's cost per step.

    python benchmarks/talk.py asks [--n 300]
    python benchmarks/talk.py history [--n 2000] [--reps 3] [--against 9ea7290]

``asks``: one workflow answers ``ask("ping")`` and takes ``signal("ping")`` in one loop; the two
calls alternate, on SQLite and on PostgreSQL (a throwaway server, production settings), in one
run. A signal's round trip is ``ref.signal()`` (it returns once the signal is durable; the step
that takes it runs on the caller's thread when the actor is idle); an ask's is ``ref.ask()``
(its request durable, the step that replies committed, the reply read back). Prints p50 and p99
in milliseconds.

``history``: workload 2a (one workflow, N signals one after another, durability "full") of this
tree and of ``--against`` (the commit before the whole history; its files taken with ``git
archive``, run on the same venv), each repetition of the two next to each other, each in a fresh
interpreter; prints the medians of signals per second and of CPU milliseconds per signal (all
threads; the figure a shared machine's load changes least) and their ratios.
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

from workflows import signal, workflow

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


@workflow(name="benchmarks.talk.collect")
async def collect(count: int) -> int:
    """Workload 2a's receiver: takes ``count`` signals one after another."""
    total = 0
    for _ in range(count):
        total += await signal("item")
    return total


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] * 1000


def asks(n: int) -> None:
    from actors import ActorSystem
    from benchmarks.talk_flows import pinger

    def run(db: str) -> dict[str, float]:
        with ActorSystem(db) as system:
            ref = system.start(pinger)
            system.idle(timeout=60)
            sig, ask = [], []
            for i in range(n):
                t0 = time.perf_counter()
                ref.signal("ping", i)
                sig.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                assert ref.ask("ping", i, timeout=60) == i
                ask.append(time.perf_counter() - t0)
        return {
            "signal_p50": _pct(sig, 50),
            "signal_p99": _pct(sig, 99),
            "ask_p50": _pct(ask, 50),
            "ask_p99": _pct(ask, 99),
        }

    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        rows["sqlite"] = run(os.path.join(tmp, "talk.db"))
    from tests.pgserver import DURABLE, PgServer

    server = PgServer.start(DURABLE)
    try:
        with server.database("talk") as url:
            rows["postgresql"] = run(url)
    finally:
        server.stop()
    print(f"ask and signal round trips, {n} of each, alternating (milliseconds)")
    print(f"{'backend':<12} {'signal p50':>11} {'signal p99':>11} {'ask p50':>9} {'ask p99':>9}")
    for name, r in rows.items():
        print(
            f"{name:<12} {r['signal_p50']:>11.2f} {r['signal_p99']:>11.2f} {r['ask_p50']:>9.2f} {r['ask_p99']:>9.2f}"
        )
    print(json.dumps(rows))


def child_2a(directory: str, n: int) -> None:
    """Workload 2a in this process, on whichever actorflow ``PYTHONPATH`` names; prints its wall
    time and the CPU time of all its threads (``time.process_time``) for the signals alone."""
    from actors import ActorSystem

    with ActorSystem(os.path.join(directory, "af.db"), durability="full") as system:
        ref = system.start(collect, n)
        system.idle(timeout=60)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            ref.signal("item", 1)
        assert ref.result(timeout=120) == n
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"per_s": n / wall, "cpu_ms": cpu / n * 1000}))


def _signals_one(src: pathlib.Path, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(src)}
        out = subprocess.run(
            [sys.executable, str(HERE / "talk.py"), "child2a", "--dir", tmp, "--n", str(n)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=600,
            check=True,
        )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def history(n: int, reps: int, against: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(
            ["git", "archive", against], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        this, before = [], []
        for _ in range(reps):
            this.append(_signals_one(ROOT, n))
            before.append(_signals_one(base, n))
    rows = {}
    for key in ("per_s", "cpu_ms"):
        a = statistics.median(r[key] for r in this)
        b = statistics.median(r[key] for r in before)
        rows[key] = (a, b, a / b)
    print(f"workload 2a, {n} signals, durability full, median of {reps} (runs alternated)")
    print(
        f"  signals/s      whole history {rows['per_s'][0]:9,.0f}   {against} {rows['per_s'][1]:9,.0f}   ratio {rows['per_s'][2]:.3f}"
    )
    print(
        f"  CPU ms/signal  whole history {rows['cpu_ms'][0]:9.3f}   {against} {rows['cpu_ms'][1]:9.3f}   ratio {rows['cpu_ms'][2]:.3f}"
    )
    print(json.dumps({"this": this, "against": before}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("asks", "history", "child2a"))
    p.add_argument("--dir", default=None)
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--against", default="9ea7290")
    args = p.parse_args()
    if args.what == "child2a":
        child_2a(args.dir, args.n)
    elif args.what == "asks":
        sys.path.insert(0, str(ROOT))
        asks(args.n or 300)
    else:
        history(args.n or 2000, args.reps, args.against)


if __name__ == "__main__":
    main()
