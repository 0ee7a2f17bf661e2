"""Asks and published values under SIGKILL: the process running the workflows and the askers
(one thread in that process, two processes of their own asking through ``wf ask``) are killed at
random moments, many times, then run to the end; the audit proves SPEC §6's rows for a reply and
a published value: every ask that returned got the value the workflow replied, no request was
answered twice, no reply was lost, and every published value a reader saw was committed."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from .dbconn import connect

ROOT = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("ACTORFLOW_TALK_KILLS", "8"))
LEDGERS = 2
ASKS = int(os.environ.get("ACTORFLOW_TALK_ASKS", "30"))  # per asker
ASKERS = ("a", "b")  # processes of their own; "srv" is the server's own thread
T = 240


def _spawn(*args: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.talk_worker", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "ab"),  # noqa: SIM115
    )


def _lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def _got(path: Path) -> int:
    return sum(1 for parts in _lines(path) if parts and parts[0] == "got")


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "talk.db")
        return
    server = request.getfixturevalue("pg_durable_server")
    with server.schema("talk") as url:
        schema = url.rsplit("search_path%3D", 1)[1]
        yield f"{url}&schema={schema}"


@pytest.mark.slow
def test_asks_and_published_values_survive_sigkill_of_both_sides(
    tmp_path: Path, target: str
) -> None:
    db = target
    rng = random.Random(int(os.environ.get("ACTORFLOW_SEED", "35")))
    logs = {name: tmp_path / f"{name}.log" for name in ("srv", *ASKERS)}
    errors = tmp_path / "stderr.txt"
    kills = 0

    def start() -> dict[str, subprocess.Popen[bytes]]:
        procs = {"srv": _spawn("serve", db, str(LEDGERS), str(ASKS), str(logs["srv"]), log=errors)}
        for name in ASKERS:
            procs[name] = _spawn(
                "ask", db, name, str(LEDGERS), str(ASKS), str(logs[name]), log=errors
            )
        return procs

    from actors import ActorSystem

    from .talk_flows import ledger

    with ActorSystem(db) as system:  # the ledgers exist before anyone asks them
        for i in range(LEDGERS):
            system.start(ledger, f"ledger-{i}", id=f"ledger-{i}")
        system.idle(timeout=T)
    for _ in range(KILLS):
        procs = start()
        when = sorted((rng.uniform(0.3, 3.0), name) for name in procs)
        t0 = time.monotonic()
        for at, name in when:
            time.sleep(max(0.0, at - (time.monotonic() - t0)))
            p = procs[name]
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                kills += 1
            p.wait(30)
        for name, p in procs.items():
            assert p.returncode in (0, -signal.SIGKILL), (
                f"{name} failed:\n{errors.read_text()[-3000:]}"
            )

    # The last run: no kill; every asker finishes its asks.
    procs = start()
    deadline = time.monotonic() + T
    for name in ASKERS:
        procs[name].wait(max(1.0, deadline - time.monotonic()))
        assert procs[name].returncode == 0, f"asker {name} failed:\n{errors.read_text()[-3000:]}"
    while (
        _got(logs["srv"]) < ASKS or len({p[1] for p in _lines(logs["srv"]) if p[0] == "got"}) < ASKS
    ):
        assert procs["srv"].poll() is None, f"the server ended early:\n{errors.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "the server's asker did not finish"
        time.sleep(0.1)
    (tmp_path / "done").write_text("")
    procs["srv"].wait(60)
    assert procs["srv"].returncode == 0, errors.read_text()[-3000:]

    # -- the audit -------------------------------------------------------------------------------
    con = connect(db)
    replies = [
        tuple(r)
        for r in con.execute("SELECT workflow_id, ask_id, total FROM talk_replies").fetchall()
    ]
    asks = {
        (r[0], r[1]): (r[2], r[3])
        for r in con.execute("SELECT workflow_id, ask_id, status, reply FROM asks").fetchall()
    }
    published = {
        r[0]: r[1]
        for r in con.execute(
            "SELECT workflow_id, value FROM published WHERE key = 'total'"
        ).fetchall()
    }
    con.close()
    from persistence import loads

    answered = Counter(ask_id for _, ask_id, _ in replies)
    duplicated = sum(n - 1 for n in answered.values() if n > 1)
    assert duplicated == 0, f"requests answered twice: {[a for a, n in answered.items() if n > 1]}"
    total_of = {ask_id: (wid, total) for wid, ask_id, total in replies}
    planned = {f"{name}-{i}" for name in ("srv", *ASKERS) for i in range(ASKS)}
    asked = {p[1] for log in logs.values() for p in _lines(log) if p and p[0] == "asked"}
    assert asked == planned
    lost = planned - set(total_of)
    assert not lost, f"asks with no reply: {sorted(lost)}"
    # Each ledger added 1 per ask it answered, once: its totals are 1..n with nothing twice.
    for i in range(LEDGERS):
        wid = f"ledger-{i}"
        totals = sorted(total for w, _, total in replies if w == wid)
        assert totals == list(range(1, len(totals) + 1)), f"{wid}: {totals}"
        assert loads(published[wid]) == len(totals)
    for (wid, ask_id), (status, blob) in asks.items():
        assert status == "ok" and loads(blob) == total_of[ask_id][1] and total_of[ask_id][0] == wid
    # Every ask that returned got what its workflow replied (also when asked again after a kill).
    returned = [
        (p[1], p[2], int(p[3])) for log in logs.values() for p in _lines(log) if p and p[0] == "got"
    ]
    wrong = [(a, w, v) for a, w, v in returned if total_of[a] != (w, v)]
    assert not wrong, f"asks that returned another value than the reply: {wrong[:5]}"
    # Every published value a reader saw was committed by some step (0: the start's).
    committed = {(w, t) for w, _, t in replies} | {(f"ledger-{i}", 0) for i in range(LEDGERS)}
    seen = [(p[1], int(p[2])) for log in logs.values() for p in _lines(log) if p and p[0] == "seen"]
    assert seen and all(s in committed for s in seen), [s for s in seen if s not in committed][:5]
    figures = {
        "backend": "postgresql" if db.startswith("postgresql") else "sqlite",
        "kills": kills,
        "rounds": KILLS,
        "asks": len(planned),
        "asks_returned": len(returned),
        "published_seen": len(seen),
        "lost": len(lost),
        "duplicated": duplicated,
    }
    print("talk kill test:", json.dumps(figures))
