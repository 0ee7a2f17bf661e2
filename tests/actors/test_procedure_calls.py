"""Procedures called by workflows: values, retries, failures, and their outcomes across steps.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from actors import Status, WorkflowFailed

from . import flows
from .runtime_support import (
    Inside,
    T,
    app_events,
    connect,
)

pytestmark = pytest.mark.usefixtures("fresh_flows")


def test_procedures_return_values_and_reducers_commit(system, db):
    """Procedure results resume the workflow; reducers run in the step's transaction."""
    ref = system.start(flows.adder, 5, id="adder-1")
    assert ref.result(timeout=T) == 20
    assert app_events(db, "adder-1") == ["10,20"]
    keys = [k for (what, (x, k)) in flows.CALLS if what == "double" and k.startswith("adder-1#")]
    assert len(keys) == 2 and len(set(keys)) == 2


def test_procedure_retries_with_backoff_then_succeeds(system, clock):
    """A failing procedure is retried after its backoff on the workflow clock."""
    ref = system.start(flows.uses_flaky, "t1", 2)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING  # first attempt failed, retry due in 10 s
    clock.advance(10)
    system.idle(timeout=T)
    clock.advance(20)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == "ok after 3"


def test_procedure_failure_after_last_attempt_is_catchable(system, clock):
    """After its last attempt a procedure raises ProcedureFailed, which the workflow can catch."""
    ref = system.start(flows.uses_flaky, "t2", 5)
    for _ in range(3):
        system.idle(timeout=T)
        clock.advance(100)
    assert ref.result(timeout=T) == "gave up: ConnectionError after 3"


@pytest.mark.parametrize(("error", "raised", "attempts"), [
    ("declined", "tests.actors.flows.CardDeclined", 1),
    ("stolen", "tests.actors.flows.StolenCard", 1),
    ("flaky", "ConnectionError", 3),
])
def test_an_error_whose_class_or_base_is_non_retryable_is_not_tried_again(system, clock, error, raised, attempts):
    """``non_retryable`` given exception classes: an error of one, or of a subclass, fails the
    call at once (a card is charged once); another error is retried to the last attempt."""
    tag = f"charge-{error}"
    ref = system.start(flows.pays, tag, error)
    for _ in range(3):
        system.idle(timeout=T)
        clock.advance(100)
    assert ref.result(timeout=T) == f"gave up: {raised} after {attempts}"
    assert flows.FLAKY_FAILS[tag] == attempts


def test_a_call_whose_arguments_do_not_fit_the_procedure_fails_at_once(system, clock):
    """A TypeError of the call itself (arguments the signature refuses) is not retried: no
    attempt would take them. A TypeError raised inside the procedure is retried as any error."""
    ref = system.start(flows.calls_with_wrong_arguments, "misfit")
    system.idle(timeout=T)
    assert ref.result(timeout=T) == (
        "gave up: TypeError after 1: flaky() missing 1 required positional argument: 'fail_times' "
        "(the call's arguments do not fit the procedure's signature: not retried)"
    )
    assert "misfit" not in flows.FLAKY_FAILS  # it never ran


@pytest.mark.parametrize(("how", "raised", "attempts"), [
    ("exit", "SystemExit", 3),
    ("interrupt", "KeyboardInterrupt", 3),
    ("bad-str", "tests.actors.flows._BadStr", 3),
    ("unpicklable", "TypeError", 1),
    ("unloadable", "TypeError", 1),
])
def test_an_attempt_that_ends_badly_fails_as_any_other(system, clock, how, raised, attempts):
    """SystemExit or KeyboardInterrupt in a procedure (library code calling sys.exit()) and an
    exception whose str() raises end that attempt as a failure, retried by the policy; a result
    that cannot be stored fails the call at its first attempt (another would run it again for
    nothing). The call never stays pending in a running process."""
    tag = f"badly-{how}"
    ref = system.start(flows.calls_ends_badly, tag, how)
    for _ in range(4):
        system.idle(timeout=T)
        clock.advance(100)
    assert ref.result(timeout=T) == f"gave up: {raised} after {attempts}"
    assert flows.FLAKY_FAILS[tag] == attempts


def test_a_workflow_takes_a_copy_of_a_procedure_s_result_as_stored(system):
    """The workflow gets the result as it was stored, as it would after a restart: not the
    procedure's own object (it held the procedure's module list: a change the procedure made
    to it later showed in the workflow, and the workflow's changes went into the procedure's
    cache). A result whose restore raises fails the call at its first attempt (the test above),
    where it succeeded and failed the workflow only after a restart."""
    flows.SHARED_CACHE[:] = [1, 2]
    ref = system.start(flows.holds_a_procedure_result)
    system.idle(timeout=T)
    assert flows.SHARED_CACHE == [1, 2]
    flows.SHARED_CACHE.append(3)
    ref.signal("go")
    assert ref.result(timeout=T) == ([1, 2, 99], False)


def test_a_procedure_outcome_commits_with_the_step_that_consumes_it(system, db):
    """A procedure's reply costs no commit of its own: one commit per step, the start's with the
    first."""
    ref = system.start(flows.adder, 3, id="adder-commits")
    system.idle(timeout=T)
    before = Inside(system).commits()
    ref2 = system.start(flows.adder, 4, id="adder-commits-2")
    assert ref2.result(timeout=T) == 16
    system.idle(timeout=T)
    # The record with the first step (which dispatches the call), the second (consumes it and
    # dispatches the next), the finish.
    assert Inside(system).commits() - before == 3
    assert ref.result(timeout=T) == 12
    con = connect(db)
    assert con.execute("SELECT count(*) FROM procedures").fetchone()[0] == 0
    con.close()


def test_a_procedure_outcome_survives_a_failed_step_without_running_again(system, clock, db):
    """If the step consuming a procedure's reply fails to commit, the reply is kept in the store:
    the restarted actor resumes with it and the procedure does not run a second time."""
    ref = system.start(flows.double_then_fragile_reducer, "frag", 21, id="frag-1")
    for _ in range(4):  # two restarts with backoff on the virtual clock
        system.idle(timeout=T)
        clock.advance(5)
    assert ref.result(timeout=T) == 42
    runs = [k for (what, (x, k)) in flows.CALLS if what == "double" and k.startswith("frag-1#")]
    assert len(runs) == 1
    assert app_events(db, "frag") == ["reduced"]


def test_procedure_of_a_lambda_is_refused_at_the_call(system):
    """procedure(lambda: ...) raises TypeError at the call (it used to be dispatched and fail
    after its retries as an unknown procedure)."""
    text = system.start(flows.calls_a_lambda).result(timeout=T)
    assert text.startswith("caught: procedure() needs a function that a restarted process can find")
    assert "<lambda>" in text


def test_module_imported_in_a_step_registers_its_procedures_and_reducers(system, db, tmp_path, monkeypatch):
    """A module first imported by workflow code during a step: its @procedure and @reducer lines
    decorate (they used to be taken for calls), and the step can call them."""
    name = "af_lazy_effects"
    (tmp_path / f"{name}.py").write_text(
        "from workflows import procedure, reducer\n\n"
        "@procedure\ndef triple(x):\n    return 3 * x\n\n"
        "@reducer\ndef note(db, x):\n"
        "    db.execute('CREATE TABLE IF NOT EXISTS lazy_notes (x INTEGER)')\n"
        "    db.execute('INSERT INTO lazy_notes VALUES (?)', (x,))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    ref = system.start(flows.imports_in_a_step, name, 7)
    ref.signal("go")
    assert ref.result(timeout=T) == 21
    mod = sys.modules[name]
    assert callable(mod.triple) and mod.triple(2) == 6 and callable(mod.note)
    con = connect(db)
    assert con.execute("SELECT x FROM lazy_notes").fetchall() == [(7,)]
    con.close()


def test_an_attempt_that_overruns_its_timeout_fails_as_the_public_procedure_timeout(system):
    """An attempt cut off by its ``timeout=`` fails with ``actors.ProcedureTimeout``: the
    ``error_type`` a workflow reads is the public name (it was the private module's), and
    ``"ProcedureTimeout"`` in ``non_retryable`` tries none again."""
    from actors import ProcedureTimeout

    try:
        ref = system.start(flows.calls_overrunning)
        assert ref.result(timeout=T) == (1, "actors.ProcedureTimeout")
    finally:
        flows.GATE.set()  # the abandoned attempt's thread ends
    assert issubclass(ProcedureTimeout, TimeoutError) and ProcedureTimeout.__module__ == "actors"


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_a_procedure_s_traceback_starts_at_the_procedure(system, timeout):
    """ProcedureFailed.traceback points at the procedure's own lines, as a workflow's traceback
    points at the workflow's: it began with the runtime's frames that made the attempt (and, with
    a timeout, the thread that ran it)."""
    tb = system.start(flows.reads_a_procedure_traceback, timeout).result(timeout=T)
    frames = re.findall(r'^  File "([^"]+)", line \d+, in (\S+)$', tb, re.MULTILINE)
    assert [(Path(f).name, fn) for f, fn in frames] == [("flows.py", "refuses_an_item")], tb
    assert tb.endswith("LookupError: no sword\n")


def _frames(tb: str) -> list[tuple[str, str]]:
    return [(Path(f).name, fn) for f, fn in re.findall(r'^  File "([^"]+)", line \d+, in (\S+)$', tb, re.MULTILINE)]


def test_a_workflow_failed_on_a_procedure_keeps_the_procedure_s_traceback(system):
    """A workflow that fails on a procedure's failure (uncaught, or raised from it) says where the
    procedure failed, as Python chains a cause: the procedure's traceback, then the workflow's.
    It showed the workflow's line alone, and the procedure's lines were kept nowhere."""
    with pytest.raises(WorkflowFailed) as failed:
        system.start(flows.lets_a_procedure_failure_escape).result(timeout=T)
    tb = failed.value.traceback
    assert _frames(tb) == [("flows.py", "refuses_an_item"), ("flows.py", "lets_a_procedure_failure_escape")], tb
    assert "LookupError: no shield\n\nThe above exception was the direct cause of the following exception:" in tb
    assert failed.value.error_type == "workflows.ProcedureFailed"
    assert "ProcedureFailed: procedure" in tb.rstrip().splitlines()[-1], tb

    with pytest.raises(WorkflowFailed) as wrapped:
        system.start(flows.wraps_a_procedure_failure).result(timeout=T)
    tb = wrapped.value.traceback
    assert _frames(tb) == [("flows.py", "refuses_an_item"), ("flows.py", "wraps_a_procedure_failure"),
                           ("flows.py", "wraps_a_procedure_failure")], tb
    assert tb.count("The above exception was the direct cause of the following exception:") == 2, tb
    assert tb.rstrip().endswith("QuestBroken: the quest needs a helm"), tb


def test_a_workflow_failed_on_a_child_keeps_the_child_s_traceback(system):
    with pytest.raises(WorkflowFailed) as failed:
        system.start(flows.lets_a_child_failure_escape).result(timeout=T)
    tb = failed.value.traceback
    assert _frames(tb) == [("flows.py", "refuses_an_item"), ("flows.py", "lets_a_procedure_failure_escape"),
                           ("flows.py", "lets_a_child_failure_escape")], tb
    assert failed.value.error_type == "workflows.ChildFailed"
