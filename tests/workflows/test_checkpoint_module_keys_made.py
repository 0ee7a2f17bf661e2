"""A class or a function the workflow made and put as a key of a module dict (a handler
registry, ``HANDLERS[Circle] = ...``) is restored in a new interpreter as itself, never as the
key the new process's import put at that place.

The checkpoint writes such a local as its path in module data (the dict's key at its place) with
its value beside it, for a process where the path leads nowhere. It recorded only the type of the
object at the end (``type``, ``function``), so in a new interpreter, where the import put one
key of its own at that place (``{Existing: ...}``), the path led to that key, of the same type,
and the restore took it: the local ``Circle`` came back as the module's class ``Existing``, and
Circle's namespace was written onto it (``Existing.kind`` changed); with ``{object: ...}`` the
restore failed, writing onto ``object``. The reference now names the class or function it was
written for, and a place holding another one is a path leading nowhere: the local gets back the
value it held, as the rule for data a gone process added says.
"""

from __future__ import annotations

from workflows import timer, workflow
from workflows._compiler._pickle_modules import kind_matches, kind_of
from workflows.testing import WorkflowHarness

from .diffharness import resume_in_a_new_interpreter

MODULE = "tests.workflows.test_checkpoint_module_keys_made"


class Existing:
    kind = "existing"


HANDLERS: dict = {Existing: "e"}
BY_TYPE: dict = {object: "generic"}
def default_handler(n):
    return n


CALLBACKS: dict = {default_handler: "default"}


@workflow
async def registers_a_made_class():
    class Circle:
        kind = "circle"

    HANDLERS[Circle] = "circle"
    await timer("t", 1)
    return (Circle.__name__, Circle.kind, Circle is Existing, Existing.kind, HANDLERS.get(Circle))


@workflow
async def registers_a_made_class_beside_object():
    class Square:
        sides = 4

    BY_TYPE[Square] = "square"
    await timer("t", 1)
    return (Square.__name__, Square.sides, BY_TYPE.get(Square))


@workflow
async def registers_a_made_function():
    def on_hit(n):
        return n * 2

    CALLBACKS[on_hit] = "hit"
    await timer("t", 1)
    return (on_hit.__name__, on_hit(21), CALLBACKS.get(on_hit))


def _checkpoint(wf) -> bytes:
    h = WorkflowHarness(wf, roundtrip=False)
    return h.checkpoint()


def _resume(wf, **kw):
    return resume_in_a_new_interpreter(
        _checkpoint(wf), module=MODULE, workflow_type=wf.__workflow_key__, finish=True, **kw
    )


def test_a_made_class_keyed_in_a_module_dict_comes_back_as_itself_in_a_new_interpreter():
    native = WorkflowHarness(registers_a_made_class, native=True)
    native.fire_timer("t")
    assert native.result() == ("Circle", "circle", False, "existing", "circle")
    got = _resume(registers_a_made_class)
    # The new process's HANDLERS holds only Existing: Circle is the class it was, not Existing,
    # and Existing is untouched; HANDLERS of the new process never had Circle (data the gone
    # process added).
    assert got == ("Circle", "circle", False, "existing", None)


def test_a_made_class_keyed_beside_object_restores_in_a_new_interpreter():
    got = _resume(registers_a_made_class_beside_object, answer="outcome")
    assert got == ("finished", ("Square", 4, None))


def test_a_made_function_keyed_in_a_module_dict_comes_back_as_itself_in_a_new_interpreter():
    got = _resume(registers_a_made_function, answer="outcome")
    assert got == ("finished", ("on_hit", 42, None))


def test_in_the_same_process_the_registered_class_is_still_the_modules_key():
    h = WorkflowHarness(registers_a_made_class, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == ("Circle", "circle", False, "existing", "circle")


def test_the_kind_names_classes_and_functions_and_accepts_the_older_form():
    assert kind_of(Existing) == f"builtins.type {__name__}.Existing"
    assert kind_of(_checkpoint).startswith("builtins.function ")
    assert kind_of(HANDLERS) == "builtins.dict"
    assert kind_matches(Existing, kind_of(Existing))
    assert not kind_matches(object, kind_of(Existing))
    assert kind_matches(Existing, "builtins.type")  # checkpoints written before: the type alone
