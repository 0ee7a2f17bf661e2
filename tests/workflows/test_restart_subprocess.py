"""Continuations restored in a fresh interpreter resume exactly like in-process ones.

Every checkpoint taken while running the corpus is restored in one new Python process, which has
imported nothing: keys resolve through the registry by importing the corpus modules, as after a
real restart. Each restored continuation takes one step with the same reply, and the step's log
entries, effects and resulting command or outcome must equal the in-process step's.
"""

from __future__ import annotations

import pickle
import sys

import pytest

from workflows.testing import WorkflowHarness

from . import probes
from .corpus_index import CORPUS
from .diffharness import WORKFLOW_ID, Send, Throw, clock, norm, resume_in_a_new_interpreter
from .test_differential import CORPUS_MODULES  # noqa: F401 - loads the corpus


def _result(h: WorkflowHarness):
    if not h.done:
        return ("suspended", h.command)
    if h.exception is not None:
        return ("raised", type(h.exception).__qualname__, norm(h.exception.args))
    return ("finished", norm(h.value))


def _collect():
    items, expected, labels = [], [], []
    for entry in CORPUS:
        key = entry.wf.__workflow_key__
        if getattr(sys.modules[entry.wf.__module__], "IN_PROCESS_ONLY", False):
            continue  # reads back module data that its earlier steps changed
        for i, case in enumerate(entry.cases):
            if case.raises is TypeError:  # argument binding errors never suspend
                continue
            probes.reset_log()
            h = WorkflowHarness(
                entry.wf, *case.args, workflow_id=WORKFLOW_ID, workflow_type=key, now=clock(0)
            )
            history: list = []
            index = 0
            while not h.done and index < 60:
                index += 1
                blob = h.checkpoint()
                reply = case.oracle(h.command, history)
                history.append((h.command, reply))
                probes.reset_log()
                seen = len(h.effects)
                h.now = clock(index)
                if isinstance(reply, Throw):
                    h.throw(reply.exception)
                    items.append((blob, key, clock(index), "throw", reply.exception))
                else:
                    assert isinstance(reply, Send)
                    # (as sent: the step may change it, as a reply() marks its Request answered)
                    items.append((blob, key, clock(index), "send", pickle.dumps(reply.value)))
                    h.send(reply.value)
                expected.append((norm(probes.take_log()), h.effects[seen:], _result(h)))
                labels.append(f"{entry.name}-{i} step {index}")
    probes.reset_log()
    return items, expected, labels


@pytest.mark.timeout(900)  # the whole corpus (3,844 checkpoints), natively and in a new interpreter: 30 s alone
def test_restore_in_a_fresh_process_resumes_identically():
    """Every corpus checkpoint, restored in a new interpreter, takes the same next step."""
    items, expected, labels = _collect()
    assert len(items) > 300
    got = resume_in_a_new_interpreter(items, workflow_id=WORKFLOW_ID, answer="step")
    bad = [
        f"{label}: in-process {want!r} vs fresh process {have!r}"
        for label, want, have in zip(labels, expected, got, strict=True)
        if want != have
    ]
    assert not bad, "\n".join(bad[:10])
