"""Round trips and statements per workflow on PostgreSQL, counted on the client.

    python benchmarks/pgmeter.py [--workload steps|signals_one|timers] [--n 300] [--pg-url URL]

Runs one workload of ``benchmarks/run.py`` in this process (workload 1, ``steps``: N workflows of
three procedures, started one after another, then every result read; 2a, ``signals_one``: one
workflow, N signals; or 4, ``timers``: N workflows sleeping 0.1 s, started one after another,
then every result read) on a throwaway durable server (``tests/pgserver.py``, as ``run.py
--postgres``) or on ``--pg-url``'s, and counts what every psycopg connection of the system did
while it ran, by the connection's ``application_name`` (writer, reader, ...):

- round trips: each time the client waits for the server's answer (a statement outside a
  pipeline, a pipeline's sync); a statement queued in a pipeline is none, nor is a COMMIT that
  sends nothing (no transaction open); waiting for a notification (LISTEN) is counted apart, as
  it is no round trip;
- statements: every statement sent (``execute``, each row of an ``executemany``, and the
  ``COMMIT`` or ``ROLLBACK`` of a non-autocommit connection).

Figures are per workflow (1, 4) or per signal (2a); the system's start and close are not counted.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import sys
import tempfile
import threading
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402
from psycopg import _pipeline  # noqa: E402
from psycopg.waiting import Wait  # noqa: E402

_lock = threading.Lock()
_on = False
round_trips: collections.Counter[str] = collections.Counter()
statements: collections.Counter[str] = collections.Counter()
notify_waits: collections.Counter[str] = collections.Counter()


def _role(conn: Any) -> str:
    try:
        name = conn.pgconn.parameter_status(b"application_name")
    except Exception:
        return "?"
    return name.decode() if name else "(unnamed)"


def _count(counter: collections.Counter[str], conn: Any, n: int = 1) -> None:
    if _on:
        role = _role(conn)
        with _lock:
            counter[role] += n


def _reading(gen: Any, conn: Any) -> Any:
    """``gen``, counting one round trip if it waits to read the server's answer (a COMMIT of
    a connection with no transaction open, say, sends nothing and waits for nothing)."""
    read = False
    sent = None
    while True:
        try:
            wanted = gen.send(sent)
        except StopIteration as stop:
            return stop.value
        if not read and wanted & Wait.R:
            read = True
            _count(round_trips, conn)
        sent = yield wanted


def install() -> None:
    """Wrap psycopg's connection and cursor so that every wait and statement is counted."""
    wait = psycopg.Connection.wait

    def counted_wait(self: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(gen, "__qualname__", "")
        if name == "notifies":
            _count(notify_waits, self)
        elif _on and (self._pipeline is None or name.endswith(("_sync_gen", "_exit_gen"))):
            gen = _reading(gen, self)
        return wait(self, gen, *args, **kwargs)

    psycopg.Connection.wait = counted_wait  # type: ignore[method-assign]

    execute = psycopg.Cursor.execute

    def counted_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        _count(statements, self.connection)
        return execute(self, *args, **kwargs)

    psycopg.Cursor.execute = counted_execute  # type: ignore[method-assign]

    executemany = psycopg.Cursor.executemany

    def counted_executemany(self: Any, query: Any, params_seq: Any, *args: Any, **kwargs: Any) -> Any:
        rows = list(params_seq)
        _count(statements, self.connection, len(rows))
        return executemany(self, query, rows, *args, **kwargs)

    psycopg.Cursor.executemany = counted_executemany  # type: ignore[method-assign]

    for name in ("commit", "rollback"):
        original = getattr(psycopg.Connection, name)

        def counted(self: Any, _original: Any = original) -> Any:
            if not self.autocommit and self.pgconn.transaction_status != 0:  # not IDLE
                _count(statements, self)
            return _original(self)

        setattr(psycopg.Connection, name, counted)
    assert _pipeline is not None


def run(workload: str, n: int, url: str) -> float:
    """Run ``workload`` with the counters on; its wall time in seconds."""
    global _on
    from workloads_actorflow import collect, nap, three_steps

    from actors import ActorSystem

    with ActorSystem(url, durability="full") as system:
        if workload in ("steps", "timers"):
            system.idle(timeout=60)
            with _lock:
                _on = True
            t0 = time.perf_counter()
            if workload == "steps":
                refs = [system.start(three_steps, i) for i in range(n)]
                results = [r.result(timeout=600) for r in refs]
                assert results == [i + 3 for i in range(n)], "wrong results"
            else:
                refs = [system.start(nap, 0.1) for _ in range(n)]
                for r in refs:
                    r.result(timeout=600)
            elapsed = time.perf_counter() - t0
        else:
            ref = system.start(collect, n)
            system.idle(timeout=60)
            with _lock:
                _on = True
            t0 = time.perf_counter()
            for _ in range(n):
                ref.signal("item", 1)
            assert ref.result(timeout=600) == n
            elapsed = time.perf_counter() - t0
        with _lock:
            _on = False
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", choices=("steps", "signals_one", "timers"), default="steps")
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--pg-url", help="a superuser's URL of a durable server (default: a throwaway one)")
    args = p.parse_args()
    install()
    server = None
    base = args.pg_url
    if base is None:
        from tests.pgserver import DURABLE, PgServer

        server = PgServer.start(DURABLE)
        base = server.url("postgres")
    try:
        schema = f"pgmeter_{os.getpid()}"
        sep = "&" if "?" in base else "?"
        with tempfile.TemporaryDirectory():
            elapsed = run(args.workload, args.n, f"{base}{sep}schema={schema}")
    finally:
        if server is not None:
            server.stop()
    per = "signal" if args.workload == "signals_one" else "workflow"
    print(f"{args.workload}, N = {args.n}: {elapsed / args.n * 1e6:,.0f} us per {per} (wall)")
    print(f"{'connection':<24}{'round trips/' + per:>22}{'statements/' + per:>22}{'LISTEN waits':>14}")
    for role in sorted(set(round_trips) | set(statements) | set(notify_waits)):
        print(f"{role:<24}{round_trips[role] / args.n:>22.2f}{statements[role] / args.n:>22.2f}"
              f"{notify_waits[role]:>14}")
    print(f"{'all':<24}{sum(round_trips.values()) / args.n:>22.2f}{sum(statements.values()) / args.n:>22.2f}"
          f"{sum(notify_waits.values()):>14}")


if __name__ == "__main__":
    main()
