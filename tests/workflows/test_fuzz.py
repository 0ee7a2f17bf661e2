"""Random programs (design §5.2) behave the same natively and compiled, with and without restarts.

Each generated program is compiled with ``compile_workflow_source`` and run differentially on a
few inputs against oracle variants drawn alongside it: which ``fail(...)`` calls fail and with what
error, where cancellation is injected, and how ``get(...)`` results are shifted. The example count
is bounded for CI; set ``ACTORFLOW_FUZZ_EXAMPLES`` for a deeper (and randomised) run.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from workflows._commands import Procedure
from workflows._compiler import compile_workflow_source

from .diffharness import Oracle, command_name, compare, procedure_failed, run_compiled, run_native
from .probes import CustomErr
from .programs import Program, namespace, programs

_DEEP = os.environ.get("ACTORFLOW_FUZZ_EXAMPLES")
# The fast tier runs a sample of generated programs; the slow tier (pytest -m slow) all of them.
FAST, FULL = 40, 200
FUZZ = settings(
    max_examples=int(_DEEP) if _DEEP else FULL,
    deadline=None,
    derandomize=not _DEEP,  # CI runs are reproducible; deep runs explore
    database=None if not _DEEP else settings.default.database,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)


def custom_err(cmd, index):
    """A two-field custom error (own ``__reduce__``) as a failing reply."""
    return CustomErr(index, command_name(cmd))


def _risky_when(parity: int):
    def pred(cmd, index):
        return (
            isinstance(cmd, Procedure)
            and cmd.function.endswith(":risky")
            and isinstance(cmd.args[0], int)
            and cmd.args[0] % 2 == parity
        )

    return pred


@st.composite
def oracles(draw) -> Oracle:
    """An oracle variant: failing fail(...) calls, a failing suspension, a cancellation point."""
    shift = draw(st.integers(-2, 3))
    fail_at = draw(st.frozensets(st.integers(0, 12), max_size=2))
    return Oracle(
        fail_when=draw(st.sampled_from([None, _risky_when(0), _risky_when(1)])),
        fail_at=fail_at,
        error=draw(st.sampled_from([procedure_failed, custom_err])),
        cancel_at=draw(st.none() | st.integers(0, 15)),
        results={"fetch": lambda v: v + shift},
        limit=120,
    )


def _compile(prog: Program):
    src = prog.source()
    note(src)
    compile(src, "fuzz_program.py", "exec")  # the generator only emits valid Python
    return compile_workflow_source(src, "fuzz_program.py", "wf", namespace())


GENERATED = dict(
    prog=programs(),
    inputs=st.lists(st.sampled_from([0, 1, 2, 5, -1]), min_size=1, max_size=2, unique=True),
    variants=st.lists(oracles(), min_size=1, max_size=2),
)


# Tens of seconds alone; several times that on a machine running other suites beside it.
@pytest.mark.timeout(1200)
@settings(FUZZ, max_examples=int(_DEEP) if _DEEP else FAST)
@given(**GENERATED)
def test_generated_programs_match_native(prog, inputs, variants):
    """A sample of generated programs: compiled (with and without restarts) each matches the
    native coroutine."""
    _match_native(prog, inputs, variants)


# About 80 s alone on two cores; CI runs the 3.12 and 3.13 suites beside the 3.11 one, which can
# make it several times that: a timeout of its own, well above the suite's 300 s default.
@pytest.mark.slow
@pytest.mark.timeout(1200)
@FUZZ
@given(**GENERATED)
def test_all_generated_programs_match_native(prog, inputs, variants):
    """Every generated program of the full run: compiled (with and without restarts) each
    matches the native coroutine."""
    _match_native(prog, inputs, variants)


def _match_native(prog, inputs, variants):
    wf = _compile(prog)
    for oracle in [Oracle(limit=120), *variants]:
        for x in inputs:
            native = run_native(wf, (x,), oracle)
            assert native.failure is None, native.failure
            for roundtrip in (False, True):
                compiled = run_compiled(wf, (x,), oracle, roundtrip=roundtrip)
                diffs = compare(native, compiled, with_chain=True)
                assert not diffs, f"x={x} roundtrip={roundtrip} oracle={oracle}\n" + "\n".join(diffs)
