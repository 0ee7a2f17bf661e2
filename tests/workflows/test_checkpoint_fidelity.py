"""What a checkpoint keeps, and what it refuses, naming the variable, instead of changing it.

The differential corpus (``corpus_restore``) checks the kept state against native runs; these
tests pin the refusals (checked when checkpointing, not at the restore) and the details a
comparison of outcomes does not show: the traceback of a restored exception printed with the
user's lines, and the reduce of the project's own errors outside checkpoints.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import textwrap
import traceback

import pytest

from workflows import Cancelled, CheckpointError, ChildFailed, CompileError, ProcedureFailed
from workflows._compiler import checkpoint, compile_workflow_source, restore, step
from workflows._context import StepContext
from workflows._step import Raised, Suspended


def _compile(src: str, filename: str, name: str, **extra):
    import workflows

    g = {n: getattr(workflows, n) for n in workflows.__all__}
    g.update(extra)
    return compile_workflow_source(textwrap.dedent(src), filename, name, g)


def _suspend(wf, *args):
    cont = wf.start(*args)
    with StepContext().active():
        r = step(cont)
    assert isinstance(r, Suspended)
    return cont


class Mismatched(Exception):
    """An exception whose __init__ does not take its own args (it formats them into one)."""

    def __init__(self, a, b):
        super().__init__(f"{a}-{b}")
        self.a = a


class Defaulted(Exception):
    """One whose __init__ takes its own message too, given a default: called again with its
    args it makes another message (``"1 cannot trade 2 cannot trade None"``)."""

    def __init__(self, who, item=None):
        super().__init__(f"{who} cannot trade {item}")
        self.who, self.item = who, item
        self.calls = getattr(self, "calls", 0) + 1


class HoldsLock(Exception):
    """An exception holding what does not pickle."""


def test_an_exception_whose_init_formats_its_arguments_is_kept_as_it_was():
    """Pickle rebuilds an exception by calling its class with its args, which runs its own
    __init__ again on the message it made: refused when that __init__ needs more arguments, and,
    given a default, silently another message (and whatever else __init__ does, twice). Kept as
    it was: its args, attributes, notes and cause, its __init__ not run again."""
    wf = _compile(
        """
        async def keeps_formatted(x):
            try:
                raise Mismatched(x, 2)
            except Mismatched as e:
                kept = e
            other = Defaulted(x, "sword")
            other.add_note("at the market")
            other.__cause__ = kept
            await timer("t", 1)
            return kept, other
        """,
        "formatted_flow.py",
        "keeps_formatted",
        Mismatched=Mismatched,
        Defaulted=Defaulted,
    )
    cont = restore(checkpoint(_suspend(wf, 1)))
    with StepContext().active():
        r = step(cont, None)
    kept, other = r.value
    assert type(kept) is Mismatched and kept.args == ("1-2",) and kept.a == 1
    assert type(other) is Defaulted and other.args == ("1 cannot trade sword",)
    assert (other.who, other.item, other.calls) == (1, "sword", 1)
    assert other.__notes__ == ["at the market"] and other.__cause__ is kept
    assert str(other) == "1 cannot trade sword"


def test_pending_exception_that_cannot_be_pickled_names_the_finally():
    """A pending exception that cannot be kept, while a finally awaits, names the finally's slot."""
    import threading

    wf = _compile(
        """
        async def pending_unpicklable(x):
            try:
                raise HoldsLock(lock())
            finally:
                await timer("t", 1)
        """,
        "pending_unpicklable.py",
        "pending_unpicklable",
        HoldsLock=HoldsLock,
        lock=threading.Lock,
    )
    cont = _suspend(wf, 1)
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    assert "the pending completion of the finally at line 3" in str(info.value)


def test_file_opened_for_reading_is_refused_naming_the_variable():
    """An open file is a process resource: refused, never turned into a StringIO."""
    fd, path = tempfile.mkstemp(suffix=".txt")
    os.write(fd, b"hello")
    os.close(fd)
    try:
        wf = _compile(
            """
            async def reads_file(path):
                fh = open(path)
                first = fh.read(2)
                await timer("t", 1)
                return first + fh.read()
            """,
            "reads_file.py",
            "reads_file",
        )
        cont = _suspend(wf, path)
        with pytest.raises(CheckpointError) as info:
            checkpoint(cont)
        err = info.value
        assert err.variable == "fh"
        assert "TextIOWrapper" in str(err.value_type)
        assert "open file" in str(err) and "procedure" in str(err)
        cont._frames[0].__dict__["v_fh"].close()
    finally:
        os.unlink(path)


def test_dict_keys_changed_at_same_size_is_refused():
    """Keys removed and others added while a loop iterates (same size): refused, with a hint."""
    wf = _compile(
        """
        async def swaps_keys(d):
            for k in d:
                del d[k]
                d[k + "!"] = 1
                await timer("t", 1)
        """,
        "swaps_keys.py",
        "swaps_keys",
    )
    cont = _suspend(wf, {"a": 1, "b": 2})
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    msg = str(info.value)
    assert "the iterator of the for-loop at line 3" in msg
    assert "RuntimeError" in msg and "list(d.items())" in msg


def test_ordered_dict_reordered_while_a_loop_iterates_is_refused_saying_so():
    """An OrderedDict whose keys a loop's body moves (same keys, same size): refused, and the
    message says the keys were moved, not only removed and added."""
    import collections

    wf = _compile(
        """
        async def rotates(d):
            for k in d:
                d.move_to_end(k)
                await timer("t", 1)
        """,
        "rotates.py",
        "rotates",
    )
    cont = _suspend(wf, collections.OrderedDict(a=1, b=2))
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    msg = str(info.value)
    assert "the iterator of the for-loop at line 3" in msg
    assert "move_to_end" in msg and "RuntimeError" in msg


def test_dict_iterator_in_a_variable_after_a_size_change_is_refused():
    """A dict iterator held in a local whose dict changed size cannot be kept: refused."""
    wf = _compile(
        """
        async def holds_iterator(d):
            it = iter(d)
            next(it)
            d["new"] = 1
            await timer("t", 1)
            return list(it)
        """,
        "holds_iterator.py",
        "holds_iterator",
    )
    cont = _suspend(wf, {"a": 1, "b": 2})
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    assert info.value.variable == "it"
    assert "changed size" in str(info.value)


def test_restored_pending_exception_prints_the_users_lines():
    """After a restore, a pending exception's traceback prints the user's file, line and code."""
    wf = _compile(
        """
        async def fails_then_cleans(x):
            try:
                {}[x]
            finally:
                await timer("cleanup", 1)
        """,
        "fails_then_cleans.py",
        "fails_then_cleans",
    )
    cont = restore(checkpoint(_suspend(wf, "k")))
    with StepContext().active():
        r = step(cont, None)
    assert isinstance(r, Raised)
    text = "".join(traceback.format_exception(r.exception))
    assert 'File "fails_then_cleans.py", line 4, in fails_then_cleans' in text
    assert "{}[x]" in text


def test_a_function_made_in_the_workflow_keeps_its_file_across_a_restore():
    """A function a workflow made before an await is restored with its own file name (cloudpickle
    writes '<dynamic-code>'), so an error raised in it afterwards points at the user's line."""
    wf = _compile(
        """
        async def makes_a_helper(x):
            def helper(d):
                return d[x]
            await timer("t", 1)
            return helper({})
        """,
        "makes_a_helper.py",
        "makes_a_helper",
    )
    cont = restore(checkpoint(_suspend(wf, "k")))
    with StepContext().active():
        r = step(cont, None)
    assert isinstance(r, Raised)
    text = "".join(traceback.format_exception(r.exception))
    assert 'File "makes_a_helper.py", line 4, in helper' in text
    assert "<dynamic-code>" not in text


def test_uncaught_failed_command_points_at_the_await():
    """A failed command nobody catches ends with a traceback whose last line is the await."""
    wf = _compile(
        """
        async def awaits_procedure(x):
            y = 1
            return await timer("t", x) or y
        """,
        "awaits_procedure.py",
        "awaits_procedure",
    )
    for roundtrip in (False, True):
        cont = _suspend(wf, 1)
        if roundtrip:
            cont = restore(checkpoint(cont))
        with StepContext().active():
            r = step(cont, throw=Cancelled("stop"))
        assert isinstance(r, Raised)
        last = traceback.extract_tb(r.exception.__traceback__)[-1]
        assert (last.filename, last.lineno, last.name) == (
            "awaits_procedure.py",
            4,
            "awaits_procedure",
        )


@pytest.mark.parametrize(
    "err",
    [
        ProcedureFailed("p failed", procedure="m:p", attempts=2, error_type="E"),
        ChildFailed("c failed", child_id="c1"),
        Cancelled("stop"),
        CompileError("bad", "f.py", 3, 1, "x\n"),
    ],
    ids=["ProcedureFailed", "ChildFailed", "Cancelled", "CompileError"],
)
def test_project_errors_keep_notes_and_added_attributes_when_pickled(err):
    """The project's errors pickle with their notes and the attributes user code set."""
    err.add_note("while handling order 7")
    err.extra = 5
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
    assert back.__notes__ == ["while handling order 7"]
    assert back.extra == 5


def test_frozenset_whose_order_a_rebuild_changes_is_refused_naming_the_variable():
    """A frozenset made in the workflow that would come back in another order: refused."""
    wf = _compile(
        """
        async def keeps_frozenset(x):
            f = frozenset({23, 7, 15, 31})
            await timer("t", 1)
            return list(f)
        """,
        "keeps_frozenset.py",
        "keeps_frozenset",
    )
    cont = _suspend(wf, 1)
    assert list(cont._frames[0].__dict__["v_f"]) != list(frozenset(list(cont._frames[0].__dict__["v_f"])))
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    assert info.value.variable == "f"
    assert "frozenset" in str(info.value) and "order" in str(info.value)


@pytest.mark.parametrize("seed", range(4))
def test_restored_sets_iterate_in_their_order_or_are_refused(seed):
    """Sets of ints, strings and tuples, grown and thinned at random, come back in their order
    (also those a plain rebuild would reorder), or the checkpoint refuses them."""
    import pickle
    import random

    from workflows._compiler._pickler import dumps, loads

    rng = random.Random(seed)
    kept = reordered_by_pickle = 0
    refused: list = []
    for _ in range(40):
        s: set = set()
        for _ in range(rng.randrange(2, 60)):
            kind = rng.randrange(3)
            v = rng.randrange(-10**6, 10**6)
            s.add(v if kind == 0 else (str(v) if kind == 1 else (v, -v)))
            if rng.random() < 0.3:
                s.discard(rng.choice(list(s)))
        try:
            blob = dumps([s, s], {})
        except TypeError as e:
            assert "iteration order a restore cannot reproduce" in str(e)
            refused.append(s)
            continue
        back = loads(blob)
        assert back[0] is back[1]
        assert list(back[0]) == list(s) and back[0] == s
        kept += 1
        reordered_by_pickle += list(pickle.loads(pickle.dumps(s))) != list(s)
    assert kept >= 30 and reordered_by_pickle >= 5
    if refused:  # a refused set is named in the checkpoint's error
        wf = _compile(
            """
            async def holds_set(s):
                await timer("t", 1)
                return s
            """,
            "holds_set.py",
            "holds_set",
        )
        with pytest.raises(CheckpointError) as info:
            checkpoint(_suspend(wf, refused[0]))
        assert info.value.variable == "s" and "iteration order" in str(info.value)


def test_object_reached_through_module_data_whose_path_broke_comes_back_as_its_value():
    """A local holding an object reached through module data is that object after a restore
    while its path leads to it; where the path leads nowhere, or to an object of another type
    (the module's data changed, or a fresh process never had it), or, in the process that wrote
    the checkpoint, to another object put there since, the restore gives back the value the
    local held at the checkpoint instead of failing."""
    config = {"items": [1, 2], "other": {"rules": [[], []]}}
    wf = _compile(
        """
        async def holds_nested(x):
            items = CONFIG["items"]
            rule = CONFIG["other"]["rules"][1]
            await timer("t", 1)
            items.append(x)
            rule.append(x)
            return items
        """,
        "holds_nested.py",
        "holds_nested",
        CONFIG=config,
    )
    cont = _suspend(wf, 3)
    blob = checkpoint(cont)
    back = restore(blob)
    assert back._frames[0].__dict__["v_items"] is config["items"]
    assert back._frames[0].__dict__["v_rule"] is config["other"]["rules"][1]
    config["items"] = {"not": "a list"}
    back = restore(blob)
    assert back._frames[0].__dict__["v_items"] == [1, 2]
    assert back._frames[0].__dict__["v_rule"] is config["other"]["rules"][1]
    config["items"] = []
    del config["other"]["rules"][1]
    back = restore(blob)
    assert back._frames[0].__dict__["v_items"] == [1, 2]
    assert back._frames[0].__dict__["v_items"] is not config["items"]
    assert back._frames[0].__dict__["v_rule"] == [] and back._frames[0].__dict__["v_rule"] is not config["other"]["rules"][0]


def test_objects_of_another_modules_data_keep_their_identity_and_a_broken_path_gives_the_value():
    """A local holding ``moddata.ITEMS`` (a global of another user module the workflow's module
    imports) or an item of it is checkpointed as that path, not copied: after the restore it is
    the module's object; if the path breaks, the restore gives back the value it held."""
    from . import moddata

    moddata.reset()
    wf = _compile(
        """
        async def holds_other_modules_data(x):
            items = moddata.ITEMS
            first = moddata.ITEMS[0]
            await timer("t", 1)
            first["n"] = x
            return items
        """,
        "holds_other.py",
        "holds_other_modules_data",
        moddata=moddata,
    )
    blob = checkpoint(_suspend(wf, 3))
    back = restore(blob)
    assert back._frames[0].__dict__["v_items"] is moddata.ITEMS
    assert back._frames[0].__dict__["v_first"] is moddata.ITEMS[0]
    with StepContext().active():
        r = step(back, None)
    assert r.value is moddata.ITEMS and moddata.ITEMS[0] == {"n": 3}
    moddata.ITEMS[0] = ["not", "a", "dict"]
    try:
        back = restore(blob)
        assert back._frames[0].__dict__["v_first"] == {"n": 0}
        assert back._frames[0].__dict__["v_items"] is moddata.ITEMS
    finally:
        moddata.reset()


def test_data_of_a_module_reached_through_another_user_module_keeps_its_identity():
    """A local holding ``moddata.deep.DEEP`` (a user module the workflow's module reaches only
    through another user module) is the module's object after a restore, not a copy."""
    from . import moddata

    moddata.reset()
    wf = _compile(
        """
        async def holds_deep_data(x):
            deep = moddata.deep.DEEP
            await timer("t", 1)
            deep[0]["n"] = x
            return deep
        """,
        "holds_deep.py",
        "holds_deep_data",
        moddata=moddata,
    )
    back = restore(checkpoint(_suspend(wf, 5)))
    try:
        assert back._frames[0].__dict__["v_deep"] is moddata.deep.DEEP
        with StepContext().active():
            r = step(back, None)
        assert r.value is moddata.deep.DEEP and moddata.deep.DEEP == [{"n": 5}]
    finally:
        moddata.reset()


def test_module_data_too_large_to_walk_is_refused_naming_the_variable(monkeypatch):
    """Where the walk of module data stops at its budget, a local it did not find may still be
    module data (something other than the workflow holds it: here the test): the checkpoint is
    refused, naming the variable, instead of copying it."""
    from workflows._compiler import _pickle_modules

    config = {"rows": [[i] for i in range(50)]}
    wf = _compile(
        """
        async def holds_a_list(x):
            mine = [x]
            await timer("t", 1)
            return mine
        """,
        "holds_a_list.py",
        "holds_a_list",
        CONFIG=config,
    )
    cont = _suspend(wf, 3)
    assert restore(checkpoint(cont))._frames[0].__dict__["v_mine"] == [3]
    held = cont._frames[0].__dict__["v_mine"]
    monkeypatch.setattr(_pickle_modules, "_PATH_BUDGET", 10)
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    assert held == [3]
    assert info.value.variable == "mine"
    assert "more than 10 objects" in str(info.value) and "module-level data of 'workflow_source_" in str(info.value)


def test_a_global_rebound_after_a_checkpoint_is_kept_by_name_at_the_next():
    """The index of a module's globals is built once and reused while the namespace holds the
    same values: a global rebound since (the namespace's size unchanged) is found under its name
    at the next checkpoint, not copied."""
    class Marker:
        pass

    wf = _compile(
        """
        async def holds_marker(x):
            m = MARK
            await timer("t", 1)
            return m
        """,
        "holds_marker.py",
        "holds_marker",
        Marker=Marker,
        MARK=Marker(),
    )
    g = wf.__wrapped__.__globals__
    first = g["MARK"]
    assert restore(checkpoint(_suspend(wf, 1)))._frames[0].__dict__["v_m"] is first
    g["MARK"] = Marker()
    back = restore(checkpoint(_suspend(wf, 1)))
    assert back._frames[0].__dict__["v_m"] is g["MARK"] and g["MARK"] is not first
