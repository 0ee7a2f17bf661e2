"""What a signal costs in threads: wall time, CPU time and thread switches per signal.

    python benchmarks/handoff.py [--against REV] [--n 2000] [--reps 3] [--workloads 2a,2b,1]

Workloads 2a (one workflow, N signals sent one after another) and 2b (N workflows, one signal
each), at durability "full", each in a fresh interpreter. Besides the wall time per signal it
reports the process's CPU time per signal (every thread's) and the context switches of all its
threads per signal (``/proc/self/task/*/status``, voluntary and not), two figures that the load
of a shared machine changes far less than it changes the wall time: they show what handing a
signal from the caller's thread to the engine's and back costs, next to the code before that
hand-off existed. Workload 1 (N/2 workflows of three procedure calls each, started one after
another, then every result read) gives the same figures per workflow, for the hand-offs through
the procedure pool. ``--against REV`` runs REV the same way (a temporary worktree and venv, as
``run.py --against``), each repetition of the two next to each other.
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
from typing import Any

from actors import ActorSystem
from workflows import procedure, signal, workflow

HERE = pathlib.Path(__file__).resolve().parent


@workflow(name="benchmarks.handoff.collect")
async def collect(count: int) -> int:
    total = 0
    for _ in range(count):
        total += await signal("item")
    return total


@workflow(name="benchmarks.handoff.wait_one")
async def wait_one() -> object:
    return await signal("item")


@procedure
def inc(x: int) -> int:
    return x + 1


@workflow(name="benchmarks.handoff.three_steps")
async def three_steps(x: int) -> int:
    return await procedure(inc, await procedure(inc, await procedure(inc, x)))


def _switches() -> int:
    """Context switches so far of every live thread of this process."""
    total = 0
    for task in pathlib.Path("/proc/self/task").iterdir():
        try:
            text = (task / "status").read_text()
        except OSError:
            continue  # a thread that ended meanwhile
        for line in text.splitlines():
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                total += int(line.split()[1])
    return total


def child(workload: str, n: int) -> None:
    with tempfile.TemporaryDirectory() as d, ActorSystem(os.path.join(d, "af.db"), durability="full") as system:
        if workload == "1":
            n //= 2
            refs: list[Any] = []
        elif workload == "2a":
            refs = [system.start(collect, n)]
        else:
            refs = [system.start(wait_one) for _ in range(n)]
        system.idle(timeout=120)
        s0, c0, t0 = _switches(), time.process_time(), time.perf_counter()
        if workload == "1":
            refs = [system.start(three_steps, i) for i in range(n)]
        elif workload == "2a":
            for _ in range(n):
                refs[0].signal("item", 1)
        else:
            for i, r in enumerate(refs):
                r.signal("item", i)
        for r in refs:
            r.result(timeout=120)
        t, c, s = time.perf_counter() - t0, time.process_time() - c0, _switches() - s0
    print(json.dumps({"wall_us": t / n * 1e6, "cpu_us": c / n * 1e6, "switches": s / n}))


def _run(python: str, workload: str, n: int) -> dict[str, float]:
    import run  # noqa: PLC0415 (on the path once main() has put it there)

    out = subprocess.run([python, str(pathlib.Path(__file__)), "--child", workload, "--n", str(n)],
                         capture_output=True, text=True, timeout=600, cwd=tempfile.gettempdir(),
                         env=run.child_env(python))
    if out.returncode != 0:
        raise SystemExit(f"{python} {workload} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--against", metavar="REV", help="also run the commit REV, side by side")
    p.add_argument("--n", type=int, default=2000, help="signals per run (2b: workflows)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--workloads", default="2a,2b", help="comma-separated: 2a, 2b, 1")
    p.add_argument("--child", metavar="WORKLOAD", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.n)
        return
    sys.path.insert(0, str(HERE))
    import run  # the --against machinery of benchmarks/run.py

    sides = {"this code": sys.executable}
    with tempfile.TemporaryDirectory(prefix="actorflow-handoff-") as tmp:
        against = run.prepare_against(args.against, tmp) if args.against else None
        try:
            if against is not None:
                sides[against.short] = against.python
            figures: dict[tuple[str, str], list[dict[str, float]]] = {}
            loads = [os.getloadavg()[0]]
            for rep in range(args.reps):
                order = list(sides.items()) if rep % 2 == 0 else list(reversed(sides.items()))
                for workload in args.workloads.split(","):
                    for name, python in order:
                        figures.setdefault((workload, name), []).append(_run(python, workload, args.n))
                loads.append(os.getloadavg()[0])
        finally:
            if against is not None:
                run.remove_against(against.src)
    print(f"medians of {args.reps} repetitions, N = {args.n}, durability full; load average (1 min) "
          f"{min(loads):.1f}-{max(loads):.1f}")
    print("per signal (2a, 2b) or per workflow (1)")
    print(f"{'workload':<10}{'code':<12}{'wall us/op':>16}{'cpu us/op':>15}{'switches/op':>17}")
    for (workload, name), runs in figures.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall_us", "cpu_us", "switches")}
        print(f"{workload:<10}{name:<12}{med['wall_us']:>16,.0f}{med['cpu_us']:>15,.0f}{med['switches']:>17.1f}")


if __name__ == "__main__":
    main()
