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

from workflows import signal, workflow
from workflows.testing import WorkflowHarness

from .diffharness import resume_in_a_new_interpreter


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


def _restarted(n):
    """What the workflow returns, checkpointed in a new interpreter and resumed in another one."""
    wf = holds_a_set_of_keys_hashed_with_their_class
    how = dict(module=__name__, hash_seed=0)  # the same seed in every process
    blob = resume_in_a_new_interpreter(None, workflow=wf.__name__, args=(n,), **how)
    return resume_in_a_new_interpreter(blob, workflow_type=wf.__workflow_key__, **how)


def test_a_set_hashed_through_its_elements_class_restores_in_another_process():
    for n in (6, 40):
        got = _restarted(n)
        assert got == (list(range(1, n + 1)), True)


def test_in_the_process_that_made_it_the_set_comes_back_exactly():
    h = WorkflowHarness(holds_a_set_of_keys_hashed_with_their_class, 6, roundtrip=True)
    h.signal("go")
    assert h.result() == ([1, 2, 3, 4, 5, 6], True)
