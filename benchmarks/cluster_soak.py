"""The cluster kill test as a soak: many more kills than CI runs.

    python benchmarks/cluster_soak.py [--kills 1000] [--seed 11]

Runs ``tests/integration/test_cluster_kill.py`` (three node processes on one PostgreSQL database,
SIGKILLed, frozen past the heartbeat ttl and cut off at random while a driver sends them work;
then every guarantee is audited) with ``ACTORFLOW_CLUSTER_KILLS`` set, and prints its summary
line: kills, zombies, sessions terminated, steps refused by the fence, ticks taken, and the
failover time (from a SIGKILL until the killed node's workflows made progress on a survivor),
median and maximum.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=1000)
    p.add_argument("--seed", type=int, default=11)
    args = p.parse_args()
    env = dict(os.environ, ACTORFLOW_CLUSTER_KILLS=str(args.kills), ACTORFLOW_SEED=str(args.seed))
    # A base directory of its own: pytest runs of other projects on the machine rotate the shared
    # one, and a soak of hours must not lose its files to them.
    with tempfile.TemporaryDirectory(prefix="actorflow-soak-") as base:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--timeout=0",
             f"--basetemp={base}/t", "tests/integration/test_cluster_kill.py"],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )
    summary = [line for line in proc.stdout.splitlines() if line.startswith("kills ")]
    print("\n".join(summary) or proc.stdout[-3000:])
    if proc.returncode != 0:
        print(proc.stdout[-6000:], proc.stderr[-3000:], sep="\n", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
