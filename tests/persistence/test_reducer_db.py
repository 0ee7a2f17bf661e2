"""The reducers' ``db`` (SPEC §9): the same calls give the same results on SQLite, where it is
``sqlite_utils.Database``, and on PostgreSQL, where it is ``PgDatabase`` on a psycopg connection.

Every test runs on both backends against the same expected values; ``test_the_same_script...``
also runs one script on both and compares what each call returned.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlite_utils
from sqlite_utils.db import NotFoundError


def _sqlite() -> tuple[Any, Callable[[], None]]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("BEGIN")
    return sqlite_utils.Database(conn, execute_plugins=False), conn.close


def _postgres(url: str) -> tuple[Any, Callable[[], None]]:
    import psycopg

    from persistence._pg._reducer_db import PgDatabase

    conn = psycopg.connect(url)  # not autocommit: everything below runs in one transaction

    def close() -> None:
        conn.rollback()
        conn.close()

    return PgDatabase(conn), close


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A reducer's db in an open transaction, on each backend."""
    if request.param == "sqlite":
        database, close = _sqlite()
    else:
        database, close = _postgres(request.getfixturevalue("pg_url"))
    try:
        yield database
    finally:
        close()


ROW = {
    "id": 1, "name": "axe", "weight": 2.5, "icon": b"\x00\x01", "rare": True,
    "tags": ["a", "b"], "stats": {"atk": 3},
}


def test_a_first_insert_creates_the_table_with_types_from_the_row(db: Any) -> None:
    db["items"].insert(ROW, pk="id")
    assert db["items"].exists()
    got = db["items"].get(1)
    assert got == {
        "id": 1, "name": "axe", "weight": 2.5, "icon": b"\x00\x01", "rare": 1,
        "tags": '["a", "b"]', "stats": '{"atk": 3}',
    }
    assert [type(got[k]) for k in ("id", "name", "weight", "icon", "rare")] == [
        int, str, float, bytes, int
    ]
    assert db["items"].count == 1


def test_an_integer_key_left_out_is_filled_in(db: Any) -> None:
    db["log"].create({"id": int, "text": str}, pk="id")
    assert db["log"].insert({"text": "one"}).last_pk == 1
    assert db["log"].insert({"text": "two"}).last_pk == 2
    db["log"].insert({"id": 10, "text": "ten"})
    assert db["log"].insert({"text": "after"}).last_pk == 11
    assert [r["text"] for r in db["log"].rows_where(order_by="id")] == ["one", "two", "ten", "after"]


def test_a_duplicate_key_raises_and_ignore_keeps_the_old_row(db: Any) -> None:
    db["t"].insert({"k": "a", "v": 1}, pk="k")
    db["t"].insert({"k": "a", "v": 2}, ignore=True)
    assert db["t"].get("a") == {"k": "a", "v": 1}
    assert db["t"].insert({"k": "b", "v": 3}, pk="k", ignore=True).last_pk == "b"
    with pytest.raises(Exception, match="(?i)unique|duplicate"):
        db["t"].insert({"k": "a", "v": 2})


def test_replace_puts_the_whole_new_row_in(db: Any) -> None:
    db["t"].insert({"k": "a", "v": 1, "w": "x"}, pk="k")
    db["t"].insert({"k": "a", "v": 2}, replace=True)
    assert db["t"].get("a") == {"k": "a", "v": 2, "w": None}
    assert db["t"].count == 1


def test_upsert_changes_only_the_columns_it_names(db: Any) -> None:
    db["t"].insert({"k": "a", "v": 1, "w": "x"}, pk="k")
    db["t"].upsert({"k": "a", "v": 5}, pk="k")
    db["t"].upsert({"k": "b", "w": "y"}, pk="k")
    assert list(db["t"].rows_where(order_by="k")) == [
        {"k": "a", "v": 5, "w": "x"}, {"k": "b", "v": None, "w": "y"},
    ]


def test_a_compound_key(db: Any) -> None:
    t = db["buffs"]
    t.upsert({"target": "orc", "buff": "haste", "stacks": 1}, pk=("target", "buff"))
    t.upsert({"target": "orc", "buff": "haste", "stacks": 2}, pk=("target", "buff"))
    t.upsert({"target": "elf", "buff": "haste", "stacks": 1}, pk=("target", "buff"))
    assert t.get(("orc", "haste"))["stacks"] == 2
    assert t.pks == ["target", "buff"]
    t.delete(("orc", "haste"))
    assert t.count == 1
    with pytest.raises(NotFoundError):
        t.get(("orc", "haste"))
    with pytest.raises(NotFoundError):
        t.get("orc")  # one value for two key columns


def test_upsert_all_with_a_key_twice_applies_both_in_order(db: Any) -> None:
    db["t"].create({"k": str, "v": int, "w": int}, pk="k")
    db["t"].insert({"k": "c", "v": 9, "w": 9})
    # Every row of a chunk writes every column the chunk names (NULL where a row has none).
    db["t"].upsert_all(
        [{"k": "a", "v": 1}, {"k": "a", "w": 2}, {"k": "b", "v": 3}, {"k": "c", "v": 4}], pk="k"
    )
    assert list(db["t"].rows_where(order_by="k")) == [
        {"k": "a", "v": None, "w": 2}, {"k": "b", "v": 3, "w": None}, {"k": "c", "v": 4, "w": None},
    ]


def test_update_and_delete_need_the_row(db: Any) -> None:
    db["t"].insert({"k": "a", "v": 1}, pk="k")
    db["t"].update("a", {"v": 7})
    assert db["t"].get("a")["v"] == 7
    with pytest.raises(NotFoundError):
        db["t"].update("zz", {"v": 1})
    with pytest.raises(NotFoundError):
        db["t"].delete("zz")
    db["t"].delete("a")
    assert db["t"].count == 0
    with pytest.raises(NotFoundError):
        db["t"].get("a")
    with pytest.raises(NotFoundError):
        db["missing"].get("a")


def test_rows_where(db: Any) -> None:
    db["t"].insert_all([{"id": i, "n": i * i, "s": f"r{i}"} for i in range(1, 8)], pk="id")
    t = db["t"]
    assert [r["id"] for r in t.rows_where("n > ? AND s != ?", [10, "r5"], order_by="id")] == [4, 6, 7]
    assert [r["id"] for r in t.rows_where(order_by="id desc", limit=2, offset=1)] == [6, 5]
    assert list(t.rows_where("id = ?", [3], select="n, s")) == [{"n": 9, "s": "r3"}]
    assert list(t.rows_where("s = :s", {"s": "r2"})) == [{"id": 2, "n": 4, "s": "r2"}]
    assert list(db["nothing_here"].rows_where()) == []


def test_create_with_defaults_not_null_and_if_not_exists(db: Any) -> None:
    t = db["chars"]
    assert not t.exists()
    t.create(
        {"id": str, "gold": int, "status": str, "hp": float}, pk="id",
        defaults={"gold": 0, "status": "alive"}, not_null={"status"}, if_not_exists=True,
    )
    db["chars"].create({"other": str}, pk="other", if_not_exists=True)  # exists: left alone
    db.execute("INSERT INTO chars (id) VALUES (?)", ["hero"])
    assert t.get("hero") == {"id": "hero", "gold": 0, "status": "alive", "hp": None}
    assert list(t.columns_dict) == ["id", "gold", "status", "hp"]
    with pytest.raises(Exception, match="(?i)null"):
        db.execute("INSERT INTO chars (id, status) VALUES (?, NULL)", ["villain"])


def test_creating_an_existing_table_raises(db: Any) -> None:
    db["t"].create({"k": str}, pk="k")
    with pytest.raises(Exception, match="(?i)already exists"):
        db["t"].create({"k": str}, pk="k")


def test_execute_and_query_with_question_marks(db: Any) -> None:
    db["t"].insert_all([{"id": i, "gold": 10 * i, "name": f"n{i}"} for i in range(1, 4)], pk="id")
    cur = db.execute("UPDATE t SET gold = gold + ? WHERE id = ?", [5, 1])
    assert cur.rowcount == 1
    assert cur.fetchone() is None
    # A ? and a % inside string literals are text, not placeholders.
    row = db.execute("SELECT '?', 'a%b', gold FROM t WHERE id = ?", [1]).fetchone()
    assert tuple(row) == ("?", "a%b", 15)
    assert db.execute("SELECT count(*) FROM t WHERE name LIKE 'n%'").fetchone()[0] == 3
    assert db.execute("SELECT sum(gold), avg(gold) FROM t").fetchone() == (65, 65 / 3)
    assert list(db.query("SELECT id, name FROM t WHERE gold >= ? ORDER BY id", [20])) == [
        {"id": 2, "name": "n2"}, {"id": 3, "name": "n3"},
    ]
    # A bool binds as 1 or 0, as sqlite3 binds it.
    db.execute("UPDATE t SET gold = ? WHERE id = ?", [True, 2])
    assert db["t"].get(2)["gold"] == 1
    assert db.execute("SELECT name FROM t WHERE id = :id", {"id": 3}).fetchall() == [("n3",)]


def test_first_chunk_decides_the_types(db: Any) -> None:
    db["t"].insert_all([{"a": 1, "b": "x"}, {"a": 2.5, "b": None}, {"a": True, "b": "y"}])
    assert [r["a"] for r in db["t"].rows_where(order_by="a")] == [1.0, 1.0, 2.5]
    assert db["t"].columns_dict["a"] in (float, "double precision")


def test_a_column_new_in_a_later_chunk_needs_alter(db: Any) -> None:
    rows = [{"id": i, "v": i} for i in range(150)] + [{"id": 150, "v": 1, "extra": "e"}]
    db["t"].insert_all(rows, pk="id", alter=True)
    assert db["t"].get(150) == {"id": 150, "v": 1, "extra": "e"}
    assert db["t"].count == 151
    with pytest.raises(Exception, match="(?i)column"):
        db["u"].insert_all(rows, pk="id")


def test_insert_all_of_nothing_creates_nothing(db: Any) -> None:
    db["t"].insert_all([])
    assert not db["t"].exists()


def _script(db: Any) -> list[Any]:
    """A reducer-shaped sequence of calls; what each returned."""
    out: list[Any] = []
    db["world_characters"].create(
        {"id": str, "name": str, "gold": int, "room": str}, pk="id", defaults={"gold": 0},
        if_not_exists=True,
    )
    db["world_mint"].create({"id": int, "player": str, "amount": int}, pk="id", if_not_exists=True)
    for pid in ("ann", "bob"):
        db["world_characters"].insert({"id": pid, "name": pid.title(), "room": "village"})
        db.execute("UPDATE world_characters SET gold = gold + ? WHERE id = ?", [100, pid])
        out.append(db["world_mint"].insert({"player": pid, "amount": 100}).last_pk)
    cur = db.execute("UPDATE world_characters SET gold = gold - ? WHERE id = ? AND gold >= ?",
                     [30, "ann", 30])
    out.append(cur.rowcount)
    out.append(db.execute("SELECT id, gold FROM world_characters ORDER BY id").fetchall())
    out.append(db.execute("SELECT sum(amount) FROM world_mint").fetchone())
    db["world_characters"].upsert({"id": "bob", "room": "cave"}, pk="id")
    out.append(db["world_characters"].get("bob"))
    out.append(list(db.query("SELECT player, amount FROM world_mint ORDER BY id")))
    out.append(db["world_mint"].count)
    db["world_characters"].update("ann", {"room": "inn"})
    out.append(list(db["world_characters"].rows_where("room != ?", ["village"], order_by="id")))
    db["world_characters"].delete("bob")
    out.append(sorted(r["id"] for r in db["world_characters"].rows))
    out.append(db.execute("SELECT 1 FROM world_characters WHERE id = ?", ["bob"]).fetchone())
    return [list(map(tuple, o)) if isinstance(o, list) and o and isinstance(o[0], tuple) else o
            for o in out]


def test_the_same_script_gives_the_same_results_on_both(pg_url: str) -> None:
    results = []
    for make in (_sqlite, lambda: _postgres(pg_url)):
        database, close = make()
        try:
            results.append(_script(database))
        finally:
            close()
    assert results[0] == results[1]
    assert results[0][0:2] == [1, 2]  # the mint's ids, filled in


# -- PostgreSQL only -------------------------------------------------------------------------------


def test_placeholders_are_translated_outside_literals_only() -> None:
    from persistence._pg._reducer_db import translate

    assert translate("SELECT ? FROM t WHERE a = ? AND b = 'x?y'") == (
        "SELECT %s FROM t WHERE a = %s AND b = 'x?y'"
    )
    assert translate("SELECT 'it''s ?', \"col?\" FROM t WHERE c LIKE 'a%' AND d = ?") == (
        "SELECT 'it''s ?', \"col?\" FROM t WHERE c ILIKE 'a%%' AND d = %s"
    )
    assert translate("SELECT ? -- a comment?\n, ? /* another? */") == (
        "SELECT %s -- a comment?\n, %s /* another? */"
    )
    assert translate("SELECT $$a ? b$$, $q$?$q$, ?") == "SELECT $$a ? b$$, $q$?$q$, %s"
    assert translate("SELECT x::int FROM t WHERE a = :a AND b = ':b'", named=True) == (
        "SELECT x::int FROM t WHERE a = %(a)s AND b = ':b'"
    )
    assert translate("SELECT 5 % 2") == "SELECT 5 %% 2"
    assert translate("SELECT `a b`, `q\"%` FROM `t` WHERE x = '`'") == (
        "SELECT \"a b\", \"q\"\"%%\" FROM \"t\" WHERE x = '`'"
    )
    with pytest.raises(ValueError, match="numbered placeholders"):
        translate("SELECT ?1")


def test_calls_outside_the_portable_subset_say_so(pg_url: str) -> None:
    database, close = _postgres(pg_url)
    try:
        with pytest.raises(TypeError, match="foreign_keys=.*portable subset"):
            database["t"].insert({"a": 1}, foreign_keys=[("a", "other")])
        with pytest.raises(ValueError, match="column 'a' has type"):
            database["t"].create({"a": object})
        with pytest.raises(TypeError, match="wrap a single value in a list"):
            database.execute("SELECT ?", "x")
    finally:
        close()


def test_a_rolled_back_table_is_forgotten(pg_url: str) -> None:
    database, close = _postgres(pg_url)
    try:
        database["t"].insert({"a": 1})
        assert database["t"].exists()
        database.conn.rollback()
        database.forget()
        assert not database["t"].exists()
        database["t"].insert({"a": "text now"})
        assert database["t"].columns_dict == {"a": "text"}
    finally:
        close()


@pytest.mark.parametrize("make", ["insert", "create", "alter"])
def test_two_transactions_making_one_table_at_once_both_commit(pg_url: str, make: str) -> None:
    """The first inserts of two nodes (or two batches) into a table nobody has made yet: the
    second waits for the first's table and writes into it, instead of failing on PostgreSQL's
    catalog (a unique violation of pg_type) once the first commits. The same for a column that
    two ``insert(..., alter=True)`` add at once."""
    import threading
    import time

    import psycopg

    def write(database: Any) -> None:
        if make == "create":
            database["t"].create({"id": int, "who": str}, pk="id", if_not_exists=True)
            database["t"].insert({"who": "x"})
        elif make == "alter":
            database["t"].insert({"who": "x", "new": 1}, alter=True)
        else:
            database["t"].insert({"who": "x"})

    first, close_first = _postgres(pg_url)
    second, close_second = _postgres(pg_url)
    errors: list[BaseException] = []

    def second_writes() -> None:
        try:
            write(second)
            second.conn.commit()
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            errors.append(e)

    if make == "alter":
        with psycopg.connect(pg_url) as setup:
            setup.execute('CREATE TABLE t (who text)')
    try:
        write(first)
        thread = threading.Thread(target=second_writes)
        thread.start()
        with psycopg.connect(pg_url, autocommit=True) as watch:
            deadline = time.monotonic() + 10
            while not watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database()"
            ).fetchone()[0]:  # type: ignore[index]
                assert time.monotonic() < deadline, "the second transaction never waited"
                time.sleep(0.01)
        first.conn.commit()
        thread.join(10)
        assert not thread.is_alive()
        assert errors == []
        with psycopg.connect(pg_url) as check:
            assert check.execute("SELECT who FROM t").fetchall() == [("x",), ("x",)]
    finally:
        close_first()
        close_second()


def test_a_fraction_for_a_column_made_from_an_int_is_kept_or_refused_never_rounded(db: Any) -> None:
    """A column made from an int is an INTEGER column: SQLite keeps 12.75 in it as it is,
    PostgreSQL (bigint) would round it to 13, so there it is refused, naming the column; a
    whole float is the int on both."""
    t = db["prices"]
    t.insert({"id": 1, "price": 10}, pk="id")
    t.insert({"id": 2, "price": 12.0}, pk="id")
    if isinstance(db, sqlite_utils.Database):
        t.insert({"id": 3, "price": 12.75}, pk="id")
        t.update(1, {"price": 0.5})
        assert [r["price"] for r in t.rows] == [0.5, 12, 12.75]
        return
    with pytest.raises(ValueError, match=r"column 'price' of table 'prices' holds integers .* round 12.75 to 13"):
        t.insert({"id": 3, "price": 12.75}, pk="id")
    with pytest.raises(ValueError, match="round 0.5"):
        t.update(1, {"price": 0.5})
    assert [r["price"] for r in t.rows] == [10, 12]


def test_text_columns_compare_and_sort_by_bytes_as_on_sqlite(pg_url: str) -> None:
    """SQLite compares text by its bytes; PostgreSQL by the database's locale (where "a" < "B"),
    unless the column says otherwise: the text columns the reducer db makes say "C"."""
    database, close = _postgres(pg_url)
    try:
        database["t"].insert({"id": 1, "s": "x"}, pk="id")
        database["t"].insert({"id": 2, "s": "y", "later": "z"}, alter=True)
        database["u"].create({"k": str, "n": int}, pk="k")
        got = database.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND data_type = 'text' ORDER BY 1, 2"
        ).fetchall()
        assert got == [("t", "later", "C"), ("t", "s", "C"), ("u", "k", "C")]
    finally:
        close()


def test_the_stores_read_table_takes_a_with_query(store: Any) -> None:
    """``read_table`` reads application tables through the same query() on a connection in
    autocommit (PostgreSQL), where no savepoint can be; a WITH query's columns are named as
    SQLite names them."""
    got = store.read_table(
        "WITH x AS (SELECT 1 AS a, 'select' AS b), y(c) AS (SELECT 2) "
        "SELECT a, count(*), max(c) AS Top FROM x, y GROUP BY a"
    )
    assert got == [{"a": 1, "count(*)": 1, "Top": 2}]
