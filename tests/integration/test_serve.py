"""``system.serve()`` in a node process: SIGTERM ends it with a clean shutdown, so the node hands
its shards off (it shows as ``left``, never ``dead``) and its workflows go on at once on the
others, without waiting for a takeover; a node killed alone shows as ``stale``, not ``up``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from actors import ActorSystem
from actors import cli as wf_cli

from .ops_flows import gate

ROOT = Path(__file__).resolve().parents[2]
T = 60.0


def _node(url: str, name: str, tmp: Path, ttl: float) -> tuple[subprocess.Popen[bytes], Path]:
    ready = tmp / f"{name}.ready"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.serve_node", url, name, str(ready), str(ttl)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / f"{name}.err", "wb"),
    )
    deadline = time.monotonic() + T
    while not ready.exists():
        assert proc.poll() is None, (tmp / f"{name}.err").read_text()
        assert time.monotonic() < deadline, f"node {name} did not open within {T}s"
        time.sleep(0.05)
    return proc, ready


def _wait(cond, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + T
    while not cond():
        assert time.monotonic() < deadline, f"{what} did not happen within {T}s"
        time.sleep(0.05)


def _states(url: str, capsys) -> dict[str, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    assert wf_cli.main(["nodes", "--db", url, "--json"]) == 0
    return {n["node_id"]: n["state"] for n in json.loads(capsys.readouterr().out)}


def test_sigterm_hands_the_shards_off_and_the_workflows_go_on_without_a_takeover(
    pg_store_url: str, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    # A long ttl: a takeover (of a node found dead) would only come after it, long after a handoff.
    ttl = 30.0
    with ActorSystem(pg_store_url, node_id="keeper", node_ttl=ttl) as keeper:
        proc, _ = _node(pg_store_url, "leaver", tmp_path, ttl)
        try:
            _wait(
                lambda: (
                    {n.node_id: n.shards > 0 for n in keeper.nodes()}
                    == {"keeper": True, "leaver": True}
                ),
                "the leaver's share",
            )
            # Workflows whose shards the leaver leases: they start, and wait, there.
            ids = [w for w in (f"gate-{i}" for i in range(400)) if not keeper._rt.owns(w)][:12]
            refs = [keeper.start(gate, w, id=w) for w in ids]
            _wait(
                lambda: all("signal 'go'" in (r.info().waiting_on or "") for r in refs),
                "the first steps",
            )
            assert _states(pg_store_url, capsys) == {"keeper": "up", "leaver": "up"}
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(T) == 0, (tmp_path / "leaver.err").read_text()
            _wait(
                lambda: (
                    [n.node_id for n in keeper.nodes()] == ["keeper"]
                    and keeper.nodes()[0].shards == 256
                ),
                "the handoff",
            )
            moved = time.monotonic() - sent
            for r in refs:
                r.signal("go", 1)
            assert [r.result(timeout=T) for r in refs] == [f"{w}:1" for w in ids]
            assert moved < ttl / 2  # a handoff, not a takeover after the ttl
            assert _states(pg_store_url, capsys) == {"keeper": "up", "leaver": "left"}
            err = (tmp_path / "leaver.err").read_text()
            assert "system_stop_signal" in err and "SIGTERM" in err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(T)


def test_a_node_killed_alone_shows_stale_once_its_heartbeat_is_older_than_its_lease(
    pg_store_url: str, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    ttl = 1.0
    proc, _ = _node(pg_store_url, "lone", tmp_path, ttl)
    try:
        assert _states(pg_store_url, capsys) == {"lone": "up"}
    finally:
        proc.kill()
        proc.wait(T)
    # No node is left to declare it dead: its row stays 'up', and its heartbeat ages.
    _wait(lambda: _states(pg_store_url, capsys) == {"lone": "stale"}, "the stale state")
    capsys.readouterr()
    assert wf_cli.main(["nodes", "--db", pg_store_url]) == 0
    assert "stale" in capsys.readouterr().out


def test_sigterm_and_sigint_shut_a_sqlite_system_down_cleanly(tmp_path: Path) -> None:
    """Either signal ends ``serve()`` with a clean shutdown: the process exits 0 and the file is
    free for the next system, which finds the workflow where it was."""
    db = str(tmp_path / "wf.db")
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc, ready = _node(db, "solo", tmp_path, 10.0)
        try:
            proc.send_signal(sig)
            assert proc.wait(T) == 0, (tmp_path / "solo.err").read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(T)
        assert "system_shutdown" in (tmp_path / "solo.err").read_text()
        ready.unlink()
    with ActorSystem(db) as system:
        ref = system.start(gate, "g", id="g")
        ref.signal("go", 2)
        assert ref.result(timeout=T) == "g:2"
