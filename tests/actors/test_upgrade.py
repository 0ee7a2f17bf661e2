"""A running workflow whose code changed, in a system: moved onto the new code when that is safe
(logged, in its history, stored at once), held with the reason when not, moved by an upgrade
function; ``wf upgrade --dry-run`` says which, without changing the database. Both backends."""

from __future__ import annotations

import json
import warnings

import pytest
from structlog.testing import capture_logs

from actors import ActorSystem, Status
from actors.cli import main
from actors.testing import VirtualClock
from persistence import open_store
from workflows import CompileWarning
from workflows._compiler import compile_workflow_source

T = 10
KEY = "upgrade_runtime_test:patrol"
V1 = '''
async def patrol(name):
    laps = 0
    while True:
        await timer("walk", after=5)
        laps += 1
        if laps >= 4:
            return {"laps": laps, "name": name}
'''
V2 = V1.replace("after=5", "after=2").replace('"name": name}', '"name": name, "v": 2}')
RENAMED = V1.replace("laps", "rounds")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_store_url"))
    return str(tmp_path / "up.db")


def _load(src: str, key: str = KEY):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CompileWarning)
        return compile_workflow_source(src, "patrol_under_test.py", key)


def _stored(db: str, wid: str):
    store = open_store(db, owner=False)
    try:
        rec = store.load_workflow(wid)
        history = [(h.event, json.loads(h.detail)) for h in store.history(wid)]
        return rec, history
    finally:
        store.close()


def _dry_run(capsys, db: str, *more: str) -> tuple[int, str]:
    code = main(["upgrade", "--dry-run", "--db", db, *more])
    out, err = capsys.readouterr()
    return code, out + err


def _run_first_lap(db: str, clock: VirtualClock) -> str:
    old = _load(V1)
    with ActorSystem(db, clock=clock) as system:
        system.start(old, "north", id="p1")
        system.idle(timeout=T)
        clock.advance(5)
        system.idle(timeout=T)
    return old.fingerprint


def test_a_safe_change_moves_the_patrol_onto_the_new_code(db, capsys):
    clock = VirtualClock()
    old_fp = _run_first_lap(db, clock)
    new = _load(V2)  # the deploy: the wait changed, and the result
    before, _ = _stored(db, "p1")

    code, out = _dry_run(capsys, db)
    assert code == 0
    assert f"would move (automatic): p1 (patrol) {old_fp[:12]} -> {new.fingerprint[:12]}" in out
    assert "at await timer 'walk' #1 (line 5): automatic" in out
    assert "1 would move, 0 would stay held, 0 run the loaded code already" in out
    after, _ = _stored(db, "p1")
    assert after.continuation == before.continuation and after.step_seq == before.step_seq

    with capture_logs() as logs, ActorSystem(db, clock=clock) as system:
        ref = system.get("p1")
        system.idle(timeout=T)
        clock.advance(5)  # the timer armed by the old code (after=5) fires
        system.idle(timeout=T)
        for _ in range(2):  # the new code's waits: after=2
            clock.advance(2)
            system.idle(timeout=T)
        assert ref.result(timeout=T) == {"laps": 4, "name": "north", "v": 2}
    upgraded = [e for e in logs if e["event"] == "workflow_upgraded"]
    assert len(upgraded) == 1
    assert upgraded[0]["old_fingerprint"] == old_fp and upgraded[0]["new_fingerprint"] == new.fingerprint
    assert upgraded[0]["point"] == "timer 'walk' #1" and upgraded[0]["how"] == "automatic"
    assert not [e for e in logs if e["log_level"] == "error"]
    rec, history = _stored(db, "p1")
    assert rec.status == "completed"
    events = [e for e, _ in history]
    assert events.count("upgraded") == 1
    detail = dict(history)["upgraded"]
    assert detail["old_fingerprint"] == old_fp and detail["new_fingerprint"] == new.fingerprint
    assert detail["frames"][0]["point"] == "timer 'walk' #1"


def test_an_unsafe_change_is_held_saying_why_until_an_upgrade_function_moves_it(db, capsys):
    clock = VirtualClock()
    old_fp = _run_first_lap(db, clock)
    renamed = _load(RENAMED)  # laps renamed: it is live at the await
    before, _ = _stored(db, "p1")

    code, out = _dry_run(capsys, db)
    assert "held: p1 (patrol)" in out
    assert "local rounds is live there in the new code but was not in the old (live in the old code: laps)" in out
    assert "0 would move, 1 would stay held" in out

    with capture_logs() as logs, ActorSystem(db, clock=clock) as system:
        ref = system.get("p1")
        clock.advance(5)
        system.idle(timeout=T)
        assert ref.status() is Status.RUNNING
        info = ref.info()
        assert info.waiting_on.startswith("BLOCKED (")
        assert "local rounds is live there in the new code" in info.waiting_on
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["workflow_version_mismatch"]
    rec, history = _stored(db, "p1")
    assert rec.continuation == before.continuation and rec.fingerprint == old_fp  # as it was
    assert [e for e, _ in history].count("version_mismatch") == 1

    @renamed.upgrade(from_version=old_fp[:10])
    def from_v1(point, old):
        assert point == "timer 'walk' #1"
        return point, {"name": old["name"], "rounds": old["laps"]}

    code, out = _dry_run(capsys, db)
    assert "would move (explicit): p1 (patrol)" in out
    with capture_logs() as logs, ActorSystem(db, clock=clock) as system:
        ref = system.get("p1")
        system.idle(timeout=T)
        for _ in range(3):
            clock.advance(5)
            system.idle(timeout=T)
        assert ref.result(timeout=T) == {"rounds": 4, "name": "north"}
    assert [e["how"] for e in logs if e["event"] == "workflow_upgraded"] == ["explicit"]
    _, history = _stored(db, "p1")
    assert [e for e, _ in history].count("upgraded") == 1


def test_wf_upgrade_without_dry_run_says_when_upgrades_happen(tmp_path, capsys):
    db = str(tmp_path / "x.db")
    with ActorSystem(db, clock=VirtualClock()):
        pass
    code = main(["upgrade", "--db", db])
    _, err = capsys.readouterr()
    assert code == 1
    assert "give --dry-run" in err and "when a system with that code loads it" in err


def test_dry_run_reports_workflows_whose_code_is_missing(tmp_path, capsys):
    db = str(tmp_path / "m.db")
    wf = _load(V1, "upgrade_runtime_missing_module:patrol")
    with ActorSystem(db, clock=VirtualClock()) as system:
        system.start(wf, "n", id="m1")
        system.idle(timeout=T)
    from workflows._registry import _REGISTRY  # noqa: PLC0415

    _REGISTRY.get("workflow", {}).pop("upgrade_runtime_missing_module:patrol", None)
    code, out = _dry_run(capsys, db, "--json")
    rows = json.loads(out[: out.rindex("}") + 1])["workflows"]
    assert [(r["id"], r["outcome"]) for r in rows] == [("m1", "unknown")]
    assert "cannot be found" in rows[0]["reasons"][0]


FAMILY_V1 = '''
@workflow
async def kid(n):
    await signal("go")
    return n * 2

@workflow
async def leg(stop):
    await timer("leg", after=5)
    return stop

async def boss(name):
    b = await spawn(kid, 3, id="kid-1")
    a = await leg("a")
    return [a, b]
'''
FAMILY_V2 = (FAMILY_V1.replace("return n * 2", "return n * 3")
             .replace("after=5", "after=2").replace("return [a, b]", "return {'a': a, 'b': b}"))


def _family(src: str):
    import workflows

    g = {n: getattr(workflows, n) for n in workflows.__all__}
    g["__name__"] = "upgrade_family"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CompileWarning)
        return compile_workflow_source(src, "family.py", "boss", g)


def test_a_parent_and_its_child_each_move_when_they_are_loaded(db):
    clock = VirtualClock()
    boss = _family(FAMILY_V1)
    with ActorSystem(db, clock=clock) as system:
        system.start(boss, "x", id="boss-1")
        system.idle(timeout=T)
        assert system.get("kid-1").status() is Status.RUNNING
    _family(FAMILY_V2)  # the deploy: the child, the helper and the parent changed
    with capture_logs() as logs, ActorSystem(db, clock=clock) as system:
        system.get("kid-1").signal("go")
        system.idle(timeout=T)
        clock.advance(2)
        system.idle(timeout=T)
        assert system.get("boss-1").result(timeout=T) == {"a": "a", "b": 9}
    moved = sorted((e["workflow_id"], e["point"]) for e in logs if e["event"] == "workflow_upgraded")
    assert moved == [("boss-1", "spawn kid #1"), ("kid-1", "signal 'go' #1")]
    for wid in ("boss-1", "kid-1"):
        _, history = _stored(db, wid)
        assert [e for e, _ in history].count("upgraded") == 1


def test_wf_show_after_an_upgrade_counts_no_step_as_not_kept(db, capsys):
    """The upgrade's commit is a step of its own with no line in the row's newest steps (its
    event is in the history): ``wf show`` said "steps 1 to 1 are not kept" while it showed
    step 1."""
    clock = VirtualClock()
    _run_first_lap(db, clock)
    _load(V2)  # the deploy: the new code, loaded under the same name
    with ActorSystem(db, clock=clock) as system:
        system.get("p1")
        system.idle(timeout=T)
        clock.advance(5)  # the old timer fires: the patrol moves onto the new code
        system.idle(timeout=T)
    rec, history = _stored(db, "p1")
    assert [e for e, _ in history].count("upgraded") == 1
    assert main(["show", "p1", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "upgraded" in out and "started" in out, out
    assert "not kept" not in out, out
    assert main(["show", "p1", "--db", db, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["steps"] == rec.step_seq == 4 and data["steps_not_kept"] == 0  # 3 was the upgrade
