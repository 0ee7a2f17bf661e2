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
archive``, run on the same venv), each repetition of the two next to each other; prints the
medians and their ratio.
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

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import result_of  # noqa: E402


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


def _signals_one(src: pathlib.Path, n: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(src)}
        out = subprocess.run(
            [
                sys.executable,
                str(src / "benchmarks" / "workloads_actorflow.py"),
                "signals_one",
                "--dir",
                tmp,
                "--n",
                str(n),
                "--durability",
                "full",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=src,
            timeout=600,
            check=True,
        )
    figures = result_of(out.stdout)
    assert figures is not None, out.stdout + out.stderr
    return float(figures["per_s"])


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
    a, b = statistics.median(this), statistics.median(before)
    print(f"workload 2a, {n} signals, durability full, median of {reps}")
    print(
        f"  whole history (this tree): {a:,.0f} signals/s   {against}: {b:,.0f} signals/s   ratio {a / b:.3f}"
    )
    print(json.dumps({"this": this, "against": before, "ratio": a / b}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("asks", "history"))
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--against", default="9ea7290")
    args = p.parse_args()
    if args.what == "asks":
        asks(args.n or 300)
    else:
        history(args.n or 2000, args.reps, args.against)


if __name__ == "__main__":
    main()
