"""What counting Prometheus metrics costs the hot path: workload 2a (one workflow consuming N
signals, sent one after another) with ``metrics=`` on and off, in one run, the two alternated
rep by rep (each run its own process and file), medians compared: wall time, and the process's
CPU time per signal (less swayed by other load on the machine).

Usage: python benchmarks/metrics_overhead.py [--n 3000] [--reps 7] [--durability normal|full]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def run(n: int, durability: str, metrics: bool, rep: int) -> tuple[float, float]:
    """One run of 2a: (signals per second, CPU microseconds per signal)."""
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, str(HERE / "workloads_actorflow.py"), "signals_one", "--dir", d,
               "--n", str(n), "--durability", durability, "--rep", str(rep)]  # fmt: skip
        if metrics:
            cmd.append("--metrics")
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=HERE.parent)
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    got = json.loads(line[len("RESULT ") :])
    return float(got["per_s"]), float(got["cpu_us_per"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=3000)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--durability", choices=("normal", "full"), default="normal")
    args = p.parse_args()
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for rep in range(args.reps):
        for metrics in (False, True) if rep % 2 == 0 else (True, False):
            r, c = run(args.n, args.durability, metrics, rep)
            rates[metrics].append(r)
            cpu[metrics].append(c)
    print(
        f"workload 2a, n={args.n}, durability={args.durability}, {args.reps} reps each, alternated"
    )
    for label, key in (("off", False), ("on ", True)):
        print(
            f"  metrics {label}: median {statistics.median(rates[key]):,.0f} signals/s, "
            f"{statistics.median(cpu[key]):.1f} CPU us per signal "
            f"(CPU per rep: {', '.join(f'{c:.0f}' for c in cpu[key])})"
        )
    off, on = statistics.median(rates[False]), statistics.median(rates[True])
    coff, con = statistics.median(cpu[False]), statistics.median(cpu[True])
    # On a shared machine the fastest run of each is the one least disturbed by the others.
    best_off, best_on = min(cpu[False]), min(cpu[True])
    print(
        f"  wall on/off {on / off:.3f}; CPU per signal on/off: medians {con / coff:.3f} "
        f"({100 * (con / coff - 1):+.1f} %), best runs {best_on / best_off:.3f} "
        f"({100 * (best_on / best_off - 1):+.1f} %)"
    )


if __name__ == "__main__":
    main()
