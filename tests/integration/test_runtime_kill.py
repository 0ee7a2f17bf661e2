"""Kill a process running a mixed workload with SIGKILL at random moments, many times; reopen
the file each time; prove every guarantee of SPEC §6 on the final state. Each kill comes once the
run has committed a number of rounds drawn at random (``killing``): always while work remains,
whatever the machine's speed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from .crash_flows import LISTENERS, expected
from .crash_worker import bells_for
from .dbconn import Connection, connect
from .killing import kill_on_progress

ROOT = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("ACTORFLOW_RUNTIME_KILLS", "15"))
WORKFLOWS = 12
ROUNDS = max(300, 20 * KILLS)  # long enough that every kill lands while work remains


def _rounds(con: Connection) -> int:
    """Rounds committed so far (0 before the first run made the table)."""
    try:
        return int(con.execute("SELECT count(*) FROM rounds").fetchone()[0])
    except Exception:  # the table is not there yet (sqlite3 and psycopg say so differently)
        return 0


def _run(db: str, acks: Path, side: Path, kill_at: int | None) -> bool:
    """Run the worker until it finishes, or SIGKILL it once ``kill_at`` rounds are committed;
    True if it was killed."""
    env = dict(os.environ, ACTORFLOW_SIDE_LOG=str(side), PYTHONPATH=str(ROOT))
    p = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.crash_worker", str(db), str(WORKFLOWS), str(ROUNDS), str(acks)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    if kill_at is None:
        try:
            _, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            raise AssertionError("the final run did not finish in 240 s:\n" + err.decode()[-3000:])
        assert p.returncode == 0, err.decode()[-3000:]
        return False
    with connect(db) as con:
        killed = kill_on_progress(p, lambda: _rounds(con), kill_at, timeout=240)
    _, err = p.communicate()
    assert killed or p.returncode == 0, f"worker failed before it was killed:\n{err.decode()[-3000:]}"
    return killed


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A SQLite file, or a schema on a PostgreSQL server that runs as in production (fsync on);
    the server stays up while the engine is killed."""
    if request.param == "sqlite":
        yield str(tmp_path / "crash.db")
        return
    server = request.getfixturevalue("pg_durable_server")
    with server.schema("kill") as url:
        schema = url.rsplit("search_path%3D", 1)[1]
        yield f"{url}&schema={schema}"


@pytest.mark.slow
@pytest.mark.timeout(900)  # many restarts, each recovering the workload: minutes on a loaded machine
def test_sigkill_at_random_points_loses_and_duplicates_nothing(tmp_path, target):
    """Acknowledged signals, steps and reducer effects are never lost or duplicated, and a step's
    reducers run in call order; children are created once and their results delivered once;
    procedures ran at least once, always under the same idempotency key; timers fired at or after
    their time; a step's outgoing signals are delivered once, and every acknowledged broadcast
    reaches its subscriber once; every workflow finishes with the result computed from its
    locals."""
    db, acks, side = target, tmp_path / "acks.txt", tmp_path / "side.txt"
    rng = random.Random(int(os.environ.get("ACTORFLOW_SEED", "7")))
    total = WORKFLOWS * ROUNDS
    killed = 0
    for k in range(KILLS):
        with connect(db) as con:
            done = _rounds(con)
        # Once at least one more round is committed, and with work left for the kills to come.
        share = max(1, (total - done) // (KILLS - k + 1))
        if not _run(db, acks, side, kill_at=done + rng.randint(1, share)):
            break  # it finished everything first: there was less left than the share
        killed += 1
    _run(db, acks, side, kill_at=None)

    con = connect(db)
    status = dict(con.execute("SELECT id, status FROM workflows WHERE type LIKE '%:mixed'").fetchall())
    assert status == {f"m{i}": "completed" for i in range(WORKFLOWS)}
    rounds = Counter(con.execute("SELECT wf, r, x FROM rounds").fetchall())
    assert all(c == 1 for c in rounds.values()), "a reducer effect was duplicated"
    want = {(f"m{i}", r, r) for i in range(WORKFLOWS) for r in range(ROUNDS)}
    assert set(rounds) == want, f"missing {sorted(want - set(rounds))[:10]}, unexpected {sorted(set(rounds) - want)[:10]}"
    acked = Counter(tuple(line.split()) for line in acks.read_text().splitlines() if line.strip())
    for (wid, k), _n in acked.items():
        assert (wid, int(k), int(k)) in rounds, f"acknowledged signal {wid} #{k} was lost"
    import persistence

    for i in range(WORKFLOWS):
        blob = con.execute("SELECT result FROM workflows WHERE id = ?", (f"m{i}",)).fetchone()[0]
        assert persistence.loads(blob) == expected(i, ROUNDS), f"m{i}"
    kids = Counter(con.execute("SELECT wf FROM kids").fetchall())
    assert all(c == 1 for c in kids.values()), "a child ran its reducer twice"
    n_kids = con.execute("SELECT count(*) FROM workflows WHERE parent_id IS NOT NULL").fetchone()[0]
    assert n_kids == WORKFLOWS * len(range(0, ROUNDS, 3)), "children created more or less than once"
    keys: dict[tuple[str, str], set[str]] = {}
    for line in side.read_text().splitlines():
        i, r, key = line.split()
        keys.setdefault((i, r), set()).add(key)
    assert set(keys) == {(str(i), str(r)) for i in range(WORKFLOWS) for r in range(ROUNDS)}
    unstable = {k: v for k, v in keys.items() if len(v) != 1}
    assert not unstable, f"a procedure ran again under another idempotency key: {list(unstable.items())[:3]}"
    orders: dict[tuple[str, int], list[str]] = {}
    for wf, r, tag in con.execute("SELECT wf, r, tag FROM orders ORDER BY id").fetchall():
        orders.setdefault((wf, r), []).append(tag)
    assert len(orders) == WORKFLOWS * ROUNDS
    assert {",".join(tags) for tags in orders.values()} == {"first,second"}, "a step's reducers ran out of order or twice"
    lates = con.execute("SELECT count(*), min(late) FROM lates").fetchone()
    assert lates[0] == WORKFLOWS * ROUNDS and lates[1] >= 0, f"a timer fired before its time: {lates}"
    # Subscriptions, broadcasts and sends: each listener subscribed in its first step; every note a
    # mixed workflow's step sent, and every broadcast, was consumed once; a listener's result (a
    # count kept in its locals) agrees with what its reducers wrote.
    listeners = dict(con.execute("SELECT id, status FROM workflows WHERE type LIKE '%:listener'").fetchall())
    assert listeners == {f"l{g}": "completed" for g in range(LISTENERS)}
    notes = Counter(con.execute("SELECT a, b FROM heard WHERE kind = 'note'").fetchall())
    assert all(c == 1 for c in notes.values()), "a sent signal was consumed twice"
    assert set(notes) == {(i, r) for i in range(WORKFLOWS) for r in range(ROUNDS)}, "a sent signal was lost"
    assert all(wf == f"l{a % LISTENERS}" for wf, a in con.execute("SELECT wf, a FROM heard WHERE kind = 'note'"))
    bells = Counter(con.execute("SELECT a, b FROM heard WHERE kind = 'bell'").fetchall())
    assert all(c == 1 for c in bells.values()), "a broadcast was consumed twice"
    assert set(bells) == {(g, k) for g in range(LISTENERS) for k in range(bells_for(ROUNDS))}
    bell_acks = {tuple(map(int, line.split())) for line in Path(f"{acks}.bells").read_text().splitlines() if line.strip()}
    assert bell_acks <= set(bells), "an acknowledged broadcast was lost"
    for g in range(LISTENERS):
        blob = con.execute("SELECT result FROM workflows WHERE id = ?", (f"l{g}",)).fetchone()[0]
        n = con.execute("SELECT count(*) FROM heard WHERE wf = ?", (f"l{g}",)).fetchone()[0]
        assert persistence.loads(blob) == n, f"l{g}: its count and its reducers' rows disagree"
    assert con.execute("SELECT count(*) FROM inbox").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM timers").fetchone()[0] == 0
    # Each workflow's row describes its newest steps once each, in order, up to its last, and the
    # history table every step before them: its whole history, each step once (a step run again
    # after a kill left no line of its uncommitted run).
    for wid, last, text in con.execute("SELECT id, step_seq, recent_steps FROM workflows").fetchall():
        steps = [json.loads(line)[2]["step"] for line in text.split("\n")]
        assert steps == list(range(last - len(steps) + 1, last + 1)), f"{wid}: steps {steps}, last {last}"
        assert min(last, persistence.RECENT_STEPS) <= len(steps) <= 2 * persistence.RECENT_STEPS, wid
        older = [json.loads(d).get("step") for (d,) in con.execute(
            "SELECT detail FROM history WHERE workflow_id = ? ORDER BY seq", (wid,)).fetchall()]
        older = [s for s in older if s is not None and s < steps[0]]
        assert older == list(range(1, steps[0])), f"{wid}: the table keeps steps {older[:5]}..., the row from {steps[0]}"
    con.close()
    print(f"kills: {killed}")
    assert killed >= 1, "no kill landed: the workload finished before its first round was committed"
