"""A local holding one of the process's own objects (``os.environ``, ``sys.path``, the generator
behind ``random.random``) is the restoring process's object again after a restore, as natively it
is the process's.

They were written by value, as any library's module-level object is: after a restore the local
held a copy, silently. ``env = os.environ`` then took variables ``os.environ`` never saw (and
missed those set on it), ``p = sys.path`` appended to a list no import reads, and ``r =
random.random`` or ``partial(random.randint, 1, 6)`` drew from a copy of the shared generator,
repeating the draws ``random.random()`` made after it.
"""

from __future__ import annotations

import functools
import os
import random
import sys

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

from .diffharness import resume_in_a_new_interpreter

MODULE = "tests.workflows.test_checkpoint_process_objects"
VAR = "ACTORFLOW_TEST_PROCESS_OBJECTS"
PATH = "/actorflow-test-process-objects-nowhere"


@workflow
async def holds_the_environment():
    env = os.environ
    await timer("t", 1)
    os.environ[VAR] = "set on os.environ"
    seen = env.get(VAR)
    env[VAR + "_2"] = "set on the local"
    out = (env is os.environ, seen, os.environ.get(VAR + "_2"))
    os.environ.pop(VAR, None)
    os.environ.pop(VAR + "_2", None)
    return out


@workflow
async def holds_the_import_path():
    p = sys.path
    argv = sys.argv
    await timer("t", 1)
    p.append(PATH)
    out = (p is sys.path, sys.path[-1] == PATH, argv is sys.argv)
    while PATH in sys.path:
        sys.path.remove(PATH)
    return out


@workflow
async def holds_random_draws():
    r = random.random
    dice = functools.partial(random.randint, 1, 6)
    await timer("t", 1)
    return (r.__self__ is random._inst, dice.func.__self__ is random._inst)  # type: ignore[attr-defined]


def _same_process(wf):
    h = WorkflowHarness(wf, roundtrip=True)
    h.fire_timer("t")
    return h.result()


def _new_interpreter(wf):
    h = WorkflowHarness(wf, roundtrip=False)
    return resume_in_a_new_interpreter(
        h.checkpoint(), module=MODULE, workflow_type=wf.__workflow_key__, finish=True
    )


def test_a_local_holding_os_environ_is_os_environ_after_a_restore():
    native = WorkflowHarness(holds_the_environment, native=True)
    native.fire_timer("t")
    expected = (True, "set on os.environ", "set on the local")
    assert native.result() == expected
    assert _same_process(holds_the_environment) == expected
    assert _new_interpreter(holds_the_environment) == expected


def test_a_local_holding_sys_path_or_sys_argv_is_the_processs_after_a_restore():
    assert _same_process(holds_the_import_path) == (True, True, True)
    assert _new_interpreter(holds_the_import_path) == (True, True, True)


def test_random_functions_held_draw_from_the_processs_generator_after_a_restore():
    assert _same_process(holds_random_draws) == (True, True)
    assert _new_interpreter(holds_random_draws) == (True, True)


def test_a_copy_of_the_environment_stays_a_copy():
    @workflow
    async def holds_a_copy():
        env = dict(os.environ)
        await timer("t", 1)
        return env is os.environ, type(env) is dict

    assert _same_process(holds_a_copy) == (False, True)
