"""A set whose elements hash through their class, restored in another process.

``hash((type(self), self.key))`` is a common ``__hash__``: a class hashes by its address, which is
the same after a restore in the process that made the checkpoint (the class comes back as itself)
and another one in any other process, also under the same ``PYTHONHASHSEED``. Such a set was
recorded with its exact table and, restored in another process with the same seed (as the
documentation advises for sets of strings), its table could not be rebuilt: the restore failed,
at every restart. It now comes back there with the same elements in that process's own order, as
a set of the module's functions or classes does; in the process that made it, exactly.
"""

from __future__ import annotations

import os
import pathlib
import pickle
import subprocess
import sys

from workflows import signal, workflow
from workflows.testing import WorkflowHarness

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Key:
    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        return type(other) is type(self) and other.k == self.k

    def __hash__(self):
        return hash((type(self), self.k))


@workflow
async def holds_a_set_of_keys_hashed_with_their_class(n):
    keys = {Key(i) for i in range(n)}
    keys.discard(Key(0))
    await signal("go")
    keys.add(Key(n))
    return sorted(k.k for k in keys), all(Key(i) in keys for i in range(1, n + 1))


CHILD = r"""
import pickle, sys
from workflows._compiler import restore, step
from workflows._context import StepContext
from workflows.testing import WorkflowHarness
from tests.workflows.test_checkpoint_set_class_hashes import holds_a_set_of_keys_hashed_with_their_class as wf
n = int(sys.argv[2])
if sys.argv[1] == "checkpoint":
    sys.stdout.buffer.write(WorkflowHarness(wf, n, roundtrip=False).checkpoint())
else:
    cont = restore(sys.stdin.buffer.read())
    with StepContext(workflow_id="w", workflow_type=wf.__workflow_key__, now=1.0).active():
        r = step(cont, send=None)
    sys.stdout.buffer.write(pickle.dumps(r.value))
"""


def _child(mode, n, data=b""):
    env = dict(os.environ, PYTHONHASHSEED="0")  # the same seed in every process
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(n)], input=data, capture_output=True,
        cwd=str(ROOT), env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc.stdout


def test_a_set_hashed_through_its_elements_class_restores_in_another_process():
    for n in (6, 40):
        got = pickle.loads(_child("restore", n, _child("checkpoint", n)))
        assert got == (list(range(1, n + 1)), True)


def test_in_the_process_that_made_it_the_set_comes_back_exactly():
    h = WorkflowHarness(holds_a_set_of_keys_hashed_with_their_class, 6, roundtrip=True)
    h.signal("go")
    assert h.result() == ([1, 2, 3, 4, 5, 6], True)
