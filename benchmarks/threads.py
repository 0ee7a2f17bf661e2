"""Where workloads 1 and 4 spend their CPU, thread by thread, and how often the threads switch.

    python benchmarks/threads.py            # 1,000 workflows per run, three runs per workload
    python benchmarks/threads.py --quick    # small sizes, a smoke run

Workload 1 (workflows calling three procedures) and workload 4 (workflows sleeping 0.1 s), each
started one by one as in ``run.py``, in a fresh interpreter per run. Per workflow: the process's
CPU time and voluntary context switches (``getrusage``), and each thread group's CPU time and
switches (the starting thread, engine threads, procedure threads, the timer thread, the writer).
Figures are medians of the runs. Wall-clock rates on a shared machine move by a third from one
run to the next; switch counts move far less, so they show what a change to the hand-overs
between threads does. Per-thread figures need Linux (``/proc/self/task``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import report, result_of  # noqa: E402

TIMEOUT = 600.0
GROUPS = ("starting thread", "engine threads", "procedure threads", "timer thread", "writer", "other")


def _group(name: str) -> str:
    if name == "MainThread":
        return "starting thread"
    if name.startswith(("actorflow-engine", "actorflow-actor")):
        return "engine threads"
    if name.startswith("actorflow-proc"):
        return "procedure threads"
    if name == "actorflow-timers":
        return "timer thread"
    if name == "actorflow-writer":
        return "writer"
    return "other"


def _threads() -> dict[int, tuple[str, float, int]]:
    """Per live thread: its group, CPU seconds and voluntary switches so far (Linux only)."""
    out: dict[int, tuple[str, float, int]] = {}
    for t in threading.enumerate():
        if t.native_id is None or t.ident is None:
            continue
        try:
            cpu = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            with open(f"/proc/self/task/{t.native_id}/status") as f:
                switches = int(re.search(r"^voluntary_ctxt_switches:\s*(\d+)", f.read(), re.M).group(1))
        except (OSError, AttributeError):  # the thread ended meanwhile, or no /proc here
            continue
        out[t.native_id] = (_group(t.name), cpu, switches)
    return out


def one(workload: str, n: int, directory: str, durability: str) -> None:
    """Run one workload in this process and report its per-workflow figures."""
    from _common import quiet_structlog

    quiet_structlog()
    import workloads_actorflow as W

    from actors import ActorSystem

    with ActorSystem(os.path.join(directory, "af.db"), durability=durability) as system:
        # The process's window encloses the threads' (so their sum cannot exceed its figure).
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        before, t0 = _threads(), time.perf_counter()
        if workload == "steps":
            refs = [system.start(W.three_steps, i) for i in range(n)]
        else:
            refs = [system.start(W.nap, 0.1) for _ in range(n)]
        results = [r.result(timeout=TIMEOUT) for r in refs]
        elapsed = time.perf_counter() - t0
        after = _threads()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    if workload == "steps":
        assert results == [i + 3 for i in range(n)], "wrong results"
    groups = {g: {"cpu_us": 0.0, "switches": 0.0} for g in GROUPS}
    for tid, (group, cpu, switches) in after.items():
        _, cpu0, switches0 = before.get(tid, (group, 0.0, 0))
        groups[group]["cpu_us"] += (cpu - cpu0) / n * 1e6
        groups[group]["switches"] += (switches - switches0) / n
    report(
        workload=workload, n=n, per_s=n / elapsed,
        cpu_us=(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n * 1e6,
        switches=(r1.ru_nvcsw - r0.ru_nvcsw) / n,
        threads=groups if after else None,
    )


def _run_one(workload: str, n: int, scratch: str, durability: str, rep: int) -> dict[str, Any]:
    d = os.path.join(scratch, f"{workload}-{rep}")
    os.makedirs(d)
    proc = subprocess.run(
        [sys.executable, __file__, "--one", workload, "--n", str(n), "--dir", d, "--durability", durability],
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    figures = result_of(proc.stdout)
    if figures is not None:
        return figures
    raise RuntimeError(f"threads.py --one {workload} gave no result:\n{proc.stderr[-3000:]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--n", type=int, default=None, help="workflows per run (default 1,000; quick 50)")
    p.add_argument("--reps", type=int, default=None, help="runs per workload (default 3; quick 1)")
    p.add_argument("--durability", choices=("full", "normal"), default="full")
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--one", choices=("steps", "timers"), help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    n = a.n or (50 if a.quick else 1000)
    if a.one:
        one(a.one, n, a.dir, a.durability)
        return 0
    reps = a.reps or (1 if a.quick else 3)
    fig: dict[str, Any] = {"durability": a.durability, "n": n, "reps": reps, "workloads": {}}
    with tempfile.TemporaryDirectory(prefix="actorflow-threads-") as scratch:
        for workload in ("steps", "timers"):
            runs = [_run_one(workload, n, scratch, a.durability, rep) for rep in range(reps)]
            med = {k: statistics.median(r[k] for r in runs) for k in ("per_s", "cpu_us", "switches")}
            if all(r["threads"] for r in runs):
                med["threads"] = {
                    g: {k: statistics.median(r["threads"][g][k] for r in runs) for k in ("cpu_us", "switches")}
                    for g in GROUPS
                }
            fig["workloads"][workload] = {"median": med, "runs": runs}
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(fig, indent=2))
    title = {"steps": "1. workflows x 3 procedures", "timers": "4. workflows sleeping 0.1 s"}
    print(f"actorflow threads, durability={a.durability}, {n:,} workflows per run, median of {reps} "
          f"run(s), python {sys.version.split()[0]}")
    for workload, w in fig["workloads"].items():
        m = w["median"]
        print(f"  {title[workload]}: {m['per_s']:,.0f} workflows/s, {m['cpu_us']:,.0f} us of CPU and "
              f"{m['switches']:.1f} voluntary switches per workflow")
        if "threads" not in m:
            print("    (per-thread figures need Linux's /proc)")
            continue
        for g in GROUPS:
            t = m["threads"][g]
            if t["cpu_us"] >= 0.5 or t["switches"] >= 0.05:
                print(f"    {g:<18} {t['cpu_us']:7,.0f} us  {t['switches']:5.1f} switches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
