"""A class made in a workflow whose base, made there too, has an ``__init_subclass__`` that
reads variables (of the workflow, or of a function that made the base) is refused at the await.

A restore in another process makes such a class anew, which runs the hook: the workflow's frame
is still empty then (its variables come back after the classes it holds), so the restore failed,
after the checkpoint had been accepted; and where the variables were back, the hook ran a second
time on what it had done to them. The checkpoint names the variable that holds the class, the
base, the hook and the variables it reads. A hook that reads none (``super()``, class keywords,
attributes of ``cls``) restores anywhere (corpus_probe2).
"""

from __future__ import annotations

import pytest

from workflows import CheckpointError, timer, workflow
from workflows.testing import WorkflowHarness

from .diffharness import resume_in_a_new_interpreter


def make_base():
    """A plugin base made by a function: its hook appends to the function's list."""
    registry = []

    class Plugin:
        def __init_subclass__(cls, **kw):
            super().__init_subclass__(**kw)
            registry.append(cls.__name__)

    return Plugin, registry


@workflow
async def hook_reads_a_workflow_variable():
    seen = []

    class Base:
        def __init_subclass__(cls, **kw):
            seen.append(cls.__name__)

    class Item(Base):
        pass

    await timer("t", 1)
    return seen, Item.__name__


@workflow
async def hook_reads_a_variable_of_the_function_that_made_the_base():
    plugin, registry = make_base()

    class Loader(plugin):
        pass

    await timer("t", 1)
    return registry, Loader.__name__


@workflow
async def subclass_held_in_a_list():
    seen = []

    class Base:
        @classmethod
        def __init_subclass__(cls):
            seen.append(cls.__name__)

    kinds = [type("Made", (Base,), {})]
    await timer("t", 1)
    return seen, kinds[0].__name__


@pytest.mark.parametrize(
    ("wf", "variable", "base", "reads"),
    [
        (hook_reads_a_workflow_variable, "Item", "Base", "seen"),
        (hook_reads_a_variable_of_the_function_that_made_the_base, "Loader", "Plugin", "registry"),
        (subclass_held_in_a_list, "kinds", "Base", "seen"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_a_subclass_whose_base_hook_reads_variables_is_refused_at_the_await(wf, variable, base, reads):
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(wf, roundtrip=True)
    err = info.value
    msg = str(err)
    assert err.variable == variable, msg
    assert err.location and "await timer(" in msg
    assert f"<locals>.{base}, made in the workflow too, whose __init_subclass__" in msg, msg
    assert f"({reads})" in msg, msg
    assert f"Define {base} at module level" in msg and "del the variable" in msg, msg


def test_the_workflow_runs_natively_and_without_checkpoints():
    h = WorkflowHarness(hook_reads_a_workflow_variable, roundtrip=False)
    h.fire_timer("t")
    assert h.result() == (["Item"], "Item")


# A class made in the workflow whose own methods the restore calls to rebuild its instances,
# reading variables of the workflow (back only after those instances): refused at the await.


@workflow
async def hash_reads_a_workflow_variable():
    salt = 7

    class Key:
        def __hash__(self):
            return hash(salt)

    table = {Key(): 1}
    await timer("t", 1)
    return len(table)


@workflow
async def new_reads_a_workflow_variable():
    color = "red"

    class Paint:
        def __new__(cls):
            obj = super().__new__(cls)
            obj.color = color
            return obj

    can = Paint()
    await timer("t", 1)
    return can.color


@workflow
async def exception_init_reads_a_workflow_variable():
    prefix = "E:"

    class Oops(Exception):
        def __init__(self, text):
            super().__init__(prefix + text)

    held = Oops("x")
    await timer("t", 1)
    return str(held)


@workflow
async def enum_with_an_alias():
    import enum

    class Mode(enum.Enum):
        ON = 1
        ENABLED = 1

    await timer("t", 1)
    return list(Mode.__members__)


@workflow
async def enum_whose_init_sets_attributes():
    import enum

    class Coin(enum.Enum):
        PENNY = 1
        DIME = 10

        def __init__(self, cents):
            self.label = f"{cents}c"

    c = Coin.DIME
    await timer("t", 1)
    return c.label


@workflow
async def eq_reads_a_workflow_variable_with_keys_that_hash_alike():
    eps = 0.5

    class Reading:
        def __init__(self, x):
            self.x = x

        def __hash__(self):
            return hash(round(self.x))

        def __eq__(self, o):
            return isinstance(o, Reading) and abs(self.x - o.x) < eps

    seen = {Reading(1.0): "first", Reading(1.2): "second"}  # equal: one key
    seen2 = {Reading(0.6): "a", Reading(1.4): "b"}  # same hash, not equal: __eq__ at restore
    await timer("t", 1)
    return sorted(seen.values()), sorted(seen2.values())


@workflow
async def eq_reads_a_workflow_variable_in_a_set_that_hashes_alike():
    eps = 0.5

    class Reading:
        def __init__(self, x):
            self.x = x

        def __hash__(self):
            return hash(round(self.x))

        def __eq__(self, o):
            return isinstance(o, Reading) and abs(self.x - o.x) < eps

    marks = {Reading(0.6), Reading(1.4), Reading(5.0)}
    await timer("t", 1)
    return len(marks)


@workflow
async def eq_reads_a_workflow_variable_with_keys_that_hash_apart():
    eps = 0.5

    class Reading:
        def __init__(self, x):
            self.x = x

        def __hash__(self):
            return hash(round(self.x))

        def __eq__(self, o):
            return isinstance(o, Reading) and abs(self.x - o.x) < eps

    seen = {Reading(1.0): "a", Reading(3.0): "b", Reading(5.0): "c"}
    await timer("t", 1)
    return sorted(seen.values()), Reading(3.1) in seen


def _value_in_a_new_process(wf, blob: bytes) -> str:
    """Restore ``blob`` (a checkpoint of ``wf``, of this module) in a new interpreter, step it to
    its end, and return the repr of its value as that interpreter made it."""
    return resume_in_a_new_interpreter(blob, module=__name__, workflow_type=wf.__workflow_key__,
                                       now=0.0, answer="repr")


def test_an_exception_made_in_the_workflow_whose_init_reads_it_is_kept_in_any_process():
    """A restore makes such an exception bare and gives it back its state: its ``__init__``,
    which reads a variable of the workflow not back yet, is not run (it was refused)."""
    h = WorkflowHarness(exception_init_reads_a_workflow_variable, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == "E:x"
    blob = WorkflowHarness(exception_init_reads_a_workflow_variable, roundtrip=False).checkpoint()
    assert _value_in_a_new_process(exception_init_reads_a_workflow_variable, blob) == repr("E:x")


def test_an_eq_reading_the_workflow_is_kept_where_no_two_keys_hash_alike():
    """A restore calls ``__eq__`` only where two keys hash alike: these keys do not."""
    h = WorkflowHarness(eq_reads_a_workflow_variable_with_keys_that_hash_apart, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == (["a", "b", "c"], True)


@pytest.mark.parametrize(
    ("wf", "variable", "says"),
    [
        (eq_reads_a_workflow_variable_with_keys_that_hash_alike, "seen2",
         "Reading.__eq__, made in the workflow, and it reads variables of the workflow (Reading, eps)"),
        (eq_reads_a_workflow_variable_in_a_set_that_hashes_alike, "marks",
         "Reading.__eq__, made in the workflow, and it reads variables of the workflow (Reading, eps)"),
        (hash_reads_a_workflow_variable, "Key", "Key, made in the workflow, has a __hash__ that reads variables of the workflow (salt)"),
        (new_reads_a_workflow_variable, "Paint", "Paint, made in the workflow, has a __new__ that reads variables of the workflow (color)"),
        (enum_with_an_alias, "Mode", "Mode, made in the workflow, has aliases (ENABLED)"),
        (enum_whose_init_sets_attributes, "Coin", "Coin, made in the workflow, sets its members up in __init__"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_a_class_whose_rebuild_runs_code_reading_the_workflow_is_refused(wf, variable, says):
    """Accepted before, and then the restore failed (a NameError from a free variable not back
    yet, an enum alias reassigned) or, in another process, lost what __init__ set."""
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(wf, roundtrip=True)
    msg = str(info.value)
    assert info.value.variable == variable, msg
    assert says in msg and "module level" in msg, msg


@workflow
async def frozen_dataclass_and_a_set_literal_test():
    import dataclasses

    @dataclasses.dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: int

    def known(word):
        return word in {"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"}

    p = Point(1, 2)
    await timer("t", 1)
    return p.x + p.y, known("beta"), known("omega")


def test_a_set_literal_in_a_function_made_in_the_workflow_is_kept_whatever_the_hash_seed():
    """The frozenset the compiler folds a set literal into (``x in {...}``, a frozen dataclass's
    generated methods on 3.12) is a constant of the function's code: kept without the check of
    the frozensets a workflow holds, which refused it in some processes, by their string hashes."""
    import os
    import subprocess
    import sys

    code = (
        "from workflows.testing import WorkflowHarness\n"
        "from tests.workflows.test_checkpoint_class_hooks import frozen_dataclass_and_a_set_literal_test as w\n"
        "h = WorkflowHarness(w, roundtrip=True)\n"
        "h.fire_timer('t')\n"
        "assert h.result() == (3, True, False), h.result()\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for seed in ("0", "2", "9", "24", "26"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=root)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, f"PYTHONHASHSEED={seed}:\n{out.stderr[-3000:]}"


@workflow
async def registry_on_a_local_base():
    class Base:
        registry = []

        def __init_subclass__(cls, tag="", **kw):
            super().__init_subclass__(**kw)
            cls.registry.append(cls.__name__)
            cls.tag = tag

    class A(Base, tag="a"):
        pass

    class B(Base):
        pass

    await timer("t", 1)
    return Base.registry, A.tag, B.tag


def test_the_hook_of_a_base_made_in_the_workflow_does_not_run_again_in_a_new_process():
    """A registry kept on the base (the refusal's own advice) and an attribute set from a class
    keyword come back as they were in a new process: the hook is not run a second time (the
    registry doubled) nor without its keywords (the restore failed)."""
    h = WorkflowHarness(registry_on_a_local_base, roundtrip=False)
    blob = h.checkpoint()
    assert _value_in_a_new_process(registry_on_a_local_base, blob) == repr((["A", "B"], "a", ""))


@workflow
async def a_step_changes_a_class_made_in_the_workflow():
    class K:
        n = 0
        items = []

    await timer("t", 1)
    K.n += 1
    K.items.append("x")
    K.seen = getattr(K, "seen", 0) + 1
    await timer("t", 1)
    return K.n, K.items, K.seen, sorted(k for k in vars(K) if not k.startswith("__"))


def test_a_step_run_again_from_a_checkpoint_finds_the_class_as_the_checkpoint_had_it():
    """A step rolled back and run again (a reducer raised) starts from the last checkpoint: the
    restore in the same process gives back the class itself, which kept an attribute the first
    attempt added (``K.seen`` counted both attempts)."""
    from workflows._compiler import restore, step
    from workflows._context import StepContext
    from workflows._step import Finished, Suspended

    wf = a_step_changes_a_class_made_in_the_workflow
    blob = WorkflowHarness(wf, roundtrip=False).checkpoint()
    for _attempt in range(2):
        cont = restore(blob)
        with StepContext(workflow_id="w", workflow_type=wf.__workflow_key__, now=0.0).active():
            r = step(cont, send=None)
        assert isinstance(r, Suspended), r
    with StepContext(workflow_id="w", workflow_type=wf.__workflow_key__, now=1.0).active():
        r = step(cont, send=None)
    assert isinstance(r, Finished), r
    assert r.value == (1, ["x"], 1, ["items", "n", "seen"])
