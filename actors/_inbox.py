"""A workflow's inbox rows in memory: in the order of their seqs, and indexed by what takes them.

A game's workflow may hold thousands of rows it does not await now (signals of a name it awaits
later, or never). Each step asks which rows its wait takes; a pass over every row made that cost
grow with the rows held (5,000 held: 1.2 ms a step). The index answers from the rows of the names
awaited, and gives each the same time the pass gave it (see ``Inbox.offer``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from persistence import CANCEL, CHILD, SIGNAL, InboxRow
from persistence._talk import REQUEST

__all__ = ["Inbox"]

# Above this many rows removed at once, the rows and the index are rebuilt (one pass) rather
# than each row found and cut out (a search and a move of the rows after it, each).
_REBUILD_AT = 32


def _seq(row: InboxRow) -> int:
    return row.seq


class Inbox:
    """The rows, in the order of their seqs (the order they arrived in), without duplicates.

    Beside them: the signals and the asks by name, the children's outcomes and the cancels, each
    in the order of seqs, and ``descents``, how many neighbouring rows are out of time order (a
    row older than the one before it: rows' times come from their senders' clocks, which on a
    cluster are several). With none, each row's time is the latest time of the rows up to it.
    """

    __slots__ = ("rows", "_by_name", "_children", "_cancels", "_descents")

    def __init__(self, rows: Iterable[InboxRow] = ()) -> None:
        self.reset(rows)

    def reset(self, rows: Iterable[InboxRow]) -> None:
        """Hold ``rows`` (in the order of their seqs, without duplicates) instead."""
        self.rows: list[InboxRow] = list(rows)
        self._by_name: dict[tuple[str, str], list[InboxRow]] = {}
        self._children: list[InboxRow] = []
        self._cancels: list[InboxRow] = []
        self._descents = 0
        before = None
        for r in self.rows:
            self._index(r).append(r)
            if before is not None and before.created_at > r.created_at:
                self._descents += 1
            before = r

    def __iter__(self) -> Iterator[InboxRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        return bool(self.rows)

    def _index(self, row: InboxRow) -> list[InboxRow]:
        """The list of the index ``row`` belongs in (a throwaway one for a kind no step takes)."""
        kind = row.kind
        if kind == SIGNAL or kind == REQUEST:
            return self._by_name.setdefault((kind, row.name), [])
        if kind == CHILD:
            return self._children
        if kind == CANCEL:
            return self._cancels
        return []

    def add(self, row: InboxRow) -> None:
        """Put ``row`` in its place (by its seq), unless a row of that seq is there already. Rows
        mostly come in order; those that do not (a hundred children's outcomes, committed by other
        workflows' steps) cost a search, not a scan."""
        rows = self.rows
        if not rows or row.seq > rows[-1].seq:
            i = len(rows)
        else:
            i = bisect.bisect_left(rows, row.seq, key=_seq)
            if i < len(rows) and rows[i].seq == row.seq:
                return
        before = rows[i - 1] if i > 0 else None
        after = rows[i] if i < len(rows) else None
        if before is not None and after is not None and before.created_at > after.created_at:
            self._descents -= 1
        if before is not None and before.created_at > row.created_at:
            self._descents += 1
        if after is not None and row.created_at > after.created_at:
            self._descents += 1
        rows.insert(i, row)
        same = self._index(row)
        if not same or row.seq > same[-1].seq:
            same.append(row)
        else:
            same.insert(bisect.bisect_left(same, row.seq, key=_seq), row)

    def merge(self, rows: Iterable[InboxRow], skip: set[int]) -> None:
        """Add the rows of ``rows`` not held already whose seqs are not in ``skip``."""
        for r in rows:
            if r.seq not in skip:
                self.add(r)

    def remove(self, seqs: set[int]) -> None:
        """Drop the rows of these seqs (those held)."""
        if len(seqs) > _REBUILD_AT:
            self.reset([r for r in self.rows if r.seq not in seqs])
            return
        rows = self.rows
        for seq in seqs:
            i = bisect.bisect_left(rows, seq, key=_seq)
            if i == len(rows) or rows[i].seq != seq:
                continue
            row = rows[i]
            before = rows[i - 1] if i > 0 else None
            after = rows[i + 1] if i + 1 < len(rows) else None
            if before is not None and before.created_at > row.created_at:
                self._descents -= 1
            if after is not None and row.created_at > after.created_at:
                self._descents -= 1
            if before is not None and after is not None and before.created_at > after.created_at:
                self._descents += 1
            del rows[i]
            same = self._index(row)
            j = bisect.bisect_left(same, seq, key=_seq)
            if j < len(same) and same[j].seq == seq:
                del same[j]
                if not same and (row.kind == SIGNAL or row.kind == REQUEST):
                    del self._by_name[(row.kind, row.name)]

    def first_cancel(self) -> InboxRow | None:
        """The oldest cancel request held (None: none)."""
        return self._cancels[0] if self._cancels else None

    def offer(self, names: Iterable[str], asks: Iterable[str]) -> tuple[list[tuple[InboxRow, float]], float, InboxRow | None]:
        """What a wait on the signals ``names`` and the asks ``asks`` is offered: the rows it
        takes (the signals of those names, the asks of those, every child's outcome), each with
        its time, in the order of seqs; the latest time of all the rows; and the oldest cancel
        (None: none; what is taken is then not looked for).

        A row's time is the latest of the rows up to it (a row is never placed before one with a
        smaller seq, which was durable before it was sent). Where no row is older than the one
        before it, that is the row's own time, and the latest of all is the last row's: the rows
        of the names awaited are read from the index. Else one pass over every row says it.
        """
        rows = self.rows
        if self._cancels:
            return [], rows[-1].created_at if not self._descents else float("-inf"), self._cancels[0]
        if self._descents:
            return self._pass(set(names), set(asks))
        arrived = rows[-1].created_at if rows else float("-inf")
        lists = [self._children] if self._children else []
        for kind, wanted in ((SIGNAL, names), (REQUEST, asks)):
            for name in wanted:
                same = self._by_name.get((kind, name))
                if same:
                    lists.append(same)
        if not lists:
            return [], arrived, None
        taken = lists[0] if len(lists) == 1 else sorted((r for same in lists for r in same), key=_seq)
        return [(r, r.created_at) for r in taken], arrived, None

    def _pass(self, names: set[str], asks: set[str]) -> tuple[list[tuple[InboxRow, float]], float, InboxRow | None]:
        """``offer`` by one pass over every row (rows held out of time order)."""
        arrived = float("-inf")
        taken: list[tuple[InboxRow, float]] = []
        for r in self.rows:
            at = r.created_at
            if at > arrived:
                arrived = at
            kind = r.kind
            if kind == SIGNAL:
                if r.name in names:
                    taken.append((r, arrived))
            elif kind == CHILD or (kind == REQUEST and r.name in asks):
                taken.append((r, arrived))
        return taken, arrived, None
