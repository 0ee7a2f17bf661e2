"""Reproducers of checkpoint bugs found in the pickler, kept as regression tests.

They live in the pickler (``workflows/_compiler/_pickler.py``); a bug not yet fixed is marked
xfail(strict=True) here, and the differential corpus entries it makes diverge in
``test_differential.KNOWN_BUGS``. This module holds the reproducers that the in-process corpus
runs cannot show (a restore in a fresh process) and the cases around each fix.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

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
        """Made here."""

        size: int = 3
        tag = "x"

        def twice(self):
            return 2 * self.size

    await timer("t", 1)
    return (
        Local.__qualname__, Local.__name__, Local.__module__, Local.__doc__,
        Local.__annotations__, Local.tag, Local().twice(), repr(Local)[:-1],
    )


def _in_a_fresh_process(blob: bytes) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-c", CHILD], input=blob, capture_output=True, cwd=str(ROOT), env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    return out.stdout.decode().strip()


def test_class_made_in_a_workflow_keeps_its_qualname_in_a_fresh_process():
    h = WorkflowHarness(local_class_qualname, roundtrip=False)
    got = _in_a_fresh_process(h.checkpoint())
    qual = "local_class_qualname.<locals>.Local"
    assert got == repr((
        qual, "Local", __name__, "Made here.", {"size": "int"}, "x", 6, f"<class '{__name__}.{qual}'",
    ))


def test_class_made_in_a_workflow_keeps_its_qualname_in_process():
    h = WorkflowHarness(local_class_qualname)
    h.fire_timer("t")
    assert h.result()[0] == "local_class_qualname.<locals>.Local"
