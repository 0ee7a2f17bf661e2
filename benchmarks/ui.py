"""Benchmark ``wf ui``: how long its pages take on a database of 100,000 workflows.

Run: ``python benchmarks/ui.py`` (a SQLite file in a temporary directory), ``--db
postgresql://...`` for a PostgreSQL database you give (its ``?schema=`` must be empty or absent),
or ``--pg`` for a throwaway PostgreSQL server started from this machine's binaries (as the tests
start theirs). ``--n`` sets the size (100,000), ``--reps`` the requests per page (20).

The database is built through the store, as a system leaves it: ``--n`` workflows of six types,
70 % of them finished (completed, failed with a traceback, cancelled), one in a thousand a parent
of 50 children, each row with a continuation, a wait and its recent steps of a realistic size.
Then the installed ``wf ui`` serves it in a process of its own, and each page is requested
``--reps`` times over HTTP from this one (after one request to warm it): the median and the 95th
percentile of the whole round trip, as a browser would wait for it; and the median of what the
page reads from the store, timed in this process (the database's part of it).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import percentile, report  # noqa: E402

from actors._ui import data  # noqa: E402
from persistence import NewWorkflow, StepWrite, Store, dumps, open_store  # noqa: E402

TYPES = ["game.auction:auction", "game.quest:quest", "game.trade:haggle", "game.raid:raider",
         "game.buffs:buff", "game.patrol:patrol"]
BATCH = 5_000
T0 = 1_800_000_000.0


def _wait_on(i: int) -> str:
    return json.dumps({"mode": "select", "at": "world.py:120 await select(timer('end', 60), signal('bid'))",
                       "arms": [{"kind": "timer", "name": "end", "due_at": T0 + i + 3600},
                                {"kind": "signal", "name": "bid"}]})


def build(db: str, n: int) -> dict[str, Any]:
    """Fill ``db`` with ``n`` workflows; return what the pages are asked for."""
    store = open_store(db)
    started = time.perf_counter()
    try:
        cont = dumps({"pc": 7, "locals": {"price": 120, "bidder": "hero-12", "lots": list(range(40))}, "pad": "x" * 400})
        parents = []
        wfs: list[NewWorkflow] = []
        for i in range(n):
            t = TYPES[i % len(TYPES)]
            wid, parent = wfs_id(i), None
            if i % 1000 == 500:
                parents.append(wid)
            elif 500 < i % 1000 <= 550:
                parent = parents[-1]
            wfs.append(NewWorkflow(id=wid, type=t, continuation=cont, fingerprint="f" * 64,
                                   parent_id=parent, waiting_on=_wait_on(i), created_at=T0 + i * 0.01))
            if len(wfs) == BATCH:
                store.create_workflows(wfs)
                wfs = []
        if wfs:
            store.create_workflows(wfs)
        promises = []
        error = json.dumps({"type": "KeyError", "message": "'lost item'",
                            "traceback": "Traceback (most recent call last):\n" + '  File "world.py", line 80, in quest\n' * 12 + "KeyError: 'lost item'\n"})
        failed = running = None
        for i in range(n):
            wid = wfs_id(i)
            kind = i % 10
            recent = json.dumps([int((T0 + i * 0.01) * 1000), "started", {"step": 1}])
            if kind < 7 and not wid.startswith("raid-") and ":add-" not in wid:
                status = ("completed", "completed", "completed", "completed", "failed", "cancelled", "completed")[kind]
                if status == "failed":
                    failed = wid
                promises.append(store.submit_step(StepWrite(
                    workflow_id=wid, step_seq=1, status=status, updated_at=T0 + i * 0.01 + 5,
                    result=dumps({"winner": "hero-3", "price": 150}) if status == "completed" else None,
                    error=error if status == "failed" else None, recent=recent,
                    history=[(status, json.dumps({"at": "end"}))])))
            else:
                running = running or wid
            if len(promises) >= BATCH:
                for p in promises:
                    p.result(120)
                promises = []
        for p in promises:
            p.result(120)
        counts = store.count_workflows()
        mid = store.browse_workflows(after=(T0 + n * 0.005, ""), newest_first=False, limit=1)[0]
    finally:
        store.close()
    return {"built_s": time.perf_counter() - started, "parent": parents[len(parents) // 2],
            "failed": failed, "running": running, "mid": f"{mid.created_at!r}~{mid.id}",
            "total": sum(counts.values())}


def wfs_id(i: int) -> str:
    """The id ``build`` gave workflow number ``i``."""
    t = TYPES[i % len(TYPES)].rpartition(":")[2]
    r = i % 1000
    if r == 500:
        return f"raid-{i:06d}"
    if 500 < r <= 550:
        return f"raid-{i - r + 500:06d}:add-{r - 500}"
    return f"{t}-{i:06d}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(db: str, facts: dict[str, Any], reps: int) -> list[dict[str, Any]]:
    port = _free_port()
    wf = str(pathlib.Path(sys.executable).with_name("wf"))
    proc = subprocess.Popen([wf, "ui", "--db", db, "--port", str(port), "--read-only"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    q = urllib.parse.quote
    pages = [
        ("list, newest first", "/"),
        ("list, oldest first", "/?order=oldest"),
        ("list, a page in the middle", "/?" + urllib.parse.urlencode({"after": facts["mid"]})),
        ("list, status=failed", "/?status=failed"),
        ("list, type=quest, status=completed", "/?type=quest&status=completed"),
        ("list, id prefix matching 17", "/?id=quest-0123"),
        ("list, id prefix matching none", "/?id=nothing-like-it"),
        ("counts by status (JSON, every 3 s)", "/api/counts"),
        ("workflow with 50 children", "/w/" + q(facts["parent"], safe="")),
        ("running workflow", "/w/" + q(facts["running"], safe="")),
        ("failed workflow, traceback", "/w/" + q(facts["failed"], safe="")),
    ]
    rows = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/api/counts", timeout=30).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"wf ui did not start: {proc.stdout.read() if proc.stdout else ''}") from None
                time.sleep(0.1)
        reader = open_store(db, owner=False)
        for name, path in pages:
            with urllib.request.urlopen(base + path, timeout=60) as r:  # warm
                size = len(r.read())
                assert r.status == 200, (path, r.status)
            times = []
            for _ in range(reps):
                t = time.perf_counter()
                with urllib.request.urlopen(base + path, timeout=60) as r:
                    r.read()
                times.append((time.perf_counter() - t) * 1000)
            reads = []
            for _ in range(reps):
                t = time.perf_counter()
                _page_data(reader, path)
                reads.append((time.perf_counter() - t) * 1000)
            rows.append({"page": name, "path": path, "p50_ms": percentile(times, 50),
                         "p95_ms": percentile(times, 95), "reads_p50_ms": percentile(reads, 50),
                         "bytes": size})
            print(f"  {name:<40} p50 {rows[-1]['p50_ms']:7.1f} ms  p95 {rows[-1]['p95_ms']:7.1f} ms  "
                  f"reads p50 {rows[-1]['reads_p50_ms']:6.1f} ms  {size:>8,} bytes", flush=True)
        reader.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return rows


def _page_data(store: Store, path: str) -> object:
    """What the page at ``path`` reads from the store, in this process (no HTTP, no HTML)."""
    parts = urllib.parse.urlsplit(path)
    if parts.path == "/api/counts":
        return data.counts(store)
    if parts.path.startswith("/w/"):
        return data.workflow_page(store, urllib.parse.unquote(parts.path[3:]))
    q = dict(urllib.parse.parse_qsl(parts.query))
    if q.get("type") == "quest":
        q["type"] = "game.quest:quest"
    return data.list_page(store, data.Filters.parse(q))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="workflows in the database (100,000)")
    ap.add_argument("--reps", type=int, default=20, help="requests per page (20)")
    ap.add_argument("--db", help="a postgresql:// URL to build in (default: a SQLite file in --dir)")
    ap.add_argument("--pg", action="store_true", help="start a throwaway PostgreSQL server for it")
    ap.add_argument("--dir", help="where the SQLite file goes (default: a temporary directory)")
    args = ap.parse_args(argv)
    server = None
    directory = args.dir or tempfile.mkdtemp(prefix="af-bench-ui-")
    db = args.db or os.path.join(directory, "ui.db")
    if args.pg:
        from tests.pgserver import DURABLE, PgServer

        server = PgServer.start(DURABLE)
        db = server.url(server.create_database("bench_ui"))
    try:
        print(f"building {args.n:,} workflows in {db if not db.startswith('postgres') else 'PostgreSQL'} ...", flush=True)
        facts = build(db, args.n)
        print(f"built in {facts['built_s']:.1f} s; {facts['total']:,} workflows", flush=True)
        rows = measure(db, facts, args.reps)
    finally:
        if server is not None:
            server.stop()
    report(n=args.n, backend="postgresql" if db.startswith("postgres") else "sqlite",
           built_s=facts["built_s"], pages=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
