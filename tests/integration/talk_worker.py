"""The processes of the ask kill test (``test_talk_kill.py``), each killed at random moments.

    python -m tests.integration.talk_worker serve DB LEDGERS ASKS LOG
        runs the ledgers (started by id, so every run finds them) and an asker thread of its
        own (``ref.ask``); serves until killed, or (``ASKS`` reached by every asker) until the
        ``done`` file next to LOG exists.
    python -m tests.integration.talk_worker ask DB NAME LEDGERS ASKS LOG
        an asker in a process of its own, through ``wf ask`` (the way another process asks).

An asker logs ``asked ID`` before each ask and ``got ID LEDGER VALUE`` after it returned, and
``seen LEDGER VALUE`` for each published total it reads; each line flushed and fsynced. A
restarted asker goes on from its first ask without a ``got`` line, asking it again under the
same ask id (its reply stored, or its request still waiting).
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path


def _log(path: Path, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _done_asks(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {
        parts[1]
        for parts in (line.split() for line in path.read_text().splitlines())
        if parts and parts[0] == "got"
    }


def _ask_ids(name: str, ledgers: int, asks: int) -> list[tuple[str, str]]:
    return [(f"{name}-{i}", f"ledger-{i % ledgers}") for i in range(asks)]


def serve(db: str, ledgers: int, asks: int, log: Path) -> None:
    from actors import ActorSystem

    from .talk_flows import ledger

    with ActorSystem(db) as system:
        refs = [system.start(ledger, f"ledger-{i}", id=f"ledger-{i}") for i in range(ledgers)]
        done = _done_asks(log)

        def asker() -> None:
            for ask_id, wid in _ask_ids("srv", ledgers, asks):
                if ask_id in done:
                    continue
                _log(log, f"asked {ask_id}")
                value = system.get(wid).ask("add", 1, timeout=120, ask_id=ask_id)
                _log(log, f"got {ask_id} {wid} {value}")
                _log(log, f"seen {wid} {system.get(wid).published('total')}")

        t = threading.Thread(target=asker, daemon=True)
        t.start()
        stop = log.with_name("done")
        while not stop.exists():
            time.sleep(0.05)
            for r in refs:
                r.status()
        t.join(120)


def ask(db: str, name: str, ledgers: int, asks: int, log: Path) -> None:
    from actors.cli import main
    from persistence import loads, open_store

    done = _done_asks(log)
    for ask_id, wid in _ask_ids(name, ledgers, asks):
        if ask_id in done:
            continue
        _log(log, f"asked {ask_id}")
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(
                ["ask", wid, "add", "1", "--ask-id", ask_id, "--timeout", "120", "--db", db]
            )
        if code != 0:
            raise SystemExit(f"wf ask {ask_id} exited {code}: {err.getvalue()}")
        _log(log, f"got {ask_id} {wid} {int(out.getvalue().strip())}")
        store = open_store(db, owner=False)
        try:
            blob = store.published(wid, "total")
        finally:
            store.close()
        if blob is not None:
            _log(log, f"seen {wid} {loads(blob)}")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "serve":
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
    else:
        ask(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), Path(sys.argv[6]))
