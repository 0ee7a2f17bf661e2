"""The runtime's figures, each next to a baseline measured in the same run.

    python benchmarks/runtime.py            # the sizes of the runtime's issue (a few minutes)
    python benchmarks/runtime.py --quick    # small sizes, a smoke run

Baselines: raw sqlite3 single-row commits per second (WAL, the same synchronous setting) and raw
pykka tells per second to one actor. Figures: signal-to-resumed-step throughput for one workflow
and for 1,000; timer lateness p50/p99 with 10,000 timers falling due over 10 s; start-to-finish of
1,000 workflows that call three procedures; recovery of 100,000 suspended workflows after SIGKILL;
peak RSS. Every workload runs in its own interpreter (``workloads_*.py``); the table is printed,
and ``--json PATH`` writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import READY_PREFIX, result_of  # noqa: E402

AF = str(HERE / "workloads_actorflow.py")
RAW = str(HERE / "workloads_raw.py")
TIMEOUT = 1800


def _run(script: str, *args: str, cwd: str) -> dict[str, Any]:
    """Run one workload process and return its RESULT figures."""
    proc = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd
    )
    figures = result_of(proc.stdout)
    if figures is not None:
        return figures
    raise RuntimeError(f"{script} {' '.join(args)} gave no result:\n{proc.stderr[-3000:]}")


def _recovery(n: int, scratch: str, durability: str) -> dict[str, Any]:
    """Build n parked workflows in a process, SIGKILL it, and time the recovery in a new one."""
    d = os.path.join(scratch, "recovery")
    common = ["--dir", d, "--n", str(n), "--durability", durability, "--clone", "--broadcast"]
    prep = subprocess.Popen(
        [sys.executable, AF, "recovery", "--phase", "prepare", *common],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert prep.stdout is not None
    deadline = time.monotonic() + TIMEOUT
    for line in prep.stdout:
        if line.strip() == READY_PREFIX:
            break
        if time.monotonic() > deadline:
            break
    prep.send_signal(signal.SIGKILL)
    prep.wait(30)
    return _run(AF, "recovery", "--phase", "recover", *common, cwd=scratch)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--durability", choices=("normal", "full"), default="normal")
    p.add_argument("--json", help="also write the figures to this file")
    a = p.parse_args(argv)
    n = {
        "signals_one": 300 if a.quick else 3_000,
        "signals_many": 100 if a.quick else 1_000,
        "timers": 500 if a.quick else 10_000,
        "steps": 100 if a.quick else 1_000,
        "recovery": 2_000 if a.quick else 100_000,
    }
    sync = a.durability
    fig: dict[str, Any] = {"durability": sync, "sizes": n}
    with tempfile.TemporaryDirectory(prefix="actorflow-bench-") as scratch:
        raw = _run(RAW, "sqlite", "--dir", scratch, "--seconds", "2", "--sync", sync, cwd=scratch)
        tell = _run(RAW, "pykka", "--dir", scratch, "--n", "50000", cwd=scratch)
        fig["raw_commits_per_s"] = raw["per_s"]
        fig["pykka_tell_per_s"] = tell.get("tell_per_s", tell.get("per_s"))

        def wl(name: str, **extra: str) -> dict[str, Any]:
            d = os.path.join(scratch, name)
            args = ["--dir", d, "--n", str(n[name if name in n else extra.pop("size")]), "--durability", sync]
            return _run(AF, name, *args, cwd=scratch)

        fig["signals_one"] = wl("signals_one")
        fig["signals_many"] = wl("signals_many")
        fig["timers"] = _run(AF, "timer_burst", "--dir", os.path.join(scratch, "tb"), "--n", str(n["timers"]),
                             "--durability", sync, cwd=scratch)
        fig["steps"] = wl("steps")
        fig["recovery"] = _recovery(n["recovery"], scratch, sync)

    rc, tl = fig["raw_commits_per_s"], fig["pykka_tell_per_s"]
    rows = [
        ("baseline: raw sqlite3 single-row commits/s", f"{rc:,.0f}", ""),
        ("baseline: raw pykka tells/s", f"{tl:,.0f}", ""),
        ("signals/s, 1 workflow (signal -> resumed step)", f"{fig['signals_one']['per_s']:,.0f}",
         f"{fig['signals_one']['per_s'] / rc:.1%} of raw commits; {fig['signals_one']['per_s'] / tl:.2%} of tells"),
        ("signals/s, 1,000 workflows", f"{fig['signals_many']['per_s']:,.0f}",
         f"{fig['signals_many']['per_s'] / rc:.1%} of raw commits; {fig['signals_many']['per_s'] / tl:.2%} of tells"),
        (f"timer lateness p50 / p99, {n['timers']:,} timers due over 10 s",
         f"{fig['timers']['late_p50_ms']:.0f} / {fig['timers']['late_p99_ms']:.0f} ms",
         f"peak RSS {fig['timers']['rss_mb']:.0f} MB"),
        (f"{n['steps']:,} workflows x 3 procedures, start to finish",
         f"{n['steps'] / fig['steps']['per_s']:.2f} s",
         f"{fig['steps']['per_s']:,.0f} wf/s = {4 * fig['steps']['per_s'] / rc:.1%} of raw commits (4 steps each)"),
        (f"recovery of {n['recovery']:,} suspended workflows after SIGKILL: open / all complete",
         f"{fig['recovery']['ready_s']:.2f} / {fig['recovery']['complete_s']:.1f} s",
         f"{n['recovery'] / fig['recovery']['complete_s']:,.0f} wf/s after a broadcast"),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"actorflow runtime, durability={sync}, python {sys.version.split()[0]}")
    for name, value, ratio in rows:
        print(f"  {name:<{w0}}  {value:>{w1}}  {ratio}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(fig, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
