"""The cluster kill test as a soak: many more kills than CI runs.

    python benchmarks/cluster_soak.py [--kills 1000] [--seed 11] [--stop-by 17:00]

Runs ``tests/integration/test_cluster_kill.py`` (three node processes on one PostgreSQL database,
SIGKILLed, frozen past the heartbeat ttl and cut off at random while a driver sends them work;
then every guarantee is audited) with ``ACTORFLOW_CLUSTER_KILLS`` set, and prints its summary
line: kills, zombies, sessions terminated, steps refused by the fence, ticks taken, and the
failover time (from a SIGKILL until the killed node's workflows made progress on a survivor),
median and maximum. Progress lines (``soak: ...``, every 50 kills) are printed as they come.
``--stop-by HH:MM`` (UTC) begins no kill after that time, so that a soak fits the time it has;
the summary says how many kills ran. The node logs and the test's files are kept in a directory of
their own, named at the start; it is removed only when the soak passed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=1000)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--stop-by", help="UTC time (HH:MM) after which no kill is begun")
    args = p.parse_args()
    env = dict(os.environ, ACTORFLOW_CLUSTER_KILLS=str(args.kills), ACTORFLOW_SEED=str(args.seed))
    if args.stop_by:
        now = datetime.datetime.now(datetime.UTC)
        hh, mm = map(int, args.stop_by.split(":"))
        stop = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
        if stop <= now:
            p.error(f"--stop-by {args.stop_by} is not later today (UTC); it is {now:%H:%M} now")
        env["ACTORFLOW_CLUSTER_STOP_BY"] = str(stop.timestamp())
    # A base directory of its own: pytest runs of other projects on the machine rotate the shared
    # one, and a soak of hours must not lose its files to them, nor a failed one its node logs.
    base = tempfile.mkdtemp(prefix="actorflow-soak-")
    print(f"soak files (node logs under t/): {base}", flush=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--timeout=0",
         f"--basetemp={base}/t", "tests/integration/test_cluster_kill.py"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    out: list[str] = []
    for line in proc.stdout:
        out.append(line)
        if line.startswith("soak: "):
            print(f"{datetime.datetime.now(datetime.UTC):%H:%M:%S} {line}", end="", flush=True)
    rc = proc.wait()
    pathlib.Path(base, "pytest.out").write_text("".join(out))
    summary = [line for line in out if line.startswith("kills ")]
    print("".join(summary) or "".join(out)[-3000:])
    if rc != 0:
        print("".join(out)[-9000:], file=sys.stderr)
        print(f"kept for a look: {base} (pytest.out, t/*/n*.log)", file=sys.stderr)
    else:
        shutil.rmtree(base, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
