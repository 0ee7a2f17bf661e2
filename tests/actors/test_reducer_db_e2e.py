"""A reducer's ``db`` through a real workflow, on each backend (SPEC §9): the same reducer code
gives the same rows, and a reducer that raises midway leaves nothing of its step behind."""

from __future__ import annotations

import re
from typing import Any

import pytest

from workflows import WorkflowFailed, reducer, signal, workflow

from .runtime_support import connect

T = 30
FAILS: dict[str, int] = {}


@reducer
def stock(db: Any, tag: str) -> None:
    db["e2e_items"].create(
        {"id": int, "tag": str, "name": str, "qty": int, "meta": str}, pk="id", if_not_exists=True
    )
    db["e2e_items"].insert({"tag": tag, "name": "axe", "qty": 1, "meta": {"k": [1]}})
    db["e2e_items"].upsert({"id": 5000 - len(tag), "tag": tag, "name": "bow", "qty": 2}, pk="id")
    got = db.query("UPDATE e2e_items SET qty = qty + ? WHERE tag = ? AND name = 'axe' RETURNING qty",
                   [4, tag])
    assert [r["qty"] for r in got] == [5]
    try:
        db.query("UPDATE e2e_items SET qty = 0")  # no rows: refused, and undone
    except ValueError as exc:
        assert "query() can only be used with SQL that returns rows" in str(exc)
    else:
        raise AssertionError("query() took a statement without rows")
    try:  # a failed query() is undone on its own, on both: the reducer goes on
        db.query("INSERT INTO e2e_items (id, tag, name) VALUES (?, ?, 'dup') RETURNING id",
                 [5000 - len(tag), tag])
    except Exception as exc:  # noqa: BLE001
        assert "UNIQUE" in str(exc) or "duplicate key" in str(exc), exc
    else:
        raise AssertionError("a duplicate key went in")


@reducer
def half_then_raise(db: Any, tag: str, times: int) -> None:
    """Writes, then raises (the first ``times`` calls), then writes again."""
    db["e2e_items"].insert({"tag": tag, "name": "half", "qty": 0})
    db.execute("UPDATE e2e_items SET qty = qty * 10 WHERE tag = ?", [tag])
    n = FAILS.get(tag, 0)
    FAILS[tag] = n + 1
    if n < times:
        raise RuntimeError(f"reducer {tag} fails midway (call {n + 1})")
    db["e2e_items"].insert({"tag": tag, "name": "whole", "qty": 0})


@workflow
async def shop(tag: str, times: int) -> list[Any]:
    reducer(stock, tag)
    await signal("go")
    reducer(stock, tag + "+")
    reducer(half_then_raise, tag, times)
    await signal("again")
    return ["done"]


def _rows(db: str, tag: str) -> list[tuple[Any, ...]]:
    con = connect(db)
    try:
        cur = con.execute(
            "SELECT tag, name, qty, meta FROM e2e_items WHERE tag LIKE '" + tag + "%' "
            "ORDER BY tag, name"
        )
        return [tuple(r) for r in cur.fetchall()]
    finally:
        con.close()


def test_reducer_writes_are_the_same_and_a_reducer_raising_midway_rolls_its_step_back(
    system: Any, db: str, clock: Any
) -> None:
    tag = "t" + str(len(db) % 7)
    FAILS.pop(tag, None)
    ref = system.start(shop, tag, 2)
    system.idle(timeout=T)
    first = [(tag, "axe", 5, '{"k": [1]}'), (tag, "bow", 2, None)]
    assert _rows(db, tag) == first
    ref.signal("go")
    system.idle(timeout=T)
    clock.advance(1)  # the step with the failing reducer restarts, with backoff
    system.idle(timeout=T)
    clock.advance(5)
    system.idle(timeout=T)
    assert FAILS[tag] == 3
    # The two failed attempts left nothing (neither stock(tag+"+") nor the half of the other);
    # the third committed the whole step once.
    assert _rows(db, tag) == [
        (tag, "axe", 50, '{"k": [1]}'), (tag, "bow", 20, None), (tag, "half", 0, None),
        (tag, "whole", 0, None),
        (tag + "+", "axe", 5, '{"k": [1]}'), (tag + "+", "bow", 2, None),
    ]
    ref.signal("again")
    assert ref.result(timeout=T) == ["done"]


CAUGHT: list[str] = []


@reducer
def catches_a_duplicate(db: Any, tag: str) -> None:
    """Catches the error of a duplicate key and goes on, as SQLite allows."""
    db["e2e_caught"].insert({"id": tag, "v": 1}, pk="id", replace=True)
    try:
        db["e2e_caught"].insert({"id": tag, "v": 2})
    except Exception as exc:  # noqa: BLE001
        CAUGHT.append(type(exc).__name__)
    db["e2e_caught"].insert({"id": tag + "-after", "v": 3}, pk="id", replace=True)


@workflow
async def catcher(tag: str) -> str:
    reducer(catches_a_duplicate, tag)
    return "ok"


def test_a_reducer_going_on_after_a_caught_error(system: Any, db: str, clock: Any) -> None:
    """SQLite goes on after a failed statement; PostgreSQL cannot (the error aborted the
    transaction): the step fails with a message that says so, naming the first error, and
    nothing of it is written."""
    CAUGHT.clear()
    ref = system.start(catcher, "c")
    system.idle(timeout=T)
    clock.advance(60)
    system.idle(timeout=T)
    con = connect(db)
    try:
        if not db.startswith("postgresql://"):
            assert ref.result(timeout=T) == "ok"
            assert CAUGHT == ["IntegrityError"]
            assert con.execute("SELECT id, v FROM e2e_caught ORDER BY id").fetchall() == [
                ("c", 1), ("c-after", 3)
            ]
            return
        with pytest.raises(WorkflowFailed) as ei:
            ref.result(timeout=T)
        assert set(CAUGHT) == {"UniqueViolation"}
        assert re.search(
            r"InFailedSqlTransaction: an earlier statement of this transaction failed "
            r"\(UniqueViolation: duplicate key .*\) and the reducer went on after catching it: "
            r"on PostgreSQL that error aborted the whole transaction",
            ei.value.error_message,
        )
        assert con.execute("SELECT to_regclass('e2e_caught') IS NULL").fetchone()[0]
    finally:
        con.close()


@reducer
def catches_then_uses_another_table(db: Any, tag: str, then: str) -> None:
    """Catches the error of a duplicate key, then goes on with a table this transaction has not
    touched yet (its shape is read first), or lists the tables."""
    db["e2e_caught2"].insert({"id": tag, "v": 1}, pk="id", replace=True)
    try:
        db["e2e_caught2"].insert({"id": tag, "v": 2})
    except Exception as exc:  # noqa: BLE001
        CAUGHT.append(type(exc).__name__)
    if then == "table_names":
        db.table_names()
    else:
        db["e2e_caught_log"].insert({"id": tag, "what": "after"}, pk="id")


@workflow
async def catcher_then(tag: str, then: str) -> str:
    reducer(catches_then_uses_another_table, tag, then)
    return "ok"


@pytest.mark.parametrize("then", ["new_table", "table_names"])
def test_a_reducer_going_on_after_a_caught_error_with_another_table(system: Any, db: str, clock: Any, then: str) -> None:
    """What the reducer does after the caught error reads the database's catalog first (the
    shape of a table it had not touched, the list of tables): on PostgreSQL the step's message
    names the first error all the same."""
    CAUGHT.clear()
    ref = system.start(catcher_then, "c", then)
    system.idle(timeout=T)
    clock.advance(60)
    system.idle(timeout=T)
    if not db.startswith("postgresql://"):
        assert ref.result(timeout=T) == "ok"
        return
    with pytest.raises(WorkflowFailed) as ei:
        ref.result(timeout=T)
    assert re.search(
        r"InFailedSqlTransaction: an earlier statement of this transaction failed "
        r"\(UniqueViolation: duplicate key .*\) and the reducer went on after catching it",
        ei.value.error_message,
    ), ei.value.error_message
