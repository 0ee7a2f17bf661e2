"""Known checkpoint bugs, each a failing reproducer marked xfail(strict=True) until it is fixed.

They live in the pickler (``workflows/_compiler/_pickler.py``); the differential corpus marks the
entries they make diverge in ``test_differential.KNOWN_BUGS``. This module holds the reproducers
that the in-process corpus runs cannot show.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

ROOT = pathlib.Path(__file__).resolve().parents[2]

CHILD = r"""
import sys
from workflows._compiler import restore, step
from workflows._context import StepContext
blob = sys.stdin.buffer.read()
cont = restore(blob)
with StepContext(workflow_id="wf-1", workflow_type="k", now=0.0).active():
    r = step(cont, send=None)
print(r.value)
"""


@workflow
async def local_class_qualname():
    """Returns the qualified name of a class made in the workflow, after an await."""
    class Local:
        pass

    await timer("t", 1)
    return Local.__qualname__


@pytest.mark.xfail(
    strict=True,
    reason="cloudpickle rebuilds a class made in a workflow without its __qualname__ in a "
    "process that did not make it (its repr, a dataclass's repr and tracebacks then differ)",
)
def test_class_made_in_a_workflow_keeps_its_qualname_in_a_fresh_process():
    h = WorkflowHarness(local_class_qualname, roundtrip=False)
    blob = h.checkpoint()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-c", CHILD], input=blob, capture_output=True, cwd=str(ROOT), env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert out.stdout.decode().strip() == "local_class_qualname.<locals>.Local"
