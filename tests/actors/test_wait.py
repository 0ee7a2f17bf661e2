"""What a step stores of a wait: built fresh or remembered, the same bytes and texts."""

from __future__ import annotations

import json

from actors._wait import Arm, Wait, envelope, envelope_wait, stored_forms
from persistence import dumps, loads


def _signals(*names: str, mode: str = "one", at: str | None = "f.py:3 await signal('a')") -> Wait:
    return Wait(mode, [Arm(i, "signal", f"signal:{n}", n) for i, n in enumerate(names)], location=at)


def _built(wait: Wait) -> tuple[bytes, str, tuple[str, ...]]:
    return dumps(wait), wait.describe(), wait.signal_names()


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
    assert loads(stored_forms(g, fresh=True)[0]).results == {0: "x"}


def test_envelopes_old_and_new_give_the_wait() -> None:
    w = _signals("a")
    new = loads(dumps(envelope(b"blob", stored_forms(w, fresh=True)[0])))
    assert new["cont"] == b"blob" and envelope_wait(new) == w
    old = loads(dumps({"cont": b"blob", "wait": w}))  # as files written before hold it
    assert envelope_wait(old) == w
    assert envelope_wait({"cont": b"blob", "wait": None}) is None
    assert envelope_wait(envelope(b"blob", None)) is None
