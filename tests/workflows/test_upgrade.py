"""Upgrading a suspended continuation onto new code: the differential corpus and the rules.

Every pair of ``corpus_upgrade`` is run to a suspension under its old code and checkpointed;
then its new code is loaded under the same key. A pair that moves must behave exactly as the new
code run from the start to the same point (the same commands afterwards, the same result, the
same log lines); a pair that is held must raise ``VersionMismatch`` naming what did not match,
and its checkpoint must still resume on the old code as if nothing had happened.
"""

from __future__ import annotations

import textwrap
import warnings
from typing import Any

import pytest

import workflows
from workflows import Event, VersionMismatch
from workflows._commands import Select
from workflows._compiler import checkpoint, compile_workflow_source, restore, step
from workflows._compiler._checkpoint import check_upgrade, restore_upgrading
from workflows._context import StepContext
from workflows._effects import procedure
from workflows._step import Finished, Raised, Suspended

from .corpus_upgrade import PAIRS, Pair


@procedure
def visit(stop: str) -> int:
    return len(stop)


class Guard:
    """A picklable context manager (a with block open across awaits is checkpointed)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.open = False

    def __enter__(self) -> Guard:
        self.open = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self.open = False


LOG: list[str] = []


def log(text: str) -> None:
    LOG.append(text)


def _compile(pair: Pair, src: str, tag: str) -> Any:
    g: dict[str, Any] = {n: getattr(workflows, n) for n in workflows.__all__}
    g.update(log=log, Guard=Guard, visit=visit, __name__=f"corpus_upgrade_{pair.name}")
    g.update(pair.extra)
    src = textwrap.dedent(src)
    name = [line.split("(")[0].split()[-1] for line in src.splitlines()
            if line.startswith("async def")][-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", workflows.CompileWarning)
        return compile_workflow_source(src, f"<corpus {pair.name} {tag}>", name, g)


def _value(cmd: Any, v: Any) -> Any:
    if isinstance(cmd, Select) and isinstance(v, tuple):
        name, value = v
        kind = next((c.kind for c in cmd.commands if getattr(c, "name", None) == name), "signal")
        return Event(name, value, kind)
    return v


def _advance(cont: Any, r: Any, sends: list[Any]) -> tuple[list[Any], Any]:
    """Feed ``sends`` to the awaits from result ``r`` on: the commands awaited, the outcome."""
    seen = []
    for v in sends:
        assert isinstance(r, Suspended), f"the workflow ended early: {r!r}"
        with StepContext().active():
            r = step(cont, send=_value(r.command, v))
        if isinstance(r, Suspended):
            seen.append(r.command)
    return seen, r


def _kind(cmd: Any) -> Any:
    if isinstance(cmd, Select):
        return ("select", tuple(_kind(c) for c in cmd.commands))
    return (type(cmd).__name__, getattr(cmd, "name", None))


def _outcome(r: Any) -> Any:
    if isinstance(r, Finished):
        return ("finished", r.value)
    if isinstance(r, Raised):
        return ("raised", type(r.exception).__name__, str(r.exception))
    return ("suspended", r.command)


def _to_point(wf: Any, pair: Pair, sends: list[Any]) -> tuple[Any, Any]:
    cont = wf.start(*pair.args)
    with StepContext().active():
        r = step(cont)
    _, r = _advance(cont, r, sends)
    assert isinstance(r, Suspended), f"{pair.name}: not suspended: {r!r}"
    return cont, r


def _register_upgrader(pair: Pair, new: Any, old_fp: str) -> None:
    if pair.upgrader is None:
        return
    ns: dict[str, Any] = {}
    exec(textwrap.dedent(pair.upgrader), ns)  # noqa: S102  (the corpus's own source)
    new.upgrade(from_version=old_fp[:12])(ns["up"])


def run_pair(pair: Pair) -> dict[str, Any]:
    """Run one pair; what happened (checked by the caller)."""
    LOG.clear()
    old = _compile(pair, pair.old, "old")
    cont, r = _to_point(old, pair, pair.before)
    blob = checkpoint(cont)
    pending = r.command
    old_fp = old.fingerprint
    new = _compile(pair, pair.new, "new")
    _register_upgrader(pair, new, old_fp)
    plan = check_upgrade(blob)
    out: dict[str, Any] = {"plan": plan, "blob": blob, "old": old, "new": new}
    try:
        moved, up = restore_upgrading(blob)
    except VersionMismatch as e:
        out["held"] = e
        return out
    assert up is not None and up.needed and up.possible
    LOG.clear()
    seen, end = _advance(moved, Suspended(pending), pair.after)
    out["upgraded"] = (seen, _outcome(end), list(LOG))
    out["upgrade"] = up
    # The reference: the new code from the start, to the same point, then the same values.
    LOG.clear()
    ref, r = _to_point(new, pair, pair.new_before if pair.new_before is not None else pair.before)
    # The same await (a changed constant may change its arguments, not what it waits for).
    assert _kind(r.command) == _kind(pending), f"{pair.name}: the new code waits on {r.command!r}"
    LOG.clear()
    seen, end = _advance(ref, r, pair.after)
    out["reference"] = (seen, _outcome(end), list(LOG))
    return out


@pytest.mark.parametrize("pair", [p for p in PAIRS if p.moves], ids=lambda p: p.name)
def test_safe_pair_moves_and_runs_as_the_new_code(pair: Pair) -> None:
    out = run_pair(pair)
    assert "held" not in out, f"{pair.name} ({pair.what}) was held: {out.get('held')}"
    assert out["plan"].possible and out["plan"].needed
    assert out["upgraded"] == out["reference"]
    assert out["upgraded"][1][0] == "finished"  # ran on to its end
    how = {f.how for f in out["upgrade"].frames} - {"unchanged"}
    assert how == ({"explicit"} if pair.upgrader else {"automatic"})


@pytest.mark.parametrize("pair", [p for p in PAIRS if not p.moves], ids=lambda p: p.name)
def test_unsafe_pair_is_held_with_the_reason_and_left_as_it_was(pair: Pair) -> None:
    out = run_pair(pair)
    assert "held" in out, f"{pair.name} ({pair.what}) moved"
    e = out["held"]
    assert pair.reason in str(e), str(e)
    assert e.reasons and any(pair.reason in r for r in e.reasons)
    assert not out["plan"].possible
    assert any(pair.reason in r for r in out["plan"].reasons())
    # Nothing changed: with the old code back, the checkpoint resumes as if never looked at.
    old = _compile(pair, pair.old, "old again")
    assert old.fingerprint == out["old"].fingerprint
    again = restore(out["blob"])
    assert again.fingerprint == old.fingerprint


def test_corpus_figures() -> None:
    """The figures the versioning guide quotes."""
    moves = [p for p in PAIRS if p.moves]
    held = [p for p in PAIRS if not p.moves]
    explicit = [p for p in PAIRS if p.upgrader]
    assert (len(PAIRS), len(moves), len(held), len(explicit)) == (100, 35, 65, 6)


def test_the_point_identity_survives_edits_elsewhere() -> None:
    pair = PAIRS[0]
    old = _compile(pair, pair.old, "old")
    new = _compile(pair, pair.new, "new")
    assert sorted(old._code.table.point_by_ident) == sorted(new._code.table.point_by_ident) == [
        "start", "timer 'walk' #1"]
    p = old._code.table.point_by_ident["timer 'walk' #1"]
    assert p.live == {"laps", "name"}  # tmp is dead there: it is never read after the await
    assert p.path == (("while", "#1"),)  # the first while loop of the function


def test_select_identity_and_ranks() -> None:
    src = '''
async def w(x):
    a = await signal("s")
    match await select(timer("end", after=1), signal("bid"), signal("cancel")):
        case _:
            pass
    b = await signal("s")
    await procedure(visit, "a", name="v")
    return a, b
'''
    pair = Pair("ids", "", src, src, [], [])
    wf = _compile(pair, src, "x")
    assert sorted(wf._code.table.point_by_ident) == [
        "procedure visit name='v' #1",
        "select(timer 'end', signal 'bid', signal 'cancel') #1",
        "signal 's' #1",
        "signal 's' #2",
        "start",
    ]
    t = wf._code.table.point_by_ident
    assert t["signal 's' #1"].live == set()  # a is assigned by that await
    assert t["signal 's' #2"].live == {"a"}


def test_a_not_started_continuation_moves_when_the_parameters_match() -> None:
    pair = Pair("start", "", PATROL_START_OLD, PATROL_START_NEW, [], [])
    old = _compile(pair, pair.old, "old")
    blob = checkpoint(old.start("n"))
    _compile(pair, pair.new, "new")
    moved, up = restore_upgrading(blob)
    assert up is not None and up.frames[0].how == "automatic"
    with StepContext().active():
        assert step(moved) == Finished("N!")
    pair2 = Pair("start2", "", PATROL_START_OLD, PATROL_START_NEW.replace("(name)", "(who)")
                 .replace("name.upper", "who.upper"), [], [])
    old = _compile(pair2, pair2.old, "old")
    blob = checkpoint(old.start("n"))
    _compile(pair2, pair2.new, "new")
    with pytest.raises(VersionMismatch, match="local who is live there in the new code"):
        restore_upgrading(blob)


PATROL_START_OLD = '''
async def w(name):
    return name.upper()
'''
PATROL_START_NEW = '''
async def w(name):
    return name.upper() + "!"
'''


def test_upgrade_registration_is_checked() -> None:
    pair = PAIRS[0]
    wf = _compile(pair, pair.old, "old")
    with pytest.raises(ValueError, match="first 8 or more hex digits"):
        wf.upgrade(from_version="abc")
    with pytest.raises(ValueError, match="this code's own fingerprint"):
        wf.upgrade(from_version=wf.fingerprint[:10])
    with pytest.raises(TypeError, match="decorates a function"):
        wf.upgrade(from_version="0123456789")(42)


def _live(src: str) -> dict[str, set[str]]:
    pair = Pair("live", "", src, src, [], [])
    wf = _compile(pair, src, "live")
    return {i: set(p.live or ()) for i, p in wf._code.table.point_by_ident.items() if i != "start"}


def test_liveness_follows_kills_branches_loops_and_handlers() -> None:
    live = _live('''
async def w(a, b):
    x = 1
    await signal("s1")
    x = 2
    y = x
    await signal("s2")
    if y:
        z = a
    else:
        z = b
    await signal("s3")
    try:
        x = 3
        await signal("s4")
        x = 4
    except ValueError:
        return x + z
    for i in range(3):
        await signal("s5")
        w2 = i
    del z
    get = lambda: b
    await signal("s6")
    return y, w2, get()
''')
    # w2 is read at the end and assigned only in the loop, which may not run: live until then.
    assert live["signal 's1' #1"] == {"a", "b", "w2"}  # x is assigned again before it is read
    # x: the try's first statement might raise before assigning it, and the handler reads it.
    assert live["signal 's2' #1"] == {"a", "b", "x", "y", "w2"}
    assert live["signal 's3' #1"] == {"b", "x", "y", "z", "w2"}
    # In the try: the handler reads x and z; after it, x is assigned before any read.
    assert live["signal 's4' #1"] == {"b", "x", "y", "z", "w2"}
    assert live["signal 's5' #1"] == {"b", "i", "y", "z"}  # w2 is assigned before any read; z: the del
    # b is read by a lambda: live everywhere.
    assert live["signal 's6' #1"] == {"b", "get", "y", "w2"}


def test_a_statement_that_may_raise_before_assigning_keeps_what_its_handler_reads() -> None:
    live = _live('''
async def w(n):
    x = 0
    while True:
        await signal("tick")
        try:
            x = compute(n)
        except ValueError:
            return x
''')
    assert live["signal 'tick' #1"] == {"n", "x"}


def _edit_header(blob: bytes, edit: Any) -> bytes:
    import json
    import struct

    (n,) = struct.unpack(">I", blob[4:8])
    header = json.loads(blob[8 : 8 + n])
    edit(header)
    hb = json.dumps(header).encode()
    return blob[:4] + struct.pack(">I", len(hb)) + hb + blob[8 + n :]


LOOP_OLD = '''
async def route(name):
    for stop in ["a", "b"]:
        await procedure(visit, stop)
    return "done"
'''


def _held_or_moved(pair: Pair, edit: Any) -> Any:
    old = _compile(pair, pair.old, "old")
    cont, _ = _to_point(old, pair, pair.before)
    blob = _edit_header(checkpoint(cont), edit)
    _compile(pair, pair.new, "new")
    try:
        return restore_upgrading(blob)
    except VersionMismatch as e:
        return e


def test_a_checkpoint_without_point_records_is_held() -> None:
    pair = Pair("no_record", "", PAIRS[0].old, PAIRS[0].new, [None], [])

    def strip(h: dict[str, Any]) -> None:
        h["frames"] = [[f[0], f[1], None] for f in h["frames"]]

    e = _held_or_moved(pair, strip)
    assert isinstance(e, VersionMismatch)
    assert "records no readable suspension point" in str(e)


def test_a_point_record_of_another_format_is_held() -> None:
    pair = Pair("other_format", "", PAIRS[0].old, PAIRS[0].new, [None], [])

    def bump(h: dict[str, Any]) -> None:
        h["frames"][0][2]["pf"] = 99

    e = _held_or_moved(pair, bump)
    assert isinstance(e, VersionMismatch)
    assert "in format 99, this version of actorflow reads format 1" in str(e)


def test_across_compiler_versions_only_frames_without_the_compilers_own_state_move() -> None:
    def other_compiler(h: dict[str, Any]) -> None:
        h["frames"][0][2]["cv"] = "actorflow-compiler-0"

    plain = Pair("cross_plain", "", PAIRS[0].old, PAIRS[0].new, [None], [])
    moved = _held_or_moved(plain, other_compiler)
    assert not isinstance(moved, VersionMismatch), moved
    looping = Pair("cross_loop", "", LOOP_OLD, LOOP_OLD.replace('"done"', '"done!"'), [], [])
    e = _held_or_moved(looping, other_compiler)
    assert isinstance(e, VersionMismatch)
    assert "the iterator of the for-loop at line 3 is state of the compiler that made it (actorflow-compiler-0)" in str(e)


def test_liveness_follows_paths_that_end_in_match_try_finally_and_loops() -> None:
    """A path that leaves by return/raise/break/continue reads nothing after it, whatever the
    construct it is in: a match with a case that takes every subject, a try with a bare except,
    a finally reached only by a return, a ``while True`` left only by return, an await in a
    return or raise statement."""
    live = _live('''
async def w(a):
    v = await signal("m")
    match v:
        case 0:
            y = a
        case [_, *_]:
            return 0
        case other:
            raise ValueError(other)
    try:
        got = await signal("t")
    except:
        return y
    z = got
    await signal("z")
    try:
        return await signal("f")
    finally:
        log("f")
    return q
''')
    assert live["signal 'm' #1"] == {"a"}  # y: no path reads it before the case assigns it
    assert live["signal 't' #1"] == {"y"}
    assert live["signal 'f' #1"] == set()  # q follows a try that only returns: dead
    loop = _live('''
async def w(a):
    n = 0
    while True:
        n += await signal("tick")
        if n > a:
            return n
    return after
''')
    assert loop["signal 'tick' #1"] == {"a", "n"}
    dead = _live('''
async def w(a):
    b = 1
    raise ValueError(await signal("r"))
    return b
''')
    assert dead["signal 'r' #1"] == set()


def test_liveness_keeps_the_paths_that_fall_through() -> None:
    """Without a case that takes every subject, no case matching goes on past the match; a try
    whose except names a type sends other exceptions on; a finally reached normally goes on."""
    live = _live('''
async def w(a):
    v = await signal("m")
    match v:
        case 0:
            y = a
        case 1:
            return 0
    try:
        try:
            got = await signal("t")
        except KeyError:
            return 1
        y = got
    except ValueError:
        return y
    try:
        await signal("f")
    finally:
        log("f")
    return y
''')
    assert live["signal 'm' #1"] == {"a", "y"}
    assert live["signal 't' #1"] == {"y"}
    assert live["signal 'f' #1"] == {"y"}
