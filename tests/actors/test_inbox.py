"""The inbox in memory offers a wait the rows one pass over every row would, with the same times,
in the same order, whatever order rows come, go and carry times in."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors._inbox import Inbox
from persistence import CANCEL, CHILD, SIGNAL, InboxRow
from persistence._talk import REQUEST


def _one_pass(rows: list[InboxRow], names: tuple[str, ...], asks: tuple[str, ...]) -> tuple[Any, ...]:
    """What a step was offered by a pass over every row: the rows taken with their times (the
    latest time of the rows up to each), the latest time of all, the first cancel."""
    arrived = float("-inf")
    taken = []
    for r in rows:
        arrived = max(arrived, r.created_at)
        if r.kind == SIGNAL:
            if r.name in names:
                taken.append((r, arrived))
        elif r.kind == CHILD or (r.kind == REQUEST and r.name in asks):
            taken.append((r, arrived))
        elif r.kind == CANCEL:
            return None, None, r
    return taken, arrived, None


_ROW = st.tuples(
    st.integers(1, 60),  # seq
    st.sampled_from([SIGNAL, SIGNAL, SIGNAL, REQUEST, CHILD, CANCEL]),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([1.0, 2.0, 3.0, 5.0]),  # few times: ties and rows out of time order
)
_OP = st.one_of(
    st.tuples(st.just("add"), _ROW),
    st.tuples(st.just("remove"), st.sets(st.integers(1, 60), max_size=40)),
    st.tuples(st.just("merge"), st.lists(_ROW, max_size=6), st.sets(st.integers(1, 60), max_size=5)),
)
_NAMES = st.sampled_from([(), ("a",), ("b",), ("a", "c"), ("c", "b", "a")])


def _row(seq: int, kind: str, name: str, at: float) -> InboxRow:
    return InboxRow(seq, "w", kind, name, b"", at)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ROW, max_size=8), st.lists(_OP, max_size=30), _NAMES, _NAMES)
def test_the_inbox_offers_what_a_pass_over_every_row_offers(start: list[Any], ops: list[Any], names: Any, asks: Any) -> None:
    held: dict[int, InboxRow] = {}
    for t in start:
        held.setdefault(t[0], _row(*t))
    inbox = Inbox(sorted(held.values(), key=lambda r: r.seq))
    for op in ops:
        if op[0] == "add":
            row = _row(*op[1])
            inbox.add(row)
            held.setdefault(row.seq, row)
        elif op[0] == "remove":
            inbox.remove(op[1])
            held = {s: r for s, r in held.items() if s not in op[1]}
        else:
            rows = [_row(*t) for t in op[1]]
            inbox.merge(rows, op[2])
            for r in rows:
                if r.seq not in op[2]:
                    held.setdefault(r.seq, r)
        expected = sorted(held.values(), key=lambda r: r.seq)
        assert list(inbox) == expected
        taken, arrived, cancel = inbox.offer(names, asks)
        want_taken, want_arrived, want_cancel = _one_pass(expected, names, asks)
        assert cancel is want_cancel
        assert inbox.first_cancel() is next((r for r in expected if r.kind == CANCEL), None)
        if want_cancel is None:
            assert taken == want_taken
            assert arrived == want_arrived


def test_rows_held_in_time_order_are_offered_with_their_own_times() -> None:
    inbox = Inbox([_row(1, SIGNAL, "junk", 1.0), _row(2, SIGNAL, "a", 2.0), _row(3, CHILD, "c1", 2.0)])
    inbox.add(_row(5, SIGNAL, "a", 4.0))
    inbox.add(_row(4, REQUEST, "q", 3.0))
    taken, arrived, cancel = inbox.offer(("a",), ("q",))
    assert [(r.seq, at) for r, at in taken] == [(2, 2.0), (3, 2.0), (4, 3.0), (5, 4.0)]
    assert (arrived, cancel) == (4.0, None)
    # A row sent from a clock behind: it and those after it take the latest time before them.
    inbox.add(_row(6, SIGNAL, "a", 3.5))
    taken, arrived, _ = inbox.offer(("a",), ())
    assert [(r.seq, at) for r, at in taken] == [(2, 2.0), (3, 2.0), (5, 4.0), (6, 4.0)]
    inbox.remove({5})
    taken, arrived, _ = inbox.offer(("a",), ())
    assert [(r.seq, at) for r, at in taken] == [(2, 2.0), (3, 2.0), (6, 3.5)]
    assert arrived == 3.5
