"""What one item costs as a workflow holds more of them: CPU per item at N = 100 ... 10,000.

    python benchmarks/scaling.py [--against REV] [--sizes 100,1000,10000] [--reps 1] [--cases ...]

A game's workflow can hold thousands of things at once: a boss spawning a wave of minions, a
settlement calling a procedure per building, a player workflow with chat signals it reads only
later, a zone broadcasting to every subscriber. Each case runs one such operation at each N, in a
fresh interpreter on a SQLite file with the system's defaults (``max_live=1000``: past that,
idle workflows are passivated and loaded again), and reports the process's CPU time per item (every thread's;
far steadier than wall time on a shared machine). A cost per item that grows with N is a scan
somewhere; flat is the goal. ``--against REV`` runs REV the same way (a temporary worktree and
venv, as ``run.py --against``), each repetition of the two next to each other.

Cases:
- ``children``: one workflow gathers N children (each returns at once); per child.
- ``procedures``: one workflow gathers N procedure calls; per call.
- ``held``: a workflow holds N signals of a name it does not await, then takes N signals of the
  name it awaits, sent one after another; per signal taken.
- ``broadcast``: N workflows subscribed to one name, one broadcast; per workflow woken.
- ``timers``: one workflow gathers N timers of one second, on a virtual clock moved past them;
  per timer.
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

from actors import ActorSystem
from actors.testing import VirtualClock
from workflows import gather, procedure, signal, spawn, subscribe, timer, workflow

HERE = pathlib.Path(__file__).resolve().parent
CASES = ("children", "procedures", "held", "broadcast", "timers")
WAIT = 600.0


@workflow(name="benchmarks.scaling.child")
async def child(x: int) -> int:
    return x


@workflow(name="benchmarks.scaling.parent")
async def parent(n: int) -> int:
    return len(await gather(*[spawn(child, i) for i in range(n)]))


@procedure
def inc(x: int) -> int:
    return x + 1


@workflow(name="benchmarks.scaling.calls")
async def calls(n: int) -> int:
    return len(await gather(*[procedure(inc, i) for i in range(n)]))


@workflow(name="benchmarks.scaling.holder")
async def holder(n: int) -> int:
    taken = 0
    while taken < n:
        await signal("mine")
        taken += 1
    return taken


@workflow(name="benchmarks.scaling.listener")
async def listener() -> object:
    subscribe("zone")
    return await signal("zone")


@workflow(name="benchmarks.scaling.sleeper")
async def sleeper(n: int) -> int:
    return len(await gather(*[timer(f"t{i}", 1.0) for i in range(n)]))


def child_run(case: str, n: int) -> None:
    """One case at one N, in this process: its CPU per item, as JSON on the last line. The case
    runs once at N = 10 first, so that what a process does once (code compiled, caches filled)
    is not counted against the items."""
    _case(case, 10)
    print(json.dumps({"cpu_us": _case(case, n) / n * 1e6}))


def _case(case: str, n: int) -> float:
    """Run ``case`` at ``n`` on a system of its own; the process's CPU seconds it took."""
    with tempfile.TemporaryDirectory() as d:
        clock = VirtualClock() if case == "timers" else None
        with ActorSystem(os.path.join(d, "af.db"), clock=clock) as system:
            if case == "held":
                ref = system.start(holder, n)
                for i in range(n):
                    ref.signal("other", i)
                system.idle(timeout=WAIT)
            elif case == "broadcast":
                refs = system.start_many(listener, [()] * n)
                system.idle(timeout=WAIT)
            c0 = time.process_time()
            if case == "children":
                assert system.start(parent, n).result(timeout=WAIT) == n
            elif case == "procedures":
                assert system.start(calls, n).result(timeout=WAIT) == n
            elif case == "held":
                for i in range(n):
                    ref.signal("mine", i)
                assert ref.result(timeout=WAIT) == n
            elif case == "broadcast":
                assert system.broadcast("zone", None, 1) == n
                for r in refs:
                    r.result(timeout=WAIT)
            else:
                assert clock is not None
                ref = system.start(sleeper, n)
                system.idle(timeout=WAIT)
                clock.advance(2.0)
                assert ref.result(timeout=WAIT) == n
            return time.process_time() - c0


def _run(python: str, case: str, n: int) -> float:
    import run  # noqa: PLC0415 (on the path once main() has put it there)

    out = subprocess.run([python, str(pathlib.Path(__file__)), "--child", case, "--n", str(n)],
                         capture_output=True, text=True, timeout=WAIT + 60, cwd=tempfile.gettempdir(),
                         env=run.child_env(python))
    if out.returncode != 0:
        raise SystemExit(f"{python} {case} N={n} failed:\n{out.stderr[-3000:]}")
    cpu: float = json.loads(out.stdout.strip().splitlines()[-1])["cpu_us"]
    return cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--against", metavar="REV", help="also run the commit REV, side by side")
    p.add_argument("--sizes", default="100,1000,10000", help="comma-separated N")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    p.add_argument("--child", metavar="CASE", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=100, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child_run(args.child, args.n)
        return
    cases = args.cases.split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        raise SystemExit(f"unknown case(s) {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    sys.path.insert(0, str(HERE))
    import run  # the --against machinery of benchmarks/run.py

    sides = {"this code": sys.executable}
    figures: dict[tuple[str, str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="actorflow-scaling-") as tmp:
        against = run.prepare_against(args.against, tmp) if args.against else None
        try:
            if against is not None:
                sides[against.short] = against.python
            for rep in range(args.reps):
                order = list(sides.items()) if rep % 2 == 0 else list(reversed(sides.items()))
                for case in cases:
                    for n in sizes:
                        for name, python in order:
                            figures.setdefault((case, name, n), []).append(_run(python, case, n))
        finally:
            if against is not None:
                run.remove_against(against.src)
    print(f"CPU per item (us), median of {args.reps} repetition(s), SQLite file, durability normal")
    print(f"{'case':<12}{'code':<12}" + "".join(f"{'N = ' + format(n, ','):>14}" for n in sizes))
    for case in cases:
        for name in sides:
            row = [statistics.median(figures[(case, name, n)]) for n in sizes]
            print(f"{case:<12}{name:<12}" + "".join(f"{v:>14,.0f}" for v in row))


if __name__ == "__main__":
    main()
