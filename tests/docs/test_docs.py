"""The documentation's programs run and say what the docs say; the docs show them verbatim."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PROGRAMS = ROOT / "examples" / "docs"
T = 60  # every wait on a subprocess is bounded


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


def _run(*args: str, timeout: float = T) -> subprocess.CompletedProcess[str]:
    try:
        p = subprocess.run(
            [sys.executable, *args], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        # Killed: what it printed so far says where it was (starting, collecting, in a test).
        raise AssertionError(
            f"{args} did not end within {timeout:g}s; its output so far:\n{_text(e.stdout)}\n{_text(e.stderr)}"
        ) from None
    assert p.returncode == 0, f"{args} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p


def _text(out: str | bytes | None) -> str:
    """A killed process's output (bytes, even when text was asked for)."""
    return out.decode(errors="replace") if isinstance(out, bytes) else out or ""


def _wf(db: Path, *args: str) -> str:
    return _run("-m", "actors.cli", *args, "--db", str(db)).stdout


class _Lines:
    """A subprocess whose output lines are read with a timeout."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float = T) -> str:
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} within {timeout}s; got {self.seen}") from None
            if line is None:
                raise AssertionError(f"the process ended before printing {text!r}; got {self.seen}")
            self.seen.append(line)
            if text in line:
                return line


# -- the tutorial ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_tutorial_survives_sigkill_and_recovers(tmp_path):
    """The tutorial program, SIGKILLed while it waits, is run again and finishes the same auction.

    Its deadline is a minute away, as in the tutorial, and the test ends it with `wf fire-timer`
    once the second run waits: on a loaded machine, a deadline of a few seconds could pass
    before bob's bid is delivered."""
    db = tmp_path / "auction.db"
    first = _Lines("-m", "examples.docs.tutorial", str(db), "60")
    first.wait_for("alice bid 100")
    first.wait_for("waiting for the auction to end")
    first.proc.send_signal(signal.SIGKILL)
    assert first.proc.wait(timeout=T) == -signal.SIGKILL

    listed = json.loads(_wf(db, "list", "--json"))
    assert [(w["id"], w["status"]) for w in listed] == [("auction-7", "running")]
    shown = _wf(db, "show", "auction-7")
    assert "waiting   timer 'end' due" in shown and "signal 'bid'" in shown
    _wf(db, "signal", "auction-7", "bid", '{"bidder": "bob", "amount": 150}')

    second = _Lines("-m", "examples.docs.tutorial", str(db), "60")
    second.wait_for("auction-7 is already in")
    second.wait_for("waiting for the auction to end")
    _wf(db, "fire-timer", "auction-7", "end")
    second.wait_for("result: {'winner': 'bob', 'price': 150}")
    assert second.proc.wait(timeout=T) == 0
    con = sqlite3.connect(db)
    texts = [t for (t,) in con.execute("SELECT text FROM announcements ORDER BY rowid")]
    con.close()
    assert texts == [
        "auction for item 7 by carol opens at 70",
        "alice bids 100",
        "bob bids 150",
        "item 7 sold to bob for 150",
    ]
    assert "completed" in _wf(db, "show", "auction-7")


def test_tutorial_log_lines_name_the_fields_the_runtime_logs(tmp_path):
    """The runtime's events the tutorial shows carry the fields the runtime gives them (each
    names its system, as the logging guide says), on the same steps: open, start, a `wf signal`
    left while nothing ran, recovery, the end and the shutdown."""
    from structlog.testing import capture_logs

    from actors import ActorSystem
    from actors.cli import main
    from examples.docs.auction import auction

    page = (DOCS / "tutorial.md").read_text()
    shown: dict[str, set[str]] = {}
    for m in re.finditer(r"^\S+ \S+ \[\w+\s*\] (\w+) +(.*)$", page, re.M):
        shown.setdefault(m.group(1), set()).update(re.findall(r"(\w+)=", m.group(2)))
    assert {"system_recovered", "workflow_started", "external_request_done", "workflow_completed",
            "system_shutdown"} <= set(shown)
    db = str(tmp_path / "auction.db")
    with capture_logs() as logs:
        with ActorSystem(db) as system:
            system.start(auction, 7, "carol", 60.0, id="auction-7", test_mode=True)
            system.idle(timeout=T)
        assert main(["signal", "auction-7", "bid", '{"bidder": "bob", "amount": 150}', "--db", db]) == 0
        with ActorSystem(db) as system:
            ref = system.get("auction-7")
            system.idle(timeout=T)
            ref.debug_fire_timer("end")
            assert ref.result(timeout=T) == {"winner": "bob", "price": 150}
    logged: dict[str, set[str]] = {}
    for e in logs:
        logged.setdefault(e["event"], set()).update(k for k in e if k not in ("event", "log_level"))
    for event, keys in shown.items():
        assert keys == logged[event], f"{event}: the tutorial shows {sorted(keys)}, the runtime logs {sorted(logged[event])}"


# -- every program prints what its page shows -----------------------------------------------------

_OUTPUT = re.compile(r"```text\n\$ (python -m examples\.docs [^\n]*)\n(.*?)```", re.S)


def _shown_outputs() -> dict[str, tuple[Path, str]]:
    found = {}
    for page in DOCS.rglob("*.md"):
        for m in _OUTPUT.finditer(page.read_text()):
            found[m.group(1)] = (page, m.group(2))
    return found


@pytest.mark.parametrize(
    "program", ["asyncio_server", "failures", "persistence", "porting", "upgrade", "versioning"]
)
def test_program_prints_what_the_docs_show(program):
    """Each guide's program runs (virtual clock or pure harness, temporary file) and prints
    exactly the output its page shows."""
    command = f"python -m examples.docs {program}"
    shown = _shown_outputs()
    assert command in shown, f"no ```text block starting with '$ {command}' in docs/"
    page, expected = shown[command]
    out = _run("-m", "examples.docs", program).stdout
    assert out == expected, f"{page.relative_to(ROOT)} shows another output than {command} prints"


def test_testing_guide_tests_pass():
    """The tests the testing guide shows pass under pytest, with the plugin's fixtures."""
    # In one process (-n 0): the project's four xdist workers, started inside a suite that runs
    # its own on two cores, took most of the minute to start on a loaded machine. Without
    # hypothesis's plugin, which these tests do not use and whose import is a third of the run's
    # CPU time. The run needs 2 to 3 s of CPU, nearly all of it pytest's start and the imports
    # (the tests take a fraction of a second); two cores running the suite's lanes beside it
    # stretched it to 45 s, too close to the minute: it is given three.
    out = _run("-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-n", "0",
               "examples/docs/test_auction.py", timeout=3 * T).stdout
    assert re.search(r"\b3 passed\b", out), out


# -- the docs show the programs verbatim ----------------------------------------------------------

_BLOCK = re.compile(r"```python\n(# (examples/docs/[\w/]+\.py)\n.*?)```", re.S)


def test_python_blocks_equal_their_files():
    """Every ```python block naming a file in its first line is that file, byte for byte."""
    checked = 0
    for page in DOCS.rglob("*.md"):
        for m in _BLOCK.finditer(page.read_text()):
            path = ROOT / m.group(2)
            assert path.exists(), f"{page.relative_to(ROOT)} shows {m.group(2)}, which does not exist"
            assert m.group(1) == path.read_text(), (
                f"{page.relative_to(ROOT)} shows an outdated {m.group(2)}; paste the file again"
            )
            checked += 1
    assert checked >= 8


def test_every_program_is_shown_in_the_docs():
    """Every program in examples/docs appears in some page, so none is left undocumented."""
    shown = {m.group(2) for page in DOCS.rglob("*.md") for m in _BLOCK.finditer(page.read_text())}
    programs = {
        str(p.relative_to(ROOT)) for p in PROGRAMS.glob("*.py") if not p.name.startswith("__")
    }
    assert programs <= shown, f"not shown in docs/: {sorted(programs - shown)}"


# -- the reference names every public name --------------------------------------------------------


@pytest.mark.parametrize(
    "module", ["workflows", "workflows.testing", "actors", "actors.testing", "persistence"]
)
def test_reference_names_every_public_name(module):
    """docs/reference.md documents every name in each public package's __all__."""
    import importlib

    text = (DOCS / "reference.md").read_text()
    missing = [n for n in importlib.import_module(module).__all__ if f"`{n}" not in text]
    assert not missing, f"docs/reference.md does not document {module}: {missing}"


def test_reference_names_every_cli_subcommand_and_option():
    """docs/reference.md documents every wf subcommand and each of its options."""
    from actors.cli import build_parser

    text = (DOCS / "reference.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, sp in sub.choices.items():
        assert f"wf {name}" in text, f"wf {name} is not documented"
        for action in sp._actions:
            for opt in action.option_strings:
                if opt not in ("-h", "--help"):
                    assert opt in text, f"wf {name} {opt} is not documented"


# -- claims of the versioning guide ---------------------------------------------------------------


def test_decorator_and_location_do_not_change_the_fingerprint():
    """Copying a workflow verbatim to another module under @workflow(name=old key) keeps its
    fingerprint; renaming it or changing its body changes it."""
    from examples.docs import checkout_v1
    from workflows._compiler import compile_workflow_source

    original = (
        "from workflows import signal, workflow\n\n\n"
        "@workflow\n"
        "async def checkout(cart: list) -> dict:\n"
        "    # a comment is not part of the fingerprint\n"
        '    payment = await signal("pay")\n'
        '    return {"paid": payment, "items": len(cart)}\n'
    )
    same = compile_workflow_source(original, "shop_before.py", "checkout")
    assert same.fingerprint == checkout_v1.checkout.fingerprint
    renamed = compile_workflow_source(
        original.replace("def checkout", "def checkout_v1"), "shop_renamed.py", "checkout_v1"
    )
    assert renamed.fingerprint != checkout_v1.checkout.fingerprint
    changed = compile_workflow_source(
        original.replace('"items"', '"count"'), "shop_changed.py", "checkout"
    )
    assert changed.fingerprint != checkout_v1.checkout.fingerprint


def test_changed_code_is_never_resumed_and_old_code_resumes(tmp_path):
    """A continuation whose code changed stays RUNNING and untouched, with a
    workflow_version_mismatch error logged; loading the old code again under its key resumes it."""
    from structlog.testing import capture_logs

    from actors import ActorSystem, Status
    from actors.testing import VirtualClock
    from workflows._compiler import compile_workflow_source

    key = "docs_versioning_test:greeter"
    v1 = "async def greeter(name):\n    who = await signal('hello')\n    return f'hi {who}'\n"
    # Not safe to move: a local the new code reads after the await was never set by the old.
    v2 = ("async def greeter(name):\n    word = 'hello'\n    who = await signal('hello')\n"
          "    return f'{word} {who}'\n")
    db, clock = str(tmp_path / "v.db"), VirtualClock()
    old = compile_workflow_source(v1, "greeter_v1.py", key)
    with ActorSystem(db, clock=clock) as system:
        system.start(old, "x", id="g")
        system.idle(timeout=10)
    compile_workflow_source(v2, "greeter_v2.py", key)  # a deploy that edited the workflow
    with capture_logs() as logs, ActorSystem(db, clock=clock) as system:
        ref = system.get("g")
        ref.signal("hello", "bob")
        system.idle(timeout=10)
        assert ref.status() is Status.RUNNING
        assert [e["event"] for e in logs if e["log_level"] == "error"] == ["workflow_version_mismatch"]
        error = next(e for e in logs if e["log_level"] == "error")["error"]
        assert "code changed" in error
        assert "local word is live there in the new code but was not in the old" in error
    compile_workflow_source(v1, "greeter_v1.py", key)  # the old code is back under its key
    with ActorSystem(db, clock=clock) as system:
        assert system.get("g").result(timeout=10) == "hi bob"


def test_the_upgrade_corpus_table_is_the_corpus():
    """The versioning guide's table of the differential corpus lists every pair, with its
    outcome and reason, and its figures count them."""
    from tests.workflows.corpus_upgrade import PAIRS

    text = (DOCS / "guides" / "versioning.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \| (.*?) \|$", text, re.M)
    want = [
        (p.name, p.what, ("moves" + (" (upgrade function)" if p.upgrader else "")) if p.moves else f"held: {p.reason}")
        for p in PAIRS
    ]
    assert rows == want
    moves = [p for p in PAIRS if p.moves]
    held = [p for p in PAIRS if not p.moves]
    assert f"holds {len(PAIRS)} pairs" in text
    assert f"**{len(moves)} move** ({len([p for p in moves if not p.upgrader])} automatically, " \
        f"{len([p for p in moves if p.upgrader])} by an upgrade function)" in text
    assert f"**{len(held)} are held** ({len([p for p in held if not p.upgrader])} by\nthe automatic " \
        f"rules, {len([p for p in held if p.upgrader])} by an upgrade function's wrong answer)" in text


def test_relative_links_resolve():
    """Every relative link in docs/ and the README points at a file that exists."""
    broken = []
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)
