"""What a wait says it waits for (``waiting_on``): the text is the same, built or remembered."""

from __future__ import annotations

import json

from actors._wait import Arm, Wait


def _signals(*names: str, mode: str = "one", at: str | None = "f.py:3 await signal('a')") -> Wait:
    return Wait(mode, [Arm(i, "signal", f"signal:{n}", n) for i, n in enumerate(names)], location=at)


def test_signal_waits_describe_the_same_each_time_and_differ_where_they_differ() -> None:
    first = _signals("a").describe()
    assert _signals("a").describe() == first
    assert json.loads(first) == {"mode": "one", "at": "f.py:3 await signal('a')",
                                 "arms": [{"kind": "signal", "name": "signal:a"}]}
    # Every part of the text is part of what it is remembered by.
    others = {_signals("b").describe(), _signals("a", at="f.py:9 await signal('a')").describe(),
              _signals("a", mode="select").describe(), _signals("a", "b", mode="select").describe(),
              _signals("a", at=None).describe()}
    assert first not in others and len(others) == 5
    # A done arm is not awaited any more, and not described.
    w = _signals("a", "b", mode="select")
    w.arms[0].done = True
    assert [a["name"] for a in json.loads(w.describe())["arms"]] == ["signal:b"]


def test_timer_waits_describe_their_due_time() -> None:
    texts = [Wait("one", [Arm(0, "timer", "timer:t", "t", due_at=due)]).describe() for due in (1.0, 2.0)]
    assert [json.loads(t)["arms"][0]["due_at"] for t in texts] == [1.0, 2.0]
