"""Three node processes on one PostgreSQL database, killed, frozen and cut off at random while a
driver sends them signals, starts, cancels and broadcasts, and plays the demo world's market
(auctions, bids, trades, buffs: ``cluster_world``); then every guarantee of SPEC §6 and the demo
world's money invariant are checked on the final state, across the nodes.

Every 1-3 s the driver SIGKILLs a random node that is up. The killed node's successor starts at
once on standby (its interpreter starting) and opens its system once the killed node's workflows
made progress on a survivor (that delay is the failover time); the next kill does not wait for it
to be up again, it picks among the nodes that are. Every 3-7 kills it also freezes one (SIGSTOP)
past the heartbeat ttl and wakes it up again (a zombie, which the fence must stop), and
terminates a live node's control session on the server (the node, declared dead, must fence
itself and rejoin). A node is killed or frozen only while another one is up. The driver sends each
request to a random live node and records what was acknowledged.

``ACTORFLOW_CLUSTER_KILLS`` sets the number of kills (20 by default; the soak in
``benchmarks/cluster_soak.py`` runs this test with 1,000 and more).
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import persistence

from .cluster_flows import expected
from .cluster_world import World
from .crash_flows import LISTENERS
from .crash_worker import TABLES, delivered_bells, delivered_ticks
from .dbconn import Connection, connect

ROOT = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("ACTORFLOW_CLUSTER_KILLS", "20"))
# A soak's wall-clock limit (epoch seconds): no kill is begun after it (the count says how many ran).
STOP_BY = float(os.environ.get("ACTORFLOW_CLUSTER_STOP_BY", "inf"))
WORKERS = 9
WAITERS = 6
TTL = 2.0  # a node frozen for longer is declared dead
FREEZE = TTL + 4.0  # past the ttl, and past the server's idle_in_transaction_session_timeout
NAMES = ("n1", "n2", "n3")


class Node:
    """A node process and the driver's connection to it."""

    def __init__(self, name: str, url: str, tmp: Path) -> None:
        self.name, self.url, self.tmp = name, url, tmp
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.reader: Any = None
        self.log = tmp / f"{name}.log"
        self.portfile = tmp / f"{name}.port"
        self.gofile = tmp / f"{name}.go"
        self.frozen = False
        self.started = 0.0
        self.starting = False

    def start(self, *, standby: bool = False) -> None:
        """Starts the process; ``connect()`` tells when it is up (the driver goes on meanwhile).
        ``standby``: it opens no system until ``release()`` (its interpreter starts meanwhile)."""
        self.portfile.unlink(missing_ok=True)
        self.gofile.unlink(missing_ok=True)
        env = dict(os.environ, ACTORFLOW_SIDE_LOG=str(self.tmp / "side.txt"), PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.cluster_node", self.url, self.name,
             str(self.portfile), str(self.log), str(TTL), str(self.gofile)],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(self.tmp / f"{self.name}.err", "ab"),
        )
        self.starting = True
        if not standby:
            self.release()

    def release(self) -> None:
        """Lets a node started on standby open its system."""
        self.gofile.touch()
        self.started = time.monotonic()

    def connect(self) -> bool:
        """Whether the driver is connected to the node, connecting once it has written its port."""
        if self.sock is not None:
            return True
        if self.proc is None or self.frozen:
            return False
        if (self.starting and self.proc.poll() is not None) or (
                not self.portfile.exists() and self.gofile.exists() and time.monotonic() > self.started + 60):
            raise AssertionError(f"node {self.name} did not start:\n"
                                 + (self.tmp / f"{self.name}.err").read_text()[-3000:])
        if self.proc.poll() is not None or not self.portfile.exists():
            return False  # killed and not restarted yet, on standby, or still starting
        self.sock = socket.create_connection(("127.0.0.1", int(self.portfile.read_text())), timeout=30)
        self.reader = self.sock.makefile("rb")
        self.starting = False
        return True

    def wait_up(self) -> None:
        while not self.connect():
            time.sleep(0.02)

    @property
    def up(self) -> bool:
        """Running, not frozen, and connected to the driver."""
        return self.proc is not None and self.proc.poll() is None and not self.frozen and self.sock is not None

    def call(self, req: dict[str, Any]) -> dict[str, Any] | None:
        """The node's answer, or None if it gave none (killed, or its connection broke)."""
        if self.sock is None:
            return None
        try:
            self.sock.sendall((json.dumps(req) + "\n").encode())
            line = self.reader.readline()
        except OSError:
            line = b""
        if not line:
            self._disconnect()
            return None
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _disconnect(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = self.reader = None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._disconnect()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if self.frozen:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._disconnect()


def _fenced_lines(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "step_fenced" in line] if log.exists() else []


def _victims(con: Connection, schema: str, node: str) -> dict[str, int]:
    """Running workers of the shards ``node`` leases now, with their step counts."""
    rows = con.execute(
        f"SELECT w.id, w.step_seq FROM {schema}.workflows w JOIN {schema}.af_shards s ON s.shard = w.shard "
        f"JOIN {schema}.af_nodes n ON n.incarnation = s.owner WHERE n.node_id = ? AND w.status = 'running' "
        f"AND w.type LIKE '%:worker'", (node,),
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


def _progressed(con: Connection, schema: str, before: dict[str, int]) -> bool:
    rows = con.execute(f"SELECT id, step_seq, status FROM {schema}.workflows WHERE id = ANY(?)",
                       (list(before),)).fetchall()
    return any(int(seq) > before[wid] or status != "running" for wid, seq, status in rows)


@pytest.mark.slow
def test_nodes_killed_frozen_and_cut_off_lose_and_duplicate_nothing(tmp_path: Path, pg_durable_server: Any) -> None:
    rng = random.Random(int(os.environ.get("ACTORFLOW_SEED", "11")))
    with pg_durable_server.schema("cluster") as base:
        schema = base.rsplit("search_path%3D", 1)[1]
        db = f"{base}&schema={schema}"
        nodes = {n: Node(n, db, tmp_path) for n in NAMES}
        try:
            for node in nodes.values():
                node.start()
                node.wait_up()
            with connect(db) as con:  # (once the first node made the schema actorflow's)
                for sql in (*TABLES["postgres"], "CREATE TABLE IF NOT EXISTS cancels (wf text)"):
                    con.execute(sql)
            figures = _drive(db, schema, nodes, rng, tmp_path)
        finally:
            for node in nodes.values():
                node.stop()
        _audit(db, schema, tmp_path, figures)


def _live(nodes: dict[str, Node], rng: random.Random) -> Node:
    deadline = time.monotonic() + 60
    while not (up := [n for n in nodes.values() if n.up]):  # (the driver always leaves one up)
        assert time.monotonic() < deadline, "no node was up for 60 s"
        for node in nodes.values():
            node.connect()
        time.sleep(0.05)
    return rng.choice(up)


def _send(nodes: dict[str, Node], rng: random.Random, req: dict[str, Any]) -> dict[str, Any] | None:
    reply = _live(nodes, rng).call(req)
    return reply if reply is not None and reply["ok"] else None


def _drive(db: str, schema: str, nodes: dict[str, Node], rng: random.Random, tmp: Path) -> dict[str, Any]:
    acks, bell_acks = open(tmp / "acks.txt", "a"), open(tmp / "bells.txt", "a")
    workers = [f"w{i}" for i in range(WORKERS)]
    waiters = [f"c{i}" for i in range(WAITERS)]
    call = lambda req: _live(nodes, rng).call(req)  # noqa: E731
    reads = connect(db)  # the driver's own reads, on one connection
    world = World(rng)
    with connect(db) as con:
        world.setup(call, lambda sql, *p: con.execute(sql, p).fetchall(), schema)
    for wid, wf, args in ([(f"l{g}", "listener", [g]) for g in range(LISTENERS)]
                          + [(w, "worker", [i]) for i, w in enumerate(workers)]
                          + [(c, "waiter", []) for c in waiters]):
        while _send(nodes, rng, {"op": "start", "wf": wf, "args": args, "id": wid}) is None:
            time.sleep(0.1)  # a start is idempotent: an id that exists starts nothing
    sent = {w: 0 for w in workers}
    bells = [0] * LISTENERS
    unsure_w: set[str] = set()
    unsure_b: set[int] = set()
    cancelled: list[str] = []
    kills = zombies = cutoffs = 0
    failover: list[float] = []
    killed: list[tuple[Node, float, dict[str, int]]] = []  # SIGKILLed, waiting for their failover
    frozen: tuple[Node, float] | None = None
    woke: tuple[Node, int, float] | None = None  # a zombie just woken, its refusals before, when to look
    started = time.monotonic()
    next_kill = started + rng.uniform(1, 3)
    freeze_at = rng.randint(2, 6)  # the kill count after which the next freeze, and cut-off, come
    cutoff_at = rng.randint(2, 6)
    zombie_fenced = False  # a zombie's step was refused after it woke up
    wanted = KILLS
    while kills < wanted or killed or frozen is not None or woke is not None or (not zombie_fenced and zombies < 8):
        assert time.monotonic() - started < 60 + 12 * KILLS, "the driver ran out of time"
        if kills < wanted and time.time() >= STOP_BY:
            wanted = kills
            print(f"soak: stopped at {kills} kills by its time limit", flush=True)
        for node in nodes.values():
            node.connect()  # a restarted node is up once it has written its port
        for w in rng.sample(workers, len(workers)):
            if w in unsure_w:
                sent[w] = delivered_ticks(db, w)
                unsure_w.discard(w)
            if _send(nodes, rng, {"op": "signal", "id": w, "name": "tick", "payload": sent[w]}) is None:
                unsure_w.add(w)  # not acknowledged: what the database holds says whether it went in
                continue
            acks.write(f"{w} {sent[w]}\n")
            acks.flush()
            sent[w] += 1
        g = rng.randrange(LISTENERS)
        if g in unsure_b:
            bells[g] = delivered_bells(db, g)
            unsure_b.discard(g)
        reply = _send(nodes, rng, {"op": "broadcast", "name": "bell", "filter": g, "payload": bells[g]})
        if reply is None:
            unsure_b.add(g)
        else:
            assert reply["value"] == 1, f"listener l{g} is not subscribed"
            bell_acks.write(f"{g} {bells[g]}\n")
            bell_acks.flush()
            bells[g] += 1
        world.step(call, lambda ids: _finished(reads, schema, ids))
        if len(cancelled) < WAITERS and kills >= (len(cancelled) + 1) * wanted / (WAITERS + 1):
            c = waiters[len(cancelled)]
            if _send(nodes, rng, {"op": "cancel", "id": c, "reason": "driver"}) is not None:
                cancelled.append(c)
        now = time.monotonic()
        # A killed node's successor starts at once on standby and opens its system once the
        # killed node's workflows made progress on a survivor (that delay is the failover time);
        # the next kill does not wait for it to be up again.
        for entry in list(killed):
            node, t0, victims = entry
            if not victims or _progressed(reads, schema, victims) or now - t0 > 15:
                if victims:
                    failover.append(now - t0)
                node.release()
                killed.remove(entry)
        if frozen is not None and now >= frozen[1]:
            frozen[0].proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
            frozen[0].frozen = False
            woke = (frozen[0], len(_fenced_lines(frozen[0].log)), now + 3.0)
            frozen = None
        if woke is not None and now >= woke[2]:
            zombie_fenced = zombie_fenced or len(_fenced_lines(woke[0].log)) > woke[1]
            woke = None
        # Faults only among the nodes that are up, and never the last of them: a node frozen or
        # killed always leaves one running. A woken zombie is left alone while its fence is watched.
        up = [n for n in nodes.values() if n.up and (woke is None or n is not woke[0])]
        if now >= next_kill and kills < wanted and len(up) >= 2:
            node = rng.choice(up)
            victims = _victims(reads, schema, node.name)
            node.kill()
            killed.append((node, time.monotonic(), victims))
            node.start(standby=True)
            kills += 1
            if kills % 50 == 0:
                print(f"soak: {kills} kills, {zombies} zombies, {cutoffs} cut off, {time.monotonic() - started:.0f} s",
                      flush=True)
            next_kill = time.monotonic() + rng.uniform(1, 3)
            up.remove(node)
        if frozen is None and woke is None and len(up) >= 2 and (
                (freeze_at <= kills < wanted) or (kills >= wanted and not zombie_fenced)):
            node = rng.choice(up)
            node.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
            node.frozen = True
            frozen = (node, now + FREEZE)
            zombies += 1
            freeze_at = kills + rng.randint(3, 7)
            up.remove(node)
        if cutoff_at <= kills < wanted and up:
            node = rng.choice(up)
            with connect(db) as con:
                con.execute(
                    f"SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN {schema}.af_nodes n "
                    f"ON ((l.classid::bigint << 32) | l.objid::bigint) = n.lock_key "
                    f"WHERE l.locktype = 'advisory' AND l.granted AND n.node_id = ?", (node.name,))
            cutoffs += 1
            cutoff_at = kills + rng.randint(3, 7)
    for node in nodes.values():
        node.wait_up()
    for c in waiters[len(cancelled):]:
        while _send(nodes, rng, {"op": "cancel", "id": c, "reason": "driver"}) is None:
            time.sleep(0.1)
        cancelled.append(c)
    world.finish(call)
    # Stop everything: the workers once every tick is durable, then, once the workers have ended
    # (and so sent every note), the listeners.
    for group, kind in ((workers, "worker"), ([f"l{g}" for g in range(LISTENERS)], "listener")):
        for wid in group:
            while True:
                reply = _live(nodes, rng).call({"op": "signal", "id": wid, "name": "stop"})
                if reply is not None and (reply["ok"] or "WorkflowNotRunning" in reply["error"]):
                    break
                time.sleep(0.1)
        _settle(db, schema, f"type LIKE '%:{kind}'")
    _settle(db, schema, "true")
    acks.close()
    bell_acks.close()
    reads.close()
    return {"kills": kills, "zombies": zombies, "cutoffs": cutoffs, "failover": failover, "zombie_fenced": zombie_fenced,
            "cancelled": cancelled, "seconds": time.monotonic() - started, "world": world}


def _settle(db: str, schema: str, which: str) -> None:
    """Waits until the workflows ``which`` selects have ended and no wake-up is left."""
    deadline = time.monotonic() + 180
    while True:
        with connect(db) as con:
            running = con.execute(f"SELECT count(*) FROM {schema}.workflows WHERE status = 'running' AND {which}"
                                  ).fetchone()[0]
            wakeups = con.execute(f"SELECT count(*) FROM {schema}.af_wakeups").fetchone()[0]
        if running == 0 and wakeups == 0:
            return
        if time.monotonic() >= deadline:
            with connect(db) as con:
                detail = _stuck(con, schema, which)
            raise AssertionError(f"{running} workflows ({which}) still running and {wakeups} wake-ups left "
                                 f"180 s after the driver stopped\n{detail}")
        time.sleep(0.1)


def _stuck(con: Connection, schema: str, which: str) -> str:
    """What the database says of workflows that did not end: their rows, what they wait on, what is
    queued for them, their shard's lease and the nodes; what a soak needs to find the cause."""
    out = []
    rows = con.execute(f"SELECT id, type, shard, waiting_on, step_seq, fresh, updated_at, recent_steps "
                       f"FROM {schema}.workflows WHERE status = 'running' AND {which} ORDER BY id LIMIT 10"
                       ).fetchall()
    for wid, kind, shard, waiting, seq, fresh, updated, recent in rows:
        out.append(f"- {wid} ({kind}) shard {shard} step {seq} fresh={fresh} waiting on {waiting!r} "
                   f"updated {time.time() - updated:.0f} s ago; last steps: "
                   f"{(recent or '').splitlines()[-4:]}")
        for table, cols in (("inbox", "seq, kind, name"), ("waits", "name"), ("timers", "name, due_at"),
                            ("procedures", "key, status, attempts, next_attempt_at, error"),
                            ("af_wakeups", "id, shard")):
            found = con.execute(f"SELECT {cols} FROM {schema}.{table} WHERE workflow_id = ?", (wid,)).fetchall()
            if found:
                out.append(f"    {table}: {found}")
        events = con.execute(f"SELECT at, event, detail FROM {schema}.history WHERE workflow_id = ? "
                             f"ORDER BY seq DESC LIMIT 12", (wid,)).fetchall()
        out.append(f"    history (newest first): {events}")
        out.append(f"    lease: {con.execute(f'SELECT owner, epoch, since FROM {schema}.af_shards WHERE shard = ?', (shard,)).fetchall()}")
    out.append(f"nodes: {con.execute(f'SELECT node_id, incarnation, state, heartbeat_at, pid FROM {schema}.af_nodes').fetchall()}")
    return "\n".join(out)


def _finished(con: Connection, schema: str, ids: list[str]) -> dict[str, Any]:
    """The results of the workflows among ``ids`` that ended (their status, if not completed)."""
    rows = con.execute(f"SELECT id, status, result FROM {schema}.workflows WHERE id = ANY(?) AND status <> 'running'",
                       (ids,)).fetchall()
    return {wid: persistence.loads(bytes(r)) if status == "completed" else status for wid, status, r in rows}


def _audit(db: str, schema: str, tmp: Path, figures: dict[str, Any]) -> None:
    con = connect(db)
    q = lambda sql, *p: con.execute(sql, p).fetchall()  # noqa: E731
    status = dict(q(f"SELECT id, status FROM {schema}.workflows WHERE type LIKE '%:worker'"))
    assert status == {f"w{i}": "completed" for i in range(WORKERS)}
    rounds = Counter(q("SELECT wf, r, x FROM rounds"))
    assert all(c == 1 for c in rounds.values()), "a reducer effect was duplicated"
    taken = {f"w{i}": sum(1 for (wf, _r, _x) in rounds if wf == f"w{i}") for i in range(WORKERS)}
    want = {(w, r, r) for w, n in taken.items() for r in range(n)}
    assert set(rounds) == want, "a tick was consumed out of order, twice, or lost"
    acked = [tuple(line.split()) for line in (tmp / "acks.txt").read_text().splitlines() if line.strip()]
    for wid, k in acked:
        assert int(k) < taken[wid], f"acknowledged signal {wid} #{k} was lost"
    for i in range(WORKERS):
        blob = q(f"SELECT result FROM {schema}.workflows WHERE id = ?", f"w{i}")[0][0]
        assert persistence.loads(bytes(blob)) == expected(i, taken[f"w{i}"]), f"w{i}"
    kids = Counter(q("SELECT wf FROM kids"))
    assert all(c == 1 for c in kids.values()), "a child ran its reducer twice"
    n_kids = q(f"SELECT count(*) FROM {schema}.workflows WHERE parent_id IS NOT NULL")[0][0]
    assert n_kids == sum(len(range(0, n, 3)) for n in taken.values()), "children created more or less than once"
    assert len(kids) == n_kids, "a child's result was not delivered, or delivered twice"
    keys: dict[tuple[str, str], set[str]] = {}
    for line in (tmp / "side.txt").read_text().splitlines():
        i, r, key = line.split()
        keys.setdefault((i, r), set()).add(key)
    assert set(keys) == {(str(i), str(r)) for i in range(WORKERS) for r in range(taken[f"w{i}"])}
    assert all(len(v) == 1 for v in keys.values()), "a procedure ran again under another idempotency key"
    orders: dict[tuple[str, int], list[str]] = {}
    for wf, r, tag in q("SELECT wf, r, tag FROM orders ORDER BY id"):
        orders.setdefault((wf, r), []).append(tag)
    assert {",".join(t) for t in orders.values()} == {"first,second"}, "a step's reducers ran out of order or twice"
    lates = q("SELECT count(*), min(late) FROM lates")[0]
    assert lates[0] == sum(taken.values()) and lates[1] >= 0, f"a timer fired before its time: {lates}"
    notes = Counter(q("SELECT a, b FROM heard WHERE kind = 'note'"))
    assert all(c == 1 for c in notes.values()), "a sent signal was consumed twice"
    assert set(notes) == {(i, r) for i in range(WORKERS) for r in range(taken[f"w{i}"])}, "a sent signal was lost"
    bells = Counter(q("SELECT a, b FROM heard WHERE kind = 'bell'"))
    assert all(c == 1 for c in bells.values()), "a broadcast was consumed twice"
    bell_acks = {tuple(map(int, line.split())) for line in (tmp / "bells.txt").read_text().splitlines() if line.strip()}
    assert bell_acks <= set(bells), "an acknowledged broadcast was lost"
    cancels = Counter(r[0] for r in q("SELECT wf FROM cancels"))
    assert cancels == Counter(figures["cancelled"]), "a cancel was lost or carried out twice"
    assert all(s == "cancelled" for (s,) in q(f"SELECT status FROM {schema}.workflows WHERE type LIKE '%:waiter'"))
    for table in ("inbox", "timers", "af_wakeups"):
        assert q(f"SELECT count(*) FROM {schema}.{table}")[0][0] == 0, f"rows left in {table}"
    world = figures["world"].audit(q, schema)
    con.close()
    logs = "".join(p.read_text() for p in tmp.glob("n*.log"))
    fenced = logs.count("step_fenced")
    in_database = logs.count("no longer leased")
    failover = figures["failover"]
    print(f"\nkills {figures['kills']}, zombies {figures['zombies']}, sessions terminated {figures['cutoffs']}, "
          f"steps fenced {fenced} ({in_database} by the database's fence), ticks {sum(taken.values())}, "
          f"{world['auctions']} auctions ({world['bids']} bids), {world['trades']} trades, {world['buffs']} buffs, "
          f"{figures['seconds']:.0f} s; failover s: median {statistics.median(failover) if failover else 0:.2f}, "
          f"max {max(failover, default=0):.2f} over {len(failover)}")
    assert figures["kills"] == KILLS or (figures["kills"] > 0 and time.time() >= STOP_BY)
    assert figures["zombie_fenced"], f"no step of a zombie was refused by the fence ({figures['zombies']} zombies)"
