"""What a step stores of a wait: built fresh or remembered, the same bytes and texts."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors._wait import Arm, Wait, pack_step, pack_wait, stored_forms, unpack_step
from persistence import dumps


def _signals(*names: str, mode: str = "one", at: str | None = "f.py:3 await signal('a')") -> Wait:
    return Wait(mode, [Arm(i, "signal", f"signal:{n}", n) for i, n in enumerate(names)], location=at)


def _built(wait: Wait) -> tuple[object, str, tuple[str, ...]]:
    return pack_wait(wait), wait.describe(), wait.signal_names()


def test_a_fresh_signal_wait_stores_what_it_would_build_each_time() -> None:
    first = stored_forms(_signals("a"), fresh=True)
    again = stored_forms(_signals("a"), fresh=True)
    assert first == again == _built(_signals("a"))
    assert json.loads(first[1]) == {"mode": "one", "at": "f.py:3 await signal('a')",
                                    "arms": [{"kind": "signal", "name": "signal:a"}]}
    assert first[2] == ("a",)
    # Every part of what is stored is part of what it is remembered by.
    variants = [_signals("b"), _signals("a", at="f.py:9 await signal('a')"),
                _signals("a", mode="select"), _signals("a", "b", mode="select"), _signals("a", at=None)]
    for w in variants:
        assert stored_forms(w, fresh=True) == _built(w) != first


def test_a_wait_that_is_not_fresh_is_built_as_it_is() -> None:
    """A wait with a done arm, results, or other arms is never taken from what was remembered."""
    stored_forms(_signals("a", "b", mode="select"), fresh=True)
    w = _signals("a", "b", mode="select")
    w.arms[0].done = True
    assert stored_forms(w) == _built(w)
    assert [a["name"] for a in json.loads(stored_forms(w)[1])["arms"]] == ["signal:b"]
    assert stored_forms(w)[2] == ("b",)
    timers = [Wait("one", [Arm(0, "timer", "timer:t", "t", due_at=due)]) for due in (1.0, 2.0)]
    assert [json.loads(stored_forms(t, fresh=True)[1])["arms"][0]["due_at"] for t in timers] == [1.0, 2.0]
    g = Wait("gather", [Arm(0, "signal", "signal:a", "a")], results={0: "x"})
    assert unpack_step(pack_step(b"c", stored_forms(g, fresh=True)[0]))[1].results == {0: "x"}


class Bid:
    """A value a gather's result may hold: not plain data (cloudpickle writes it)."""

    def __init__(self, amount: int) -> None:
        self.amount = amount


def test_a_step_envelope_gives_back_its_checkpoint_and_its_wait() -> None:
    """One pickle holds the checkpoint and the wait, whose arms come back as they were stored
    (results of any kind included); a workflow that waits on nothing stores no wait."""
    w = Wait("gather", [Arm(0, "timer", "t", "t", due_at=3.5, timer_id=7), Arm(1, "child", "c", "m:c", child_id="x/c",
                                                                               detached=True, done=True, spread=True),
                        Arm(2, "procedure", "p", "m:p", proc_key="k#1.2")],
             results={1: Bid(5)}, location="f.py:3")
    blob, back = unpack_step(pack_step(b"checkpoint", stored_forms(w)[0]))
    assert blob == b"checkpoint" and back is not None
    assert (back.mode, back.location, back.arms) == (w.mode, w.location, w.arms)
    assert list(back.results) == [1] and back.results[1].amount == 5
    assert unpack_step(pack_step(b"checkpoint", None)) == (b"checkpoint", None)


def test_a_step_envelope_written_before_it_was_one_pickle_still_reads() -> None:
    """Rows written with the wait pickled apart, in a dict, give the same checkpoint and wait."""
    w = _signals("a", "b", mode="select")
    old = dumps({"cont": b"blob", "wait_p": dumps(w)})
    assert unpack_step(old) == (b"blob", w)
    assert unpack_step(dumps({"cont": b"blob", "wait_p": None})) == (b"blob", None)
    with pytest.raises(ValueError, match="not a step envelope"):
        unpack_step(dumps([1, 2]))


def _reference(wait: Wait) -> str:
    """What ``describe`` returns, built the plain way."""
    items = []
    for a in wait.pending():
        d: dict[str, object] = {"kind": a.kind, "name": a.name}
        if a.kind == "timer":
            d["due_at"] = a.due_at
        elif a.kind == "procedure":
            d["function"] = a.target
            d["key"] = a.proc_key
        elif a.kind == "child":
            d["workflow_id"] = a.child_id
            d["type"] = a.target
        items.append(d)
    return json.dumps({"mode": wait.mode, "at": wait.location, "arms": items})


_texts = st.text(max_size=12)
_arms = st.one_of(
    st.builds(lambda n, t, due, done: Arm(0, "timer", n, t, due_at=due, done=done), _texts, _texts,
              st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers()), st.booleans()),
    st.builds(lambda n, t, done: Arm(0, "signal", n, t, done=done), _texts, _texts, st.booleans()),
    st.builds(lambda n, t, k, done: Arm(0, "procedure", n, t, proc_key=k, done=done), _texts, _texts,
              _texts, st.booleans()),
    st.builds(lambda n, t, c, done: Arm(0, "child", n, t, child_id=c, done=done), _texts, _texts,
              _texts, st.booleans()),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["one", "select", "gather"]), st.one_of(st.none(), _texts), st.lists(_arms, max_size=4))
def test_describe_is_the_json_of_the_pending_arms(mode: str, at: str | None, arms: list[Arm]) -> None:
    wait = Wait(mode, [Arm(i, a.kind, a.name, a.target, a.due_at, a.timer_id, a.proc_key, a.child_id,
                           a.detached, a.done) for i, a in enumerate(arms)], location=at)
    assert wait.describe() == _reference(wait)
    assert wait.describe() == _reference(wait)  # again, from the fragments remembered


def test_describe_reads_back_what_is_awaited() -> None:
    w = Wait("select", [Arm(0, "timer", "timeout", "timeout", due_at=12.5),
                        Arm(1, "procedure", "price", "shop:price", proc_key="wf#3.1"),
                        Arm(2, "child", "helper", "shop:helper", child_id="wf/helper-3.2"),
                        Arm(3, "signal", "bid", "bid", done=True)], location='shop.py:9 "quoted"')
    assert json.loads(w.describe()) == {
        "mode": "select", "at": 'shop.py:9 "quoted"',
        "arms": [{"kind": "timer", "name": "timeout", "due_at": 12.5},
                 {"kind": "procedure", "name": "price", "function": "shop:price", "key": "wf#3.1"},
                 {"kind": "child", "name": "helper", "workflow_id": "wf/helper-3.2", "type": "shop:helper"}],
    }


def _plain_fields(wait: Wait) -> tuple[object, ...]:
    arms = tuple((a.index, a.kind, a.name, a.target, a.due_at, a.timer_id, a.proc_key, a.child_id,
                  a.detached, a.done, a.spread) for a in wait.arms)
    return (wait.mode, wait.location, arms, dumps(wait.results) if wait.results else None)


def test_a_wide_gather_stores_every_arm_as_it_is_now_at_each_step() -> None:
    """What an arm stores and says is made once and kept on it (a gather of thousands of arms is
    stored whole at every step): a timer's id learnt after the commit, and an arm taken (a copy
    with ``done``), are stored as they are then, never as they were."""
    arms = [Arm(i, "timer", f"t{i}", f"t{i}", due_at=10.0 + i) for i in range(40)]
    wait = Wait("gather", arms, location="raid.py:7 await gather(...)")
    assert stored_forms(wait, fresh=True) == (_plain_fields(wait), _reference(wait), ())
    for i, a in enumerate(arms):
        a.timer_id = 100 + i  # known once the step that armed it committed
    assert pack_wait(wait) == _plain_fields(wait)
    for step in range(3):  # three timers fire, one step each
        arms = [dataclasses.replace(a, done=True) if a.index == step else a for a in arms]
        wait = Wait("gather", arms, {**wait.results, step: None}, wait.location)
        packed, described, names = stored_forms(wait)
        assert packed == _plain_fields(wait) and described == _reference(wait) and names == ()
        assert [a[9] for a in packed[2]][:4] == [i <= step for i in range(4)]
        assert [a[5] for a in packed[2]][:2] == [100, 101]
