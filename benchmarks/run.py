"""Run every benchmark, each next to its baseline in the same run, and print the table.

    python benchmarks/run.py            # the full run (about 15 minutes), writes results.json
    python benchmarks/run.py --quick    # small N, one repetition: a smoke run of a minute or two
    python benchmarks/run.py --against 1cce5ed --only steps,signals_one --no-dbos
                                        # workloads 1-4 of this code and of another commit, side by side

Each workload runs in a fresh interpreter per engine and repetition, alternating engines so that
the noise of a shared machine falls on both; figures are medians over the repetitions and each is
reported as a ratio to its baseline. DBOS (``pip install -e '.[bench]'``) is skipped, with a note,
when it is not installed or with ``--no-dbos``.

``--against REV`` checks the commit REV out into a temporary git worktree, installs it into a
temporary venv, and runs workloads 1-4 on it too, each repetition next to this code's: this
checkout's workload module on that revision's installed package, so that both sides run the same
programs timed the same way and differ only in the engine. A second table gives both figures and
their ratio. Both are removed when the run ends.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import pathlib
import platform
import select
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import venv
from dataclasses import dataclass, field
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import READY_PREFIX, dbos_available, result_of  # noqa: E402

AF = str(HERE / "workloads_actorflow.py")
DB = str(HERE / "workloads_dbos.py")
RAW = str(HERE / "workloads_raw.py")
# Workloads whose rows ``workloads_raw.py floor`` also writes with a plain sqlite3 loop, and
# with a plain psycopg loop on PostgreSQL (whose 2a floor is its own: SQLite's is raw commits).
FLOORS = ("steps", "timers")
PG_FLOORS = ("steps", "signals_one", "timers")
# The targets: this code against the revision it is measured against (``--against``), by
# workload, and the floors' shares.
AGAINST_GOALS = {"steps": 1.25, "signals_one": 1.25, "timers": 1.25, "signals_many": 1.0, "fanout": 1.0}
FLOOR_GOALS = {"steps": 0.30, "timers": 0.55}
PG_GOALS = {"steps": 0.6, "signals_one": 0.6, "timers": 0.6}  # PostgreSQL / SQLite
MARK_BEGIN = "<!-- results:begin (written by benchmarks/run.py) -->"
MARK_END = "<!-- results:end -->"


@dataclass(frozen=True)
class Sizes:
    """The N of every workload, and the repetitions, for one mode."""

    reps: int
    steps: int
    signals_one: int
    signals_many: int
    fanout: int
    timers: int
    recovery: int
    recovery_big: int
    resume_short: int
    resume_long: int
    dbos_resume_long: int
    pg_resume_long: int
    scale: int
    raw_seconds: float


FULL = Sizes(reps=3, steps=1000, signals_one=2000, signals_many=1000, fanout=100, timers=1000,
             recovery=1000, recovery_big=100_000, resume_short=10, resume_long=100_000,
             dbos_resume_long=1000, pg_resume_long=10_000, scale=1_000_000, raw_seconds=2.0)
QUICK = Sizes(reps=1, steps=100, signals_one=200, signals_many=100, fanout=20, timers=100,
              recovery=100, recovery_big=2000, resume_short=10, resume_long=500,
              dbos_resume_long=50, pg_resume_long=500, scale=5000, raw_seconds=0.5)
SMOKE = Sizes(reps=1, steps=5, signals_one=10, signals_many=5, fanout=3, timers=5, recovery=5,
              recovery_big=20, resume_short=2, resume_long=5, dbos_resume_long=5, pg_resume_long=5,
              scale=50,
              raw_seconds=0.1)


@dataclass
class Runner:
    """Runs workload processes and collects their result lines."""

    tmp: str
    timeout: float
    verbose: bool
    log: list[dict[str, Any]] = field(default_factory=list)
    _n: int = 0

    def scratch(self) -> str:
        self._n += 1
        d = os.path.join(self.tmp, f"run{self._n:03d}")
        os.makedirs(d)
        return d

    def run(self, script: str, *argv: str, timeout: float | None = None,
            python: str = sys.executable, tag: str = "") -> dict[str, Any] | None:
        """Run one workload process; return its figures, or None (the failure is logged).

        ``python``: the interpreter (another revision's venv); ``tag`` names that revision in
        the log.
        """
        cmd = [python, script, *argv]
        label = " ".join([pathlib.Path(script).stem + (f"@{tag}" if tag else ""), *argv])
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(python),
                                  timeout=timeout or self.timeout, start_new_session=True)
        except subprocess.TimeoutExpired as e:
            return self._fail(label, f"timed out after {e.timeout:.0f}s", e.stderr or "")
        figures = result_of(proc.stdout)
        if figures is None:
            return self._fail(label, f"exit code {proc.returncode}, no result line", proc.stderr)
        self._ok(label, figures, time.monotonic() - t0)
        return figures

    def killed_then(self, script: str, prepare: list[str], recover: list[str]) -> dict[str, Any] | None:
        """Start a preparing process, SIGKILL it once it says READY, then run the recovering one."""
        cmd = [sys.executable, script, *prepare]
        label = " ".join([pathlib.Path(script).stem, *prepare])
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=child_env(sys.executable), start_new_session=True)
        deadline = time.monotonic() + self.timeout
        ready = False
        assert proc.stdout is not None
        while time.monotonic() < deadline and proc.poll() is None:
            r, _, _ = select.select([proc.stdout], [], [], 1.0)
            if r and proc.stdout.readline().strip() == READY_PREFIX:
                ready = True
                break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if not ready:
            err = proc.stderr.read() if proc.stderr else ""
            return self._fail(label, "never became ready", err)
        return self.run(script, *recover)

    def _ok(self, label: str, figures: dict[str, Any], seconds: float) -> None:
        self.log.append({"run": label, "ok": True, "wall_s": seconds, "figures": figures})
        if self.verbose:
            print(f"  . {label}  ({seconds:.1f}s) {json.dumps(figures)}", flush=True)

    def _fail(self, label: str, what: str, stderr: str) -> None:
        tail = "\n".join((stderr or "").strip().splitlines()[-6:])
        self.log.append({"run": label, "ok": False, "error": what, "stderr": tail})
        print(f"  ! {label}: {what}\n    {tail.replace(chr(10), chr(10) + '    ')}", flush=True)
        return None


@dataclass
class Against:
    """Another revision of actorflow, checked out and installed for the run (``--against``)."""

    rev: str
    sha: str
    src: pathlib.Path
    python: str

    @property
    def short(self) -> str:
        return self.sha[:7]


def _git(*argv: str) -> str:
    proc = subprocess.run(["git", *argv], cwd=HERE, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(argv)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def child_env(python: str) -> dict[str, str]:
    """The environment of a workload process run by ``python``: this checkout's code for this
    interpreter, and for another revision's venv its own installed code (a PYTHONPATH set for
    this side must not reach that one, or both sides run the same code)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if python == sys.executable:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH")) if p)
    return env


def prepare_against(rev: str, tmp: str) -> Against:
    """Check ``rev`` out into a worktree under ``tmp`` and install it into a venv there.

    Raises SystemExit (with what failed) if the revision is unknown or does not install.
    """
    sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    src = pathlib.Path(tmp) / f"against-{sha[:12]}"
    print(f"against {rev} ({sha[:7]}): worktree {src}", flush=True)
    _git("worktree", "add", "--detach", str(src), sha)
    env_dir = pathlib.Path(tmp) / f"venv-{sha[:12]}"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    proc = subprocess.run([python, "-m", "pip", "install", "-q", str(src)], capture_output=True, text=True)
    if proc.returncode != 0:
        remove_against(src)
        raise SystemExit(f"installing {rev} ({sha[:7]}) into {env_dir} failed:\n{proc.stderr[-3000:]}")
    return Against(rev, sha, src, python)


def remove_against(src: pathlib.Path) -> None:
    """Remove the worktree of ``--against`` (its files, and git's record of it)."""
    subprocess.run(["git", "worktree", "remove", "--force", str(src)], cwd=HERE, capture_output=True)
    subprocess.run(["git", "worktree", "prune"], cwd=HERE, capture_output=True)


class PgTarget:
    """A durable PostgreSQL server for the PostgreSQL columns: a fresh schema for each actorflow
    run, a fresh database for each DBOS run (its native backend), both on the same server."""

    def __init__(self, url: str | None) -> None:
        self.server: Any = None
        if url is None:
            # A throwaway server from this machine's binaries, with production settings (fsync
            # on, synchronous_commit on: full durability), as the kill tests use.
            sys.path.insert(0, str(HERE.parent))
            from tests.pgserver import DURABLE, PgServer

            self.server = PgServer.start(DURABLE)
            url = self.server.url("postgres")
        self.url = url
        self._n = 0

    def _next(self) -> str:
        self._n += 1
        return f"bench_{os.getpid()}_{self._n}"

    def schema_url(self) -> str:
        sep = "&" if "?" in self.url else "?"
        return f"{self.url}{sep}schema={self._next()}"

    def database_url(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        return urllib.parse.urlunsplit(parts._replace(path="/" + self._next()))

    def settings(self) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as c:
            got = {k: c.execute(f"SHOW {k}").fetchone()[0]  # type: ignore[index]
                   for k in ("server_version", "fsync", "synchronous_commit", "wal_sync_method",
                             "shared_buffers")}
        return ", ".join(f"{k}={v}" for k, v in got.items())

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def median(runs: list[dict[str, Any] | None], key: str) -> float | None:
    """Median of ``key`` over the runs that succeeded (None if none did)."""
    values = [r[key] for r in runs if r is not None and r.get(key) is not None]
    return statistics.median(values) if values else None


# -- the suite ----------------------------------------------------------------------------------
def dbos_configs() -> list[dict[str, str]]:
    """DBOS settings tried for the full-durability comparison (its best is kept)."""
    return [
        {"journal": "delete", "sync": "full", "threads": "0"},
        {"journal": "wal", "sync": "full", "threads": "0"},
        {"journal": "wal", "sync": "full", "threads": "16"},
    ]


def dbos_args(cfg: dict[str, str]) -> list[str]:
    return ["--journal", cfg["journal"], "--sync", cfg["sync"], "--threads", cfg["threads"]]


def cfg_name(cfg: dict[str, str]) -> str:
    threads = "default threads" if cfg["threads"] == "0" else f"max_executor_threads={cfg['threads']}"
    journal = "rollback journal" if cfg["journal"] == "delete" else "WAL"
    return f"{journal}, synchronous={cfg['sync'].upper()}, {threads}"


def run_suite(args: argparse.Namespace, sizes: Sizes, rn: Runner, against: Against | None = None,
              pg: PgTarget | None = None) -> dict[str, Any]:
    """Run everything; return the collected figures."""
    out: dict[str, Any] = {"rows": [], "targets": [], "notes": []}
    if against is not None:
        out["against"] = {"rev": against.rev, "sha": against.sha}

    def old(name: str, n: int, durability: str) -> dict[str, Any] | None:
        assert against is not None
        return rn.run(AF, name, "--dir", rn.scratch(), "--n", str(n), "--durability", durability,
                      python=against.python, tag=against.short)
    use_dbos = not args.no_dbos and dbos_available()
    if not use_dbos:
        out["notes"].append("DBOS not run (not installed, or --no-dbos): its columns are empty.")
    durabilities = ["full", "normal"] if args.also_normal else ["full"]
    only = set(args.only.split(",")) if args.only else None

    def wanted(name: str) -> bool:
        return only is None or name in only

    reps = args.reps or sizes.reps

    # Baselines: raw sqlite3 commits at each durability, raw pykka.
    print("baselines", flush=True)
    raw: dict[str, list] = {"full": [], "normal": [], "delete-full": []}
    for _ in range(reps):
        for key, journal, sync in (("full", "wal", "full"), ("normal", "wal", "normal"),
                                   ("delete-full", "delete", "full")):
            raw[key].append(rn.run(RAW, "sqlite", "--dir", rn.scratch(), "--journal", journal,
                                   "--sync", sync, "--seconds", str(sizes.raw_seconds)))
    raw_rate = {k: median(v, "per_s") for k, v in raw.items()}
    pyk = [rn.run(RAW, "pykka", "--n", str(50 if args.smoke else 5000 if args.quick else 20000))
           for _ in range(reps)]
    out["raw"] = {"sqlite_commits_per_s": raw_rate, "pykka_tell_per_s": median(pyk, "tell_per_s"),
                  "pykka_ask_per_s": median(pyk, "ask_per_s")}

    # Which DBOS setting is its best at full durability (workload 1, small N).
    best = {"journal": "wal", "sync": "full", "threads": "0"}
    if use_dbos and not args.quick:
        print("dbos settings", flush=True)
        trials = []
        for cfg in dbos_configs():
            r = [rn.run(DB, "steps", "--dir", rn.scratch(), "--n", "200", *dbos_args(cfg))]
            trials.append((median(r, "per_s") or 0.0, cfg))
        out["dbos_trials"] = [{"setting": cfg_name(c), "steps_per_s": v} for v, c in trials]
        best = max(trials, key=lambda t: t[0])[1]
    out["dbos_best"] = cfg_name(best)

    # Workloads 1-4, both engines, alternating, at each durability.
    plain = [("steps", f"1. {sizes.steps:,} workflows x 3 procedures", sizes.steps, "workflows/s"),
             ("signals_one", f"2a. one workflow, {sizes.signals_one:,} signals", sizes.signals_one, "signals/s"),
             ("signals_many", f"2b. {sizes.signals_many:,} workflows, one signal each", sizes.signals_many, "signals/s"),
             ("fanout", f"3. parent gathers {sizes.fanout:,} children", sizes.fanout, "children/s"),
             ("timers", f"4. {sizes.timers:,} timers of 0.1 s", sizes.timers, "workflows/s")]
    # The same two workloads with the workflows started by one start_many (one commit). DBOS has
    # no batch start, so these rows have no DBOS figure and are not judged against a target.
    together = [("steps_many", "1. ... started together (one start_many; actorflow only)", sizes.steps,
                 "workflows/s"),
                ("timers_many", "4. ... started together (one start_many; actorflow only)", sizes.timers,
                 "workflows/s")]
    for durability in durabilities:
        dcfg = dict(best) if durability == "full" else {"journal": "wal", "sync": "normal", "threads": best["threads"]}
        for name, title, n, unit in plain:
            if not wanted(name):
                continue
            print(f"{name} ({durability})", flush=True)
            af, db, near, prev, af_pg, db_pg, floor_pg = [], [], [], [], [], [], []
            on_pg = pg is not None and durability == "full"
            for _ in range(reps):
                if against is not None:
                    prev.append(old(name, n, durability))
                if name == "signals_one":
                    # The disk's fsync rate drifts by 10x within minutes here: measure the raw
                    # baseline right next to each repetition.
                    journal_sync = ("wal", durability)
                    near.append(rn.run(RAW, "sqlite", "--dir", rn.scratch(), "--journal", journal_sync[0],
                                       "--sync", journal_sync[1], "--seconds", str(sizes.raw_seconds)))
                if name in FLOORS:
                    # The same rows written by a plain loop, next to each repetition: the floor.
                    near.append(rn.run(RAW, "floor", "--workload", name, "--dir", rn.scratch(),
                                       "--n", str(n), "--sync", durability))
                af.append(rn.run(AF, name, "--dir", rn.scratch(), "--n", str(n), "--durability", durability))
                if use_dbos:
                    db.append(rn.run(DB, name, "--dir", rn.scratch(), "--n", str(n), *dbos_args(dcfg)))
                if on_pg:
                    assert pg is not None
                    af_pg.append(rn.run(AF, name, "--dir", rn.scratch(), "--n", str(n), "--durability",
                                        durability, "--db", pg.schema_url(), tag="pg"))
                    if name in PG_FLOORS:
                        floor_pg.append(rn.run(RAW, "floor", "--workload", name, "--n", str(n), "--sync",
                                               durability, "--db", pg.schema_url(), tag="pg"))
                    if use_dbos:
                        db_pg.append(rn.run(DB, name, "--dir", rn.scratch(), "--n", str(n), "--db",
                                            pg.database_url(), tag="pg"))
            row = {"workload": title, "key": name, "durability": durability, "n": n, "unit": unit,
                   "actorflow": median(af, "per_s"), "dbos": median(db, "per_s"),
                   "dbos_setting": cfg_name(dcfg) if use_dbos else None}
            if on_pg:
                row["actorflow_pg"] = median(af_pg, "per_s")
                row["dbos_pg"] = median(db_pg, "per_s")
                if name in PG_FLOORS:
                    row["floor_pg_per_s"] = median(floor_pg, "per_s")
                if name == "timers":
                    for k in ("late_p50_ms", "late_p99_ms"):
                        row[f"actorflow_pg_{k}"] = median(af_pg, k)
            if name == "timers":
                for k in ("late_p50_ms", "late_p99_ms"):
                    row[f"actorflow_{k}"] = median(af, k)
                    row[f"dbos_{k}"] = median(db, k)
            if name == "signals_one":
                row["raw_sqlite_commits_per_s"] = median(near, "per_s")
            if name in FLOORS:
                row["floor_per_s"] = median(near, "per_s")
            if against is not None:
                row["against"] = median(prev, "per_s")
                if name == "timers":
                    for k in ("late_p50_ms", "late_p99_ms"):
                        row[f"against_{k}"] = median(prev, k)
            out["rows"].append(row)
        for name, title, n, unit in together:
            if not wanted(name.removesuffix("_many")):
                continue
            print(f"{name} ({durability})", flush=True)
            af, prev = [], []
            for _ in range(reps):
                if against is not None:
                    prev.append(old(name, n, durability))
                af.append(rn.run(AF, name, "--dir", rn.scratch(), "--n", str(n), "--durability", durability))
            out["rows"].append({"workload": title, "key": name, "durability": durability, "n": n,
                                "unit": unit, "actorflow": median(af, "per_s"), "dbos": None,
                                "dbos_setting": None, "informative": True,
                                **({"against": median(prev, "per_s")} if against is not None else {})})

    # 5. Recovery after SIGKILL.
    if wanted("recovery"):
        print("recovery", flush=True)
        af, db = [], []
        for _ in range(min(reps, 2)):
            d = rn.scratch()
            af.append(rn.killed_then(
                AF, ["recovery", "--dir", d, "--n", str(sizes.recovery), "--phase", "prepare", "--durability", "full"],
                ["recovery", "--dir", d, "--n", str(sizes.recovery), "--phase", "recover", "--durability", "full"]))
            if use_dbos:
                d = rn.scratch()
                db.append(rn.killed_then(
                    DB, ["recovery", "--dir", d, "--n", str(sizes.recovery), "--phase", "prepare", *dbos_args(best)],
                    ["recovery", "--dir", d, "--n", str(sizes.recovery), "--phase", "recover", *dbos_args(best)]))
        out["recovery"] = {"n": sizes.recovery,
                           "actorflow_ready_s": median(af, "ready_s"), "actorflow_complete_s": median(af, "complete_s"),
                           "dbos_ready_s": median(db, "ready_s"), "dbos_complete_s": median(db, "complete_s")}
        d = rn.scratch()
        big = rn.killed_then(
            AF, ["recovery", "--dir", d, "--n", str(sizes.recovery_big), "--phase", "prepare", "--clone", "--durability", "full"],
            ["recovery", "--dir", d, "--n", str(sizes.recovery_big), "--phase", "recover", "--clone", "--broadcast", "--durability", "full"])
        out["recovery_big"] = {"n": sizes.recovery_big, "ready_s": big and big["ready_s"],
                               "complete_s": big and big["complete_s"]}

    # 6. Resume cost against history length.
    if wanted("resume"):
        print("resume", flush=True)
        res: dict[str, Any] = {}
        d = rn.scratch()
        for n in (sizes.resume_short, sizes.resume_long):
            rn.run(AF, "resume", "--dir", d, "--n", str(n), "--phase", "build", timeout=1800)
        rows = {sizes.resume_short: [], sizes.resume_long: []}
        # A resume takes about 10 ms, most of it opening the file, so one busy moment of the
        # shared machine moves a pair by 20 %: more repetitions (they cost seconds) steady the
        # medians.
        for rep in range(max(reps, 11)):
            for n in rows:
                rows[n].append(rn.run(AF, "resume", "--dir", d, "--n", str(n), "--rep", str(rep), "--durability", "full"))
        res["actorflow"] = {str(n): {"open_ms": median(v, "open_ms"), "resume_ms": median(v, "resume_ms"),
                                     "total_ms": median(v, "total_ms")} for n, v in rows.items()}
        if use_dbos:
            d = rn.scratch()
            for n in (sizes.resume_short, sizes.dbos_resume_long):
                rn.run(DB, "resume", "--dir", d, "--n", str(n), "--phase", "build", *dbos_args(best))
            rows = {sizes.resume_short: [], sizes.dbos_resume_long: []}
            for rep in range(reps):
                for n in rows:
                    rows[n].append(rn.run(DB, "resume", "--dir", d, "--n", str(n), "--rep", str(rep), *dbos_args(best)))
            res["dbos"] = {str(n): {"open_ms": median(v, "open_ms"), "resume_ms": median(v, "resume_ms"),
                                    "total_ms": median(v, "total_ms")} for n, v in rows.items()}
        if pg is not None:
            # A schema is not copied like a file: each size's build leaves one waiting workflow
            # per repetition, and each run resumes one of them.
            pg_reps = max(reps, 5)
            urls = {n: pg.schema_url() for n in (sizes.resume_short, sizes.pg_resume_long)}
            for n, url in urls.items():
                rn.run(AF, "resume", "--dir", rn.scratch(), "--n", str(n), "--phase", "build",
                       "--db", url, "--reps", str(pg_reps), timeout=3600, tag="pg")
            rows = {n: [] for n in urls}
            for rep in range(pg_reps):
                for n, url in urls.items():
                    rows[n].append(rn.run(AF, "resume", "--dir", rn.scratch(), "--n", str(n), "--rep",
                                          str(rep), "--durability", "full", "--db", url, tag="pg"))
            res["actorflow_pg"] = {str(n): {"open_ms": median(v, "open_ms"),
                                            "resume_ms": median(v, "resume_ms"),
                                            "total_ms": median(v, "total_ms")} for n, v in rows.items()}
        out["resume"] = res

    # 7. Scale.
    if wanted("scale"):
        print("scale", flush=True)
        d = rn.scratch()
        built = rn.run(AF, "scale", "--dir", d, "--n", str(sizes.scale), "--phase", "build", timeout=1800)
        runs = [rn.run(AF, "scale", "--dir", d, "--n", str(sizes.scale), "--durability", "full",
                       "--rep", str(rep)) for rep in range(reps)]
        out["scale"] = {"n": sizes.scale, "build_s": built and built["build_s"],
                        "file_mb": median(runs, "file_mb"), "startup_s": median(runs, "startup_s"),
                        "rss_open_mb": median(runs, "rss_open_mb"), "rss_end_mb": median(runs, "rss_end_mb"),
                        "wake_100_s": median(runs, "wake_s")}
    return out


# -- the report ---------------------------------------------------------------------------------
def _fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        s = f"{v:,.0f}"
    elif abs(v) >= 10:
        s = f"{v:.1f}"
    else:
        s = f"{v:.2f}"
    return s + unit


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def targets(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Evaluate the issue's targets on the figures of this run."""
    t: list[dict[str, Any]] = []
    for row in out["rows"]:
        if row["durability"] != "full" or row.get("informative"):
            continue
        r = _ratio(row["actorflow"], row["dbos"])
        t.append({"target": f"{row['workload']}: >= 10x DBOS", "value": r, "met": r is not None and r >= 10})
        if row["key"] == "signals_one":
            r2 = _ratio(row["actorflow"], row.get("raw_sqlite_commits_per_s"))
            t.append({"target": "2a. single-workflow signals >= 45% of raw SQLite commits/s", "value": r2,
                      "met": r2 is not None and r2 >= 0.45, "percent": True})
        goal = FLOOR_GOALS.get(row["key"])
        if goal is not None and row.get("floor_per_s"):
            r3 = _ratio(row["actorflow"], row["floor_per_s"])
            t.append({"target": f"{row['workload']}: >= {100 * goal:.0f}% of its floor", "value": r3,
                      "met": r3 is not None and r3 >= goal, "percent": True})
    for row in out["rows"]:
        if "actorflow_pg" not in row or row.get("informative"):
            continue
        r = _ratio(row["actorflow_pg"], row["actorflow"])
        goal = PG_GOALS.get(row["key"])
        if goal is not None:
            t.append({"target": f"{row['workload']}: PostgreSQL >= {goal}x SQLite", "value": r,
                      "met": r is not None and r >= goal})
        r = _ratio(row["actorflow_pg"], row.get("dbos_pg"))
        t.append({"target": f"{row['workload']}: PostgreSQL >= 4x DBOS on the same server",
                  "value": r, "met": r is not None and r >= 4})
    res_pg = out.get("resume", {}).get("actorflow_pg")
    if res_pg:
        short, long_ = (res_pg[k]["total_ms"] for k in sorted(res_pg, key=int))
        r = _ratio(long_, short)
        t.append({"target": "6. resume cost on PostgreSQL flat within 20% from short to long history",
                  "value": r, "met": r is not None and r <= 1.2})
    ag = out.get("against")
    for row in out["rows"] if ag else []:
        goal = AGAINST_GOALS.get(row["key"]) if row["durability"] == "full" else None
        if goal is None:
            continue
        r = _ratio(row["actorflow"], row.get("against"))
        t.append({"target": f"{row['workload']} ({row['durability']}): >= {goal}x {ag['sha'][:7]}",
                  "value": r, "met": r is not None and r >= goal})
    rec = out.get("recovery")
    if rec:
        r = _ratio(rec["dbos_complete_s"], rec["actorflow_complete_s"])
        t.append({"target": f"5. recovery of {rec['n']:,}: >= 10x faster than DBOS", "value": r,
                  "met": r is not None and r >= 10})
    res = out.get("resume", {}).get("actorflow")
    if res:
        short, long_ = (res[k]["total_ms"] for k in sorted(res, key=int))
        r = _ratio(long_, short)
        t.append({"target": "6. resume cost flat within 20% from short to long history", "value": r,
                  "met": r is not None and r <= 1.2})
    sc = out.get("scale")
    if sc:
        v = sc["rss_end_mb"]
        t.append({"target": f"7. {sc['n']:,} suspended workflows with RSS < 1 GB", "value": v,
                  "met": v is not None and v < 1024, "unit": " MB"})
    return t


def markdown(out: dict[str, Any]) -> str:
    """Render the figures as the Markdown that RESULTS.md holds."""
    m = out["machine"]
    lines = [MARK_BEGIN, "",
             f"Run {m['date']} on {m['cpu']} ({m['cores']} cores, shared), {m['os']}; Python "
             f"{m['python']}, SQLite {m['sqlite']}, actorflow {str(m['actorflow']).split(' (')[0]}, DBOS {m['dbos']}, "
             f"pykka {m['pykka']}. Load average {m['load_before']} before, {m['load_after']} after. "
             f"Command: `{m['command']}` ({m['wall_min']:.1f} min).", ""]
    raw = out["raw"]
    rs = raw["sqlite_commits_per_s"]
    lines += ["Baselines (same run): raw sqlite3 single-row commits/s: WAL + synchronous=FULL "
              f"{_fmt(rs.get('full'))}, WAL + NORMAL {_fmt(rs.get('normal'))}, rollback journal + FULL "
              f"{_fmt(rs.get('delete-full'))}; raw pykka: tell {_fmt(raw['pykka_tell_per_s'])}/s, "
              f"ask {_fmt(raw['pykka_ask_per_s'])}/s.", ""]
    if out.get("dbos_trials"):
        trials = "; ".join(f"{t['setting']}: {_fmt(t['steps_per_s'])} wf/s" for t in out["dbos_trials"])
        lines += [f"DBOS settings tried on workload 1 (N=200): {trials}. Best, used below at full "
                  f"durability: {out['dbos_best']}.", ""]
    lines += ["| workload | durability | unit | actorflow | DBOS | actorflow / DBOS |",
              "| --- | --- | --- | ---: | ---: | ---: |"]
    for row in out["rows"]:
        if row.get("informative"):
            lines.append(f"| {row['workload']} | {row['durability']} | {row['unit']} | "
                         f"{_fmt(row['actorflow'])} | no batch start | |")
            continue
        lines.append(f"| {row['workload']} | {row['durability']} | {row['unit']} | {_fmt(row['actorflow'])} | "
                     f"{_fmt(row['dbos'])} | {_fmt(_ratio(row['actorflow'], row['dbos']), 'x')} |")
        if row["key"] == "timers":
            lines.append(f"| 4. lateness p50 / p99 | {row['durability']} | ms | "
                         f"{_fmt(row['actorflow_late_p50_ms'])} / {_fmt(row['actorflow_late_p99_ms'])} | "
                         f"{_fmt(row['dbos_late_p50_ms'])} / {_fmt(row['dbos_late_p99_ms'])} | |")
        if row["key"] == "signals_one":
            lines.append(f"| 2a. vs raw SQLite commits/s | {row['durability']} | % | "
                         f"{_fmt(_ratio(row['actorflow'], row['raw_sqlite_commits_per_s']) and 100 * _ratio(row['actorflow'], row['raw_sqlite_commits_per_s']), '%')} | | |")
    rec = out.get("recovery")
    if rec:
        lines.append(f"| 5. recovery of {rec['n']:,} after SIGKILL: ready | full | s | {_fmt(rec['actorflow_ready_s'])} | "
                     f"{_fmt(rec['dbos_ready_s'])} | |")
        lines.append(f"| 5. ... all complete (signals sent one by one) | full | s | {_fmt(rec['actorflow_complete_s'])} | "
                     f"{_fmt(rec['dbos_complete_s'])} | {_fmt(_ratio(rec['dbos_complete_s'], rec['actorflow_complete_s']), 'x faster')} |")
    big = out.get("recovery_big")
    if big:
        lines.append(f"| 5. recovery of {big['n']:,}: ready / all complete (one broadcast) | full | s | "
                     f"{_fmt(big['ready_s'])} / {_fmt(big['complete_s'])} | | |")
    res = out.get("resume")
    if res:
        for engine in ("actorflow", "dbos"):
            if engine not in res:
                continue
            ks = sorted(res[engine], key=int)
            vals = " / ".join(f"{_fmt(res[engine][k]['total_ms'])} ({int(k):,})" for k in ks)
            lines.append(f"| 6. resume after N iterations: open + signal + result ({engine}) | full | ms | "
                         + (f"{vals} | | {_fmt(_ratio(res[engine][ks[1]]['total_ms'], res[engine][ks[0]]['total_ms']), 'x')} |"
                            if engine == "actorflow" else f" | {vals} | |"))
    sc = out.get("scale")
    if sc:
        lines.append(f"| 7. {sc['n']:,} suspended workflows: file / start-up / RSS | full | MB / s / MB | "
                     f"{_fmt(sc['file_mb'])} / {_fmt(sc['startup_s'])} / {_fmt(sc['rss_end_mb'])} | | |")
    pg_rows = [row for row in out["rows"] if "actorflow_pg" in row]
    if pg_rows:
        lines += ["", f"PostgreSQL (same run; a throwaway server on this machine, {out.get('postgres', '')}): "
                  "actorflow on a schema of its own per run, DBOS on a database of its own per run "
                  "(its native backend), both at full durability (synchronous_commit=on):", "",
                  "| workload | unit | actorflow SQLite | actorflow PostgreSQL | PostgreSQL / SQLite | "
                  "psycopg floor | actorflow, % of it | DBOS PostgreSQL | actorflow / DBOS, both PostgreSQL |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for row in pg_rows:
            fl = row.get("floor_pg_per_s")
            share = _ratio(row["actorflow_pg"], fl)
            lines.append(f"| {row['workload']} | {row['unit']} | {_fmt(row['actorflow'])} | "
                         f"{_fmt(row['actorflow_pg'])} | {_fmt(_ratio(row['actorflow_pg'], row['actorflow']), 'x')} | "
                         f"{_fmt(fl)} | {_fmt(share and 100 * share, '%')} | "
                         f"{_fmt(row.get('dbos_pg'))} | {_fmt(_ratio(row['actorflow_pg'], row.get('dbos_pg')), 'x')} |")
            if row["key"] == "timers" and row.get("actorflow_pg_late_p50_ms") is not None:
                lines.append(f"| 4. lateness p50 / p99 | ms | {_fmt(row['actorflow_late_p50_ms'])} / "
                             f"{_fmt(row['actorflow_late_p99_ms'])} | {_fmt(row['actorflow_pg_late_p50_ms'])} / "
                             f"{_fmt(row['actorflow_pg_late_p99_ms'])} | | | | | |")
        res_pg = (out.get("resume") or {}).get("actorflow_pg")
        if res_pg:
            ks = sorted(res_pg, key=int)
            vals = " / ".join(f"{_fmt(res_pg[k]['total_ms'])} ({int(k):,})" for k in ks)
            lines.append(f"| 6. resume after N iterations: open + signal + result | ms | | {vals} | "
                         f"{_fmt(_ratio(res_pg[ks[1]]['total_ms'], res_pg[ks[0]]['total_ms']), 'x')} long/short | | |")
    floors = [row for row in out["rows"] if row.get("floor_per_s")]
    if floors:
        lines += ["", "Floors (same run): each workload's rows, written by a plain sqlite3 loop with "
                  "no engine (`workloads_raw.py floor`): one commit per start, as a start returns "
                  "only once durable, everything else riding in those commits; no threads, no "
                  "pickling, no workflow code.", "",
                  "| workload | durability | floor, workflows/s | actorflow, % of the floor | "
                  "10x DBOS, % of the floor |", "| --- | --- | ---: | ---: | ---: |"]
        for row in floors:
            f = row["floor_per_s"]
            share = _ratio(row["actorflow"], f)
            need = _ratio(10 * row["dbos"], f) if row["dbos"] else None
            lines.append(f"| {row['workload']} | {row['durability']} | {_fmt(f)} | "
                         f"{_fmt(share and 100 * share, '%')} | {_fmt(need and 100 * need, '%')} |")
    ag = out.get("against")
    if ag:
        old = ag["sha"][:7]
        lines += ["", f"This code against {ag['rev']} ({old}), same run, each repetition of the two "
                  f"next to each other (medians):", "",
                  f"| workload | durability | unit | this code | {old} | this / {old} |",
                  "| --- | --- | --- | ---: | ---: | ---: |"]
        for row in out["rows"]:
            lines.append(f"| {row['workload']} | {row['durability']} | {row['unit']} | {_fmt(row['actorflow'])} | "
                         f"{_fmt(row.get('against'))} | {_fmt(_ratio(row['actorflow'], row.get('against')), 'x')} |")
            if row["key"] == "timers":
                lines.append(f"| 4. lateness p50 / p99 | {row['durability']} | ms | "
                             f"{_fmt(row['actorflow_late_p50_ms'])} / {_fmt(row['actorflow_late_p99_ms'])} | "
                             f"{_fmt(row.get('against_late_p50_ms'))} / {_fmt(row.get('against_late_p99_ms'))} | |")
    lines += ["", "Targets:", ""]
    for t in out["targets"]:
        v = t["value"]
        shown = (_fmt(100 * v, "%") if t.get("percent") else _fmt(v, t.get("unit", "x"))) if v is not None else "n/a"
        lines.append(f"- {'met' if t['met'] else 'NOT met'}: {t['target']} (measured {shown})")
    for note in out["notes"]:
        lines.append(f"- note: {note}")
    failed = [x for x in out["log"] if not x["ok"]]
    if failed:
        lines.append(f"- {len(failed)} process(es) failed; see the JSON's log: "
                     + "; ".join(f"{x['run']}: {x['error']}" for x in failed[:5]))
    lines += ["", MARK_END]
    return "\n".join(lines)


def machine(argv: list[str]) -> dict[str, Any]:
    def version(pkg: str) -> str:
        try:
            return importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    cpu = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                             text=True).stdout.strip()
    except OSError:
        rev = ""
    return {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpu": cpu,
            "cores": os.cpu_count(), "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "actorflow": f"{version('actorflow')} ({rev})" if rev else version("actorflow"),
            "dbos": version("dbos"), "pykka": version("pykka"),
            "load_before": " ".join(f"{x:.1f}" for x in os.getloadavg()),
            "command": "python benchmarks/run.py " + " ".join(argv)}


def main(argv: list[str] | None = None) -> int:
    """Run the suite, print the table, write the JSON (and the Markdown, if asked)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small N, one repetition (smoke run)")
    p.add_argument("--smoke", action="store_true", help="tiny N: checks that everything runs")
    p.add_argument("--reps", type=int, default=0, help="repetitions per figure (default 3, quick 1)")
    p.add_argument("--only", default="", help="comma-separated workloads: steps,signals_one,"
                   "signals_many,fanout,timers,recovery,resume,scale")
    p.add_argument("--also-normal", action="store_true", help="also compare workloads 1-4 at "
                   "synchronous=NORMAL (WAL) on both sides")
    p.add_argument("--no-dbos", action="store_true", help="run actorflow and the raw baselines only")
    p.add_argument("--against", default=None, metavar="REV", help="also run workloads 1-4 on the "
                   "commit REV (checked out into a temporary git worktree and installed into a "
                   "temporary venv), next to this code, and report both with their ratio")
    p.add_argument("--json", default=None, help="where to write the figures (default "
                   "benchmarks/results.json, or results-quick.json with --quick)")
    p.add_argument("--markdown", default=None, help="also write the table into this Markdown file, "
                   "between its results markers (e.g. benchmarks/RESULTS.md)")
    p.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per process")
    p.add_argument("--quiet", action="store_true", help="do not print every process's figures")
    p.add_argument("--postgres", action="store_true", help="also run workloads 1-4 and 6 on "
                   "PostgreSQL (actorflow, and DBOS on the same server): a throwaway server with "
                   "production settings started from this machine's binaries, or --pg-url's")
    p.add_argument("--pg-url", default=None, help="with --postgres: a superuser's URL of a durable "
                   "server to use instead (runs get schemas and databases of their own on it)")
    argv = sys.argv[1:] if argv is None else argv
    args = p.parse_args(argv)
    sizes = SMOKE if args.smoke else QUICK if args.quick else FULL
    args.quick = args.quick or args.smoke
    info = machine(argv)
    # A run stopped by SIGTERM still removes what it made (the --against worktree, the scratch).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    t0 = time.monotonic()
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)  # (a scratch directory named but not made yet)
    with tempfile.TemporaryDirectory(prefix="actorflow-bench-", dir=args.dir) as tmp:
        rn = Runner(tmp, args.timeout, not args.quiet)
        against = prepare_against(args.against, tmp) if args.against else None
        pg = PgTarget(args.pg_url) if args.postgres or args.pg_url else None
        try:
            out = run_suite(args, sizes, rn, against, pg)
            if pg is not None:
                out["postgres"] = pg.settings()
        finally:
            if against is not None:
                remove_against(against.src)
            if pg is not None:
                pg.stop()
    info["wall_min"] = (time.monotonic() - t0) / 60
    info["load_after"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    out["machine"] = info
    out["log"] = rn.log
    out["targets"] = targets(out)
    md = markdown(out)
    print()
    print(md)
    path = args.json or str(HERE / ("results-quick.json" if args.quick else "results.json"))
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"\nfigures written to {path}")
    if args.markdown:
        mdpath = pathlib.Path(args.markdown)
        text = mdpath.read_text() if mdpath.exists() else f"# Benchmark results\n\n{MARK_BEGIN}\n{MARK_END}\n"
        if MARK_BEGIN in text and MARK_END in text:
            head, rest = text.split(MARK_BEGIN, 1)
            _, tail = rest.split(MARK_END, 1)
            text = head + md + tail
        else:
            text = text.rstrip() + "\n\n" + md + "\n"
        mdpath.write_text(text)
        print(f"table written to {mdpath}")
    return 1 if any(not x["ok"] for x in rn.log) else 0


if __name__ == "__main__":
    sys.exit(main())
