"""The reducers' ``db``, differentially (SPEC §9): each script below runs against a real
``sqlite_utils.Database`` on a SQLite file and against ``PgDatabase`` in a transaction on the test
server, and every call's result, and every exception's kind, must be the same on both.

Where PostgreSQL cannot do what SQLite does, ``PG_REFUSES`` names the script: there PostgreSQL
must give the same results up to one call, and that call must raise the error named, whose
message must say why (never a silently different result).
"""

from __future__ import annotations

import datetime
import decimal
import re
import sqlite3
import types
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import sqlite_utils
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Op = Callable[[Any], Any]

SCRIPTS: dict[str, list[Op]] = {
    "pk_str": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].insert({"k": "a", "v": 2}, pk="k")],
    "pk_compound_list": [lambda db: db["t"].insert({"a": 1, "b": "x", "v": 1}, pk=["a", "b"]), lambda db: db["t"].get((1, "x")), lambda db: db["t"].get([1, "x"]), lambda db: db["t"].pks, lambda db: db["t"].insert({"a": 1, "b": "x", "v": 5}, pk=["a","b"], replace=True), lambda db: db["t"].get((1,"x"))],
    "pk_omitted": [lambda db: db["t"].insert({"v": 1}), lambda db: db["t"].insert({"v": 2}).last_pk, lambda db: db["t"].last_rowid, lambda db: db["t"].pks, lambda db: db["t"].get(1)],
    "pk_omitted_rows": [lambda db: db["t"].insert({"v": 1}), lambda db: list(db["t"].rows), lambda db: db.query("select * from t")],
    "pk_omitted_delete": [lambda db: db["t"].insert({"v": 1}), lambda db: db["t"].delete(1)],
    "pk_omitted_update": [lambda db: db["t"].insert({"v": 1}), lambda db: db["t"].update(1, {"v": 3})],
    "replace_new": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k", replace=True), lambda db: db["t"].insert({"k": "a", "v": 2}, pk="k", replace=True), lambda db: list(db["t"].rows)],
    "ignore_new": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k", ignore=True), lambda db: db["t"].insert({"k": "a", "v": 2}, pk="k", ignore=True).last_pk, lambda db: list(db["t"].rows)],
    "replace_and_ignore": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k", replace=True, ignore=True)],
    "replace_and_ignore_existing": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k", replace=True, ignore=True)],
    "replace_nopk": [lambda db: db["t"].insert({"k": "a", "v": 1}), lambda db: db["t"].insert({"k": "a", "v": 2}, replace=True), lambda db: list(db["t"].rows)],
    "ignore_nopk": [lambda db: db["t"].insert({"k": "a", "v": 1}), lambda db: db["t"].insert({"k": "a", "v": 2}, ignore=True), lambda db: list(db["t"].rows)],
    "extra_col": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].insert({"k": "b", "w": 1})],
    "extra_col_alter": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].insert({"k": "b", "w": 1.5}, alter=True), lambda db: list(db["t"].rows), lambda db: db["t"].columns_dict],
    "insert_all_differing": [lambda db: db["t"].insert_all([{"a": 1}, {"b": "x"}, {"a": 2, "c": 3.0}]), lambda db: list(db["t"].rows)],
    "insert_all_differing_pk": [lambda db: db["t"].insert_all([{"id": 1, "a": 1}, {"id": 2, "b": "x"}], pk="id"), lambda db: list(db["t"].rows)],
    "insert_all_differing_existing": [lambda db: db["t"].create({"id": int, "a": int, "b": str}, pk="id"), lambda db: db["t"].insert_all([{"id": 1, "a": 1}, {"id": 2, "b": "x"}]), lambda db: list(db["t"].rows)],
    "upsert_creates": [lambda db: db["t"].upsert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].upsert({"k": "a", "w": 2}, pk="k"), lambda db: list(db["t"].rows)],
    "upsert_creates_alter": [lambda db: db["t"].upsert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].upsert({"k": "a", "w": 2}, pk="k", alter=True), lambda db: list(db["t"].rows)],
    "upsert_nopk": [lambda db: db["t"].upsert({"k": "a", "v": 1})],
    "upsert_nopk_existing": [lambda db: db["t"].create({"k": str, "v": int}, pk="k"), lambda db: db["t"].upsert({"k": "a", "v": 1}), lambda db: db["t"].upsert({"k": "a", "v": 2}).last_pk, lambda db: list(db["t"].rows)],
    "upsert_compound": [lambda db: db["t"].upsert({"a": 1, "b": 2, "v": 1}, pk=("a","b")).last_pk, lambda db: db["t"].upsert({"a": 1, "b": 2, "v": 3}, pk=("a","b")).last_pk, lambda db: list(db["t"].rows)],
    "update_missing": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].update("zz", {"v": 2})],
    "update_missing_table": [lambda db: db["t"].update("zz", {"v": 2})],
    "update_newcol": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].update("a", {"w": 2})],
    "update_newcol_alter": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].update("a", {"w": 2}, alter=True), lambda db: list(db["t"].rows)],
    "update_empty": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].update("a", {}).last_pk, lambda db: db["t"].update("a").last_pk],
    "update_json": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].update("a", {"v": [1, 2]}), lambda db: list(db["t"].rows)],
    "delete_missing": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].delete("zz")],
    "delete_missing_table": [lambda db: db["t"].delete("zz")],
    "delete_ok": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].delete("a").last_pk, lambda db: db["t"].count],
    "get_compound_tuple": [lambda db: db["t"].insert({"a": 1, "b": "x", "v": 1}, pk=("a", "b")), lambda db: db["t"].get((1, "x")), lambda db: db["t"].get((1, "y"))],
    "get_compound_wrong_arity": [lambda db: db["t"].insert({"a": 1, "b": "x", "v": 1}, pk=("a", "b")), lambda db: db["t"].get(1)],
    "get_missing_table": [lambda db: db["t"].get(1)],
    "get_wrong_type": [lambda db: db["t"].insert({"k": 1, "v": 1}, pk="k"), lambda db: db["t"].get("1")],
    "get_str_key_int": [lambda db: db["t"].insert({"k": "1", "v": 1}, pk="k"), lambda db: db["t"].get(1)],
    "rows_where_none": [lambda db: db["t"].insert_all([{"id": i, "v": -i} for i in range(3)], pk="id"), lambda db: db["t"].rows_where(None), lambda db: db["t"].rows_where(None, None, order_by="v", limit=2), lambda db: db["t"].rows_where("id > ?", [0], order_by="v desc", limit=1, offset=0)],
    "rows_where_offset_only": [lambda db: db["t"].insert_all([{"id": i, "v": -i} for i in range(3)], pk="id"), lambda db: db["t"].rows_where(offset=1, order_by="id")],
    "rows_where_select": [lambda db: db["t"].insert_all([{"id": i, "v": -i} for i in range(3)], pk="id"), lambda db: db["t"].rows_where(select="v, id", order_by="id")],
    "count_missing": [lambda db: db["t"].count, lambda db: db["t"].exists()],
    "count_empty": [lambda db: db["t"].create({"a": int}), lambda db: db["t"].count, lambda db: db["t"].exists()],
    "types": [lambda db: db["t"].insert({"id": 1, "i": 5, "f": 1.5, "s": "x", "b": b"\x00\xff", "bo": True, "n": None, "d": {"a": [1]}, "l": [1, "x"], "tu": (1, 2)}, pk="id"), lambda db: list(db["t"].rows), lambda db: db["t"].columns_dict],
    "types_none_first": [lambda db: db["t"].insert({"id": 1, "n": None}, pk="id"), lambda db: db["t"].insert({"id": 2, "n": 5}), lambda db: db["t"].insert({"id": 3, "n": "x"}), lambda db: list(db["t"].rows)],
    "bigint": [lambda db: db["t"].insert({"id": 1, "i": 2**63 - 1}, pk="id"), lambda db: db["t"].insert({"id": 2, "i": 2**63}), lambda db: list(db["t"].rows)],
    "bigint_first": [lambda db: db["t"].insert({"id": 1, "i": 2**64}, pk="id"), lambda db: list(db["t"].rows)],
    "negbigint": [lambda db: db["t"].insert({"id": 1, "i": -2**63}, pk="id"), lambda db: list(db["t"].rows)],
    "datetime": [lambda db: db["t"].insert({"id": 1, "dt": datetime.datetime(2024, 1, 2, 3, 4, 5), "d": datetime.date(2024, 1, 2), "tm": datetime.time(1, 2)}, pk="id"), lambda db: list(db["t"].rows), lambda db: db["t"].columns_dict],
    "datetime_tz": [lambda db: db["t"].insert({"id": 1, "dt": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)}, pk="id"), lambda db: list(db["t"].rows)],
    "decimal": [lambda db: db["t"].insert({"id": 1, "x": decimal.Decimal("1.5")}, pk="id"), lambda db: list(db["t"].rows)],
    "float_special": [lambda db: db["t"].insert({"id": 1, "x": float("inf")}, pk="id"), lambda db: list(db["t"].rows)],
    "bool_col": [lambda db: db["t"].insert({"id": 1, "x": False}, pk="id"), lambda db: list(db["t"].rows_where("x = ?", [False]))],
    "str_in_int_col": [lambda db: db["t"].insert({"id": 1, "x": 1}, pk="id"), lambda db: db["t"].insert({"id": 2, "x": "hello"}), lambda db: list(db["t"].rows)],
    "int_in_str_col": [lambda db: db["t"].insert({"id": 1, "x": "a"}, pk="id"), lambda db: db["t"].insert({"id": 2, "x": 5}), lambda db: list(db["t"].rows)],
    "query_order": [lambda db: db["t"].insert({"z": 1, "a": 2, "m": 3}), lambda db: db.query("select m, z, a from t"), lambda db: db.query("select * from t")],
    "query_dup_col": [lambda db: db.query("select 1 as a, 2 as a")],
    "query_ddl": [lambda db: db.query("create table q (a integer)"), lambda db: db["q"].exists()],
    "execute_fetch": [lambda db: db["t"].insert_all([{"a": 1}, {"a": 2}]), lambda db: db.execute("select a from t order by a").fetchone(), lambda db: db.execute("select a from t order by a").fetchall(), lambda db: db.execute("select a from t where a > ?", (5,)).fetchone()],
    "execute_no_params_qmark_literal": [lambda db: db.execute("select '?' as q, 'a%b' as p").fetchall(), lambda db: db.execute("select ? as q, 'x?' || ?", ["a", "b"]).fetchall()],
    "percent": [lambda db: db.execute("select 7 % 3").fetchall(), lambda db: db.execute("select 7 % ?", [4]).fetchall()],
    "like_pct_param": [lambda db: db["t"].insert_all([{"s": "abc"}, {"s": "xbz"}]), lambda db: db.execute("select s from t where s like ? order by s", ["%b%"]).fetchall()],
    "quote_table_space": [lambda db: db["my table"].insert({"my col": 1, "Upper": 2, "order": 3}, pk="my col"), lambda db: list(db["my table"].rows), lambda db: db["my table"].get(1), lambda db: db["my table"].update(1, {"order": 4}), lambda db: db["my table"].upsert({"my col": 1, "Upper": 9}, pk="my col"), lambda db: list(db["my table"].rows_where('"order" = ?', [4])), lambda db: db["my table"].count, lambda db: db["my table"].delete(1), lambda db: db["my table"].count],
    "quote_upper_table": [lambda db: db["Users"].insert({"id": 1}, pk="id"), lambda db: db["Users"].exists(), lambda db: db["users"].exists(), lambda db: db.execute("select count(*) from Users").fetchall()],
    "reserved_table": [lambda db: db["order"].insert({"id": 1, "select": "x"}, pk="id"), lambda db: list(db["order"].rows), lambda db: db.execute('select "select" from "order"').fetchall(), lambda db: db.execute('select [select] from [order]').fetchall()],
    "backtick": [lambda db: db["t"].insert({"a": 1}), lambda db: db.execute('select `a` from `t`').fetchall()],
    "quote_in_name": [lambda db: db['we"ird'].insert({'c"ol': 1, "x]y": 2}), lambda db: list(db['we"ird'].rows)],
    "create_if_not_exists": [lambda db: db["t"].create({"id": int, "v": str}, pk="id", if_not_exists=True), lambda db: db["t"].create({"id": int, "v": str}, pk="id", if_not_exists=True), lambda db: db["t"].columns_dict, lambda db: db["t"].insert({"v": "a"}).last_pk],
    "create_no_pk": [lambda db: db["t"].create({"a": int, "b": str}), lambda db: db["t"].insert({"a": 1, "b": "x"}).last_pk, lambda db: db["t"].pks],
    "create_pk_str": [lambda db: db["t"].create({"id": str, "b": str}, pk="id"), lambda db: db["t"].insert({"b": "x"}).last_pk, lambda db: list(db["t"].rows)],
    "create_pk_float": [lambda db: db["t"].create({"id": float, "b": str}, pk="id"), lambda db: db["t"].insert({"id": 1.5, "b": "x"}).last_pk],
    "create_types_by_name": [lambda db: db["t"].create({"a": "INTEGER", "b": "TEXT", "c": "REAL", "d": "BLOB", "e": "FLOAT"}), lambda db: db["t"].insert({"a": 1, "b": "x", "c": 1.5, "d": b"z", "e": 2.0}), lambda db: list(db["t"].rows)],
    "create_lowercase_type": [lambda db: db["t"].create({"a": "integer", "b": "text"}), lambda db: list(db["t"].rows)],
    "create_datetime_type": [lambda db: db["t"].create({"a": datetime.datetime, "b": datetime.date}), lambda db: db["t"].insert({"a": datetime.datetime(2024, 1, 1), "b": datetime.date(2024, 1, 1)}), lambda db: list(db["t"].rows)],
    "create_compound": [lambda db: db["t"].create({"a": int, "b": int, "v": str}, pk=("a", "b")), lambda db: db["t"].insert({"a": 1, "b": 2, "v": "x"}).last_pk, lambda db: db["t"].insert({"a": 1, "v": "y"})],
    "insert_pk_not_in_row_new": [lambda db: db["t"].insert({"v": 1}, pk="id"), lambda db: list(db["t"].rows), lambda db: db["t"].pks],
    "insert_pk_wrong_existing": [lambda db: db["t"].insert({"id": 1, "v": 1}, pk="id"), lambda db: db["t"].insert({"id": 2, "v": 1}, pk="v")],
    "insert_empty_row": [lambda db: db["t"].insert({})],
    "insert_all_empty_rows_existing": [lambda db: db["t"].create({"id": int, "v": int}, pk="id"), lambda db: db["t"].insert({}).last_pk, lambda db: list(db["t"].rows)],
    "last_pk_insert_all": [lambda db: db["t"].insert_all([{"id": 1}, {"id": 2}], pk="id").last_pk, lambda db: db["t"].insert_all([{"id": 3}], pk="id").last_pk],
    "last_pk_nopk": [lambda db: db["t"].insert({"v": 5}).last_pk, lambda db: db["t"].insert({"v": 6}).last_pk],
    "ignore_last_pk_existing": [lambda db: db["t"].insert({"id": 1, "v": 5}, pk="id"), lambda db: db["t"].insert({"id": 1, "v": 6}, pk="id", ignore=True).last_pk],
    "replace_nopk_existing_rowid": [lambda db: db["t"].insert({"id": 1, "v": 5}, pk="id"), lambda db: db["t"].insert({"id": 1, "v": 6}, replace=True).last_pk, lambda db: list(db["t"].rows)],
    "upsert_all_new": [lambda db: db["t"].upsert_all([{"id": 1, "v": 1}, {"id": 1, "w": 2}], pk="id"), lambda db: list(db["t"].rows)],
    "json_read_back_query": [lambda db: db["t"].insert({"id": 1, "j": {"a": 1}}, pk="id"), lambda db: db.execute("select j from t").fetchall()],
    "execute_named": [lambda db: db.execute("select :a as a, :b as b", {"a": 1, "b": "x"}).fetchall()],
    "execute_params_tuple": [lambda db: db.execute("select ?, ?", (1, None)).fetchall()],
    "execute_param_count_mismatch": [lambda db: db.execute("select ?, ?", (1,)).fetchall()],
    "execute_bad_sql": [lambda db: db.execute("selec 1")],
    "execute_missing_table": [lambda db: db.execute("select * from nope")],
    "rowcount": [lambda db: db["t"].insert_all([{"a": 1}, {"a": 2}]), lambda db: db.execute("update t set a = a + 1").rowcount, lambda db: db.execute("delete from t where a > ?", [100]).rowcount],
    "description": [lambda db: [d[0] for d in db.execute("select 1 as x, 2 as y").description]],
    "execute_returns_cursor_iterable": [lambda db: list(db.execute("select 1 union all select 2"))],
    "bytes_param": [lambda db: db.execute("select ?", [b"\x00a"]).fetchall()],
    "bigint_param": [lambda db: db.execute("select ?", [2**63]).fetchall()],
    "table_names": [lambda db: db["b"].insert({"a": 1}), lambda db: db["a"].insert({"a": 1}), lambda db: db.table_names()],
    "get_rowid_table": [lambda db: db["t"].insert({"v": 1}), lambda db: db["t"].get(1)],
    "rows_where_missing_table_args": [lambda db: db["t"].rows_where("a = ?", [1])],
    "insert_none_pk": [lambda db: db["t"].insert({"k": None, "v": 1}, pk="k")],
    "insert_none_strpk_existing": [lambda db: db["t"].create({"k": str, "v": int}, pk="k"), lambda db: db["t"].insert({"k": None, "v": 1}), lambda db: list(db["t"].rows)],
    "insert_all_batch": [lambda db: db["t"].insert_all([{"id": i, "v": i} for i in range(250)], pk="id", batch_size=50).last_pk, lambda db: db["t"].count],
    "count_after_ops": [lambda db: db["t"].insert_all([{"id": i} for i in range(5)], pk="id"), lambda db: db["t"].delete_where("id > ?", [2]), lambda db: db["t"].count],
    "create_replace": [lambda db: db["t"].create({"a": int}), lambda db: db["t"].create({"b": str}, replace=True), lambda db: db["t"].columns_dict],
    "create_transform": [lambda db: db["t"].create({"a": int}), lambda db: db["t"].create({"a": int, "b": str}, transform=True)],
    "update_pk_column": [lambda db: db["t"].insert({"k": "a", "v": 1}, pk="k"), lambda db: db["t"].update("a", {"k": "b"}).last_pk, lambda db: list(db["t"].rows)],
    "rows_where_where_args_none_with_q": [lambda db: db["t"].insert({"a": "?"}), lambda db: db["t"].rows_where("a = '?'")],
    "float_int_col_whole": [lambda db: db["t"].insert({"id": 1, "x": 1}, pk="id"), lambda db: db["t"].insert({"id": 2, "x": 2.0}), lambda db: list(db["t"].rows)],
    "float_col_int": [lambda db: db["t"].insert({"id": 1, "x": 1.5}, pk="id"), lambda db: db["t"].insert({"id": 2, "x": 2}), lambda db: list(db["t"].rows)],
    "bool_first_then_int": [lambda db: db["t"].insert({"id": 1, "x": True}, pk="id"), lambda db: db["t"].insert({"id": 2, "x": 7}), lambda db: list(db["t"].rows)],
    "str_pk_int_value": [lambda db: db["t"].insert({"k": "a"}, pk="k"), lambda db: db["t"].insert({"k": 5}), lambda db: list(db["t"].rows)],
    "json_in_text_col_dict": [lambda db: db["t"].insert({"id": 1, "x": "s"}, pk="id"), lambda db: db.execute("update t set x = ? where id = 1", [{"a": 1}])],
    "float_in_text_col": [lambda db: db["t"].insert({"id": 1, "x": "a"}, pk="id"), lambda db: db["t"].insert({"id": 2, "x": 5}), lambda db: db["t"].insert({"id": 3, "x": 1.0}), lambda db: list(db["t"].rows)],
    "negzero_update": [lambda db: db["t"].insert({"id": 1, "x": 1.5}, pk="id"), lambda db: db["t"].update(1, {"x": -0.0}), lambda db: [str(r["x"]) for r in db["t"].rows]],
    "backtick_and_percent_in_names": [lambda db: db["50% off"].insert({"a b": 1}, pk="a b"), lambda db: db.execute("select `a b` from `50% off` where `a b` = ?", [1]).fetchall()],
    "quoted_pct_name": [lambda db: db["p%"].insert({"id": 1, "v%": 2}, pk="id"), lambda db: list(db["p%"].rows_where('"v%" = ?', [2])), lambda db: db["p%"].update(1, {"v%": 3}), lambda db: db["p%"].get(1)],
    "compound_null": [lambda db: db["t"].create({"a": int, "b": int, "v": str}, pk=("a", "b")), lambda db: db["t"].insert({"a": 1, "b": 2, "v": "x"}, pk=("a", "b")).last_pk, lambda db: db["t"].insert({"a": 1, "v": "y"}, pk=("a", "b"))],
    "query_expression_names": [lambda db: db["t"].insert_all([{"id": 1, "name": "x"}, {"id": 2, "name": "y"}], pk="id"), lambda db: db.query("SELECT count(*), max(id) AS Top, sum( id ) s, 1 + 1, 'a', NULL, (id), t.name, \"name\", NAME FROM t GROUP BY id ORDER BY id"), lambda db: db["t"].rows_where(select="count(*), min(id)")],
    "query_with_names": [lambda db: db["t"].insert_all([{"id": 1, "v": 5}, {"id": 2, "v": 7}], pk="id"), lambda db: db.query("WITH big AS (SELECT id, v FROM t WHERE v > ?), n(k) AS (SELECT 1) SELECT count(*), sum(v) AS Total, min(k) FROM big, n", [1]), lambda db: db["t"].count],
    "cursor_rowcount": [lambda db: db["t"].insert_all([{"id": 1, "s": "a"}, {"id": 2, "s": "b"}], pk="id"), lambda db: db.execute("SELECT * FROM t").rowcount, lambda db: (lambda c: (c.fetchall(), c.rowcount))(db.execute("WITH x AS (SELECT 1) SELECT * FROM t")), lambda db: (lambda c: (c.fetchall(), c.rowcount))(db.execute("INSERT INTO t (id, s) VALUES (3, 'c') RETURNING id")), lambda db: db.execute("UPDATE t SET s = 'z' WHERE id < 3").rowcount, lambda db: db.execute("DELETE FROM t WHERE id = 99").rowcount],
    "cursor_description": [lambda db: db["t"].insert_all([{"id": 1, "s": "a"}, {"id": 2, "s": None}], pk="id"), lambda db: db.execute("SELECT count(*), s, max(id) AS Top FROM t GROUP BY s ORDER BY s").description, lambda db: db.execute("UPDATE t SET s = 'q'").description],
    "rows_where_nulls_first": [lambda db: db["t"].insert_all([{"id": 1, "s": "b"}, {"id": 2, "s": None}, {"id": 3, "s": "a"}, {"id": 4, "s": None}], pk="id"), lambda db: [r["id"] for r in db["t"].rows_where(order_by="s, id")], lambda db: [r["id"] for r in db["t"].rows_where(order_by="s desc, id DESC")], lambda db: [r["id"] for r in db["t"].rows_where("id > ?", [1], order_by="coalesce(s, 'b') desc, s", limit=2)]],
    "like_ignores_case": [lambda db: db["t"].insert_all([{"id": 1, "s": "apple"}, {"id": 2, "s": "Avocado"}, {"id": 3, "s": "pear"}], pk="id"), lambda db: db.execute("SELECT id FROM t WHERE s LIKE ? ORDER BY id", ["a%"]).fetchall(), lambda db: db.execute("SELECT id FROM t WHERE s NOT like 'A%' ORDER BY id").fetchall(), lambda db: list(db["t"].rows_where("s like ?", ["%CADO"]))],
    "comparison_is_an_int": [lambda db: [type(v).__name__ for v in db.execute("SELECT 1 = 1, 'a' = 'b', 2 > 1").fetchone()], lambda db: db.execute("SELECT 1 = 1, 'a' = 'b'").fetchone()],
    "default_current_timestamp": [lambda db: db["d"].create({"id": int, "at": str, "on": str, "tm": str}, pk="id", defaults={"at": "CURRENT_TIMESTAMP", "on": "current_date", "tm": "CURRENT_TIME"}), lambda db: db.execute("INSERT INTO d (id) VALUES (1)").rowcount, lambda db: [bool(re.fullmatch(f, v)) for f, v in zip([r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", r"\d{4}-\d\d-\d\d", r"\d\d:\d\d:\d\d"], list(db["d"].get(1).values())[1:], strict=True)]],
    "text_sorts_by_bytes": [lambda db: db["t"].insert_all([{"id": i, "s": v} for i, v in enumerate(["b", "B", "a", "A", "é", "_x", "a b", "ab", "Z"], 1)], pk="id"), lambda db: [r["s"] for r in db["t"].rows_where("s > ?", ["B"], order_by="s")], lambda db: db.execute("SELECT min(s), max(s) FROM t").fetchone()],
    "list_param_execute": [lambda db: db.execute("select ?", [[1, 2]]).fetchall()],
    "p_datetime": [lambda db: db.execute("select ?, ?", [datetime.datetime(2024,1,2,3,4,5), datetime.date(2024,1,2)]).fetchall()],
    "p_decimal": [lambda db: db.execute("select ?", [decimal.Decimal("1.5")]).fetchall()],
    "p_uuid_insert": [lambda db: db["t"].insert({"id": 1, "u": uuid.UUID(int=5)}, pk="id"), lambda db: list(db["t"].rows)],
    "p_bytearray": [lambda db: db.execute("select ?", [bytearray(b"ab")]).fetchall()],
    "query_insert_returning_not_iterated": [lambda db: db["t"].create({"id": int}, pk="id"), lambda db: (db.query("insert into t (id) values (5) returning id"), None)[1], lambda db: db["t"].count],
    "query_update_no_rows": [lambda db: db["t"].insert({"id": 1, "v": 1}, pk="id"), lambda db: db.query("update t set v = 2"), lambda db: list(db["t"].rows)],
    "query_error_then_continue": [lambda db: db["t"].insert({"id": 1, "v": 1}, pk="id"), lambda db: db.query("insert into t (id, v) values (1, 2) returning id")],
    "nan": [lambda db: db["t"].insert({"id": 1, "x": float("nan")}, pk="id"), lambda db: [str(r["x"]) for r in db["t"].rows]],
    "nan_existing": [lambda db: db["t"].insert({"id": 1, "x": 1.5}, pk="id"), lambda db: db["t"].insert({"id": 2, "x": float("nan")}, pk="id"), lambda db: [str(r["x"]) for r in db["t"].rows]],
    "negzero": [lambda db: db["t"].insert({"id": 1, "x": -0.0}, pk="id"), lambda db: [str(r["x"]) for r in db["t"].rows]],
    "nul_str": [lambda db: db["t"].insert({"id": 1, "x": "a\x00b"}, pk="id"), lambda db: list(db["t"].rows)],
    "empty_bytes": [lambda db: db["t"].insert({"id": 1, "x": b""}, pk="id"), lambda db: list(db["t"].rows)],
    "nan_param": [lambda db: db.execute("select ?", [float("nan")]).fetchall()],
    "cursor_lastrowid": [lambda db: db["t"].insert({"id": 1}, pk="id"), lambda db: db.execute("insert into t (id) values (5)").lastrowid],
    "str_in_float_col": [lambda db: db["t"].insert({"id": 1, "x": 1.5}, pk="id"), lambda db: db["t"].insert({"id": 2, "x": "2.5"}), lambda db: db["t"].insert({"id": 3, "x": "x"}), lambda db: list(db["t"].rows)],
    "str_in_bytes_col": [lambda db: db["t"].insert({"id": 1, "x": b"1"}, pk="id"), lambda db: db["t"].insert({"id": 2, "x": "abc"}), lambda db: list(db["t"].rows)],
    "upper_col_unquoted": [lambda db: db["t"].insert({"id": 1, "Name": "x"}, pk="id"), lambda db: db.execute("select Name from t").fetchall()],
    "rows_where_upper_where": [lambda db: db["t"].insert({"id": 1, "Name": "x"}, pk="id"), lambda db: list(db["t"].rows_where("Name = ?", ["x"]))],}

# Scripts PostgreSQL runs to a clear refusal: (the exception's class name, what its message says).
_NO_ROWID = ("RowidUnavailable", r"PostgreSQL has no rowid|no primary key, and PostgreSQL has no rowid")
_AFFINITY = ("ValueError", r"SQLite stores any value in any column, PostgreSQL does not")
_NULL_KEY = ("ValueError", r"no value for its primary key column .*PostgreSQL refuses it")
PG_REFUSES: dict[str, tuple[str, str]] = {
    "pk_omitted": _NO_ROWID,
    "pk_omitted_delete": _NO_ROWID,
    "pk_omitted_update": _NO_ROWID,
    "create_no_pk": _NO_ROWID,
    "get_rowid_table": _NO_ROWID,
    "cursor_lastrowid": _NO_ROWID,
    "update_json": _AFFINITY,
    "str_in_int_col": _AFFINITY,
    "str_in_float_col": _AFFINITY,
    "str_in_bytes_col": _AFFINITY,
    "float_in_text_col": _AFFINITY,
    "create_pk_str": _NULL_KEY,
    "create_compound": _NO_ROWID,
    "last_pk_nopk": _NO_ROWID,
    "create_pk_float": _NO_ROWID,
    "compound_null": _NULL_KEY,
    "insert_none_pk": _NULL_KEY,
    "insert_none_strpk_existing": _NULL_KEY,
    "get_str_key_int": ("UndefinedFunction", r"operator does not exist: text = smallint"),
    "nul_str": ("DataError", r"cannot contain NUL"),
    "create_transform": ("TypeError", r"does not support transform="),
    "quote_upper_table": ("UndefinedTable", r"folds an unquoted name to lower case.*\"Users\""),
    "upper_col_unquoted": ("UndefinedColumn", r'Perhaps you meant .*"t.Name"'),
    "rows_where_upper_where": ("UndefinedColumn", r'Perhaps you meant .*"t.Name"'),
    "reserved_table": ("SyntaxError", r'syntax error at or near "\["'),
}
# Values that differ by design: PostgreSQL's own type names in columns_dict.
_PG_TYPES = {"bigint": int, "double precision": float, "text": str, "bytea": bytes}


def _kind(exc: BaseException) -> str:
    """An exception's kind, the same for sqlite3's and psycopg's version of one error."""
    import psycopg

    if isinstance(exc, (sqlite3.IntegrityError, psycopg.IntegrityError)):
        return "IntegrityError"
    if isinstance(exc, (sqlite3.Error, psycopg.Error)):
        return "DatabaseError"
    return type(exc).__name__


def _norm(value: Any) -> Any:
    if isinstance(value, sqlite_utils.db.Table) or type(value).__name__ == "PgTable":
        try:
            return ("table", value.last_pk)
        except Exception as exc:  # noqa: BLE001 (RowidUnavailable, PostgreSQL only)
            return ("table", "no rowid: " + type(exc).__name__)
    if isinstance(value, sqlite3.Cursor) or type(value).__name__ == "PgCursor":
        return ("cursor", [tuple(r) for r in value.fetchall()])
    if isinstance(value, types.GeneratorType) or hasattr(value, "__next__"):
        return ("rows", [list(r.items()) for r in value])
    if isinstance(value, dict) and value and all(v in _PG_TYPES for v in value.values()):
        return {k: _PG_TYPES[v] for k, v in value.items()}
    return value


def _run(db: Any, ops: list[Op]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for op in ops:
        try:
            out.append(("ok", _norm(op(db))))
        except Exception as exc:  # noqa: BLE001
            out.append(("error", _kind(exc), type(exc).__name__, str(exc)))
            break  # on PostgreSQL an error ends the transaction
    return out


def _same(lite: tuple[Any, ...], pg: tuple[Any, ...]) -> bool:
    if lite[0] == pg[0] == "error":
        return lite[1] == pg[1]  # the kind; the drivers' messages differ
    if (
        lite[0] == pg[0] == "ok" and isinstance(lite[1], tuple) and isinstance(pg[1], tuple)
        and lite[1][:1] == pg[1][:1] == ("table",) and isinstance(lite[1][1], int)
        and str(pg[1][1]).startswith("no rowid")
    ):
        return True  # last_pk a rowid on SQLite: RowidUnavailable when read on PostgreSQL
    return lite == pg


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_same_calls_give_the_same_results_or_a_clear_refusal(
    name: str, pg_url: str, tmp_path: Any
) -> None:
    import psycopg

    from persistence._pg._reducer_db import PgDatabase

    ops = SCRIPTS[name]
    conn = sqlite3.connect(tmp_path / "lite.db", isolation_level=None)
    conn.execute("BEGIN")  # as the engine runs a reducer: in the step's transaction
    try:
        lite = _run(sqlite_utils.Database(conn, execute_plugins=False), ops)
    finally:
        conn.close()
    pconn = psycopg.connect(pg_url)
    try:
        pg = _run(PgDatabase(pconn), ops)
    finally:
        pconn.rollback()
        pconn.close()
    if name in PG_REFUSES:
        cls, says = PG_REFUSES[name]
        *before, last = pg
        assert last[0] == "error" and last[2] == cls and re.search(says, last[3], re.S), (lite, pg)
        assert all(_same(a, b) for a, b in zip(lite, before, strict=False)), (lite, pg)
        assert len(lite) > len(before) and lite[len(before)][0] == "ok", (lite, pg)
        return
    assert len(lite) == len(pg) and all(map(_same, lite, pg)), f"\nsqlite:   {lite}\npostgres: {pg}"


def test_every_refusal_is_a_script() -> None:
    assert set(PG_REFUSES) <= set(SCRIPTS)


# -- random scripts --------------------------------------------------------------------------------

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8),
    st.binary(max_size=6),
    st.lists(st.integers(-5, 5), max_size=3),
    st.dictionaries(st.sampled_from("ab"), st.integers(-5, 5), max_size=2),
)
_COLUMNS = st.sampled_from(["v", "w", "Order", "a b"])
_KEYS = st.integers(1, 4)
_ROW = st.dictionaries(_COLUMNS, _VALUES, max_size=3)


@st.composite
def _op(draw: st.DrawFn) -> tuple[str, Op]:
    kind = draw(st.sampled_from(
        ["insert", "insert", "upsert", "update", "delete", "get", "count", "rows", "query"]
    ))
    key = draw(_KEYS)
    row = draw(_ROW)
    if kind == "insert":
        flag = draw(st.sampled_from([{}, {"replace": True}, {"ignore": True}]))
        return f"insert({key}, {row}, {flag})", lambda db: db["t"].insert(
            {"id": key, **row}, pk="id", **flag
        )
    if kind == "upsert":
        return f"upsert({key}, {row})", lambda db: db["t"].upsert({"id": key, **row}, pk="id")
    if kind == "update":
        return f"update({key}, {row})", lambda db: db["t"].update(key, row)
    if kind == "delete":
        return f"delete({key})", lambda db: db["t"].delete(key)
    if kind == "get":
        return f"get({key})", lambda db: db["t"].get(key)
    if kind == "count":
        return "count", lambda db: db["t"].count if db["t"].exists() else None
    if kind == "rows":
        by = {"v": "v", "v desc": "v", "w": "w", '"a b" DESC': "a b", '"Order"': "Order"}
        terms = draw(st.lists(st.sampled_from(sorted(by)), max_size=2, unique=True))

        def rows(db: Any) -> Any:
            if not db["t"].exists():
                return None
            have = set(db["t"].columns_dict)
            order = ", ".join([t for t in terms if by[t] in have] + ["id"])
            return db["t"].rows_where("id >= ?", [key], order_by=order, limit=3)

        return f"rows_where(id >= {key}, order_by={terms})", rows
    return "query", lambda db: db.query('SELECT * FROM "t" WHERE id <= ? ORDER BY id', [key]) if (
        db["t"].exists()
    ) else None


@settings(
    max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=st.lists(_op(), min_size=1, max_size=8))
def test_random_scripts_give_the_same_results_or_a_clear_refusal(
    script: list[tuple[str, Op]], pg_url: str
) -> None:
    import psycopg

    from persistence._pg._reducer_db import PgDatabase

    ops = [op for _, op in script]
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("BEGIN")
    try:
        lite = _run(sqlite_utils.Database(conn, execute_plugins=False), ops)
    finally:
        conn.close()
    with psycopg.connect(pg_url) as pconn:
        pg = _run(PgDatabase(pconn), ops)
        pconn.rollback()
    names = [name for name, _ in script]
    if len(pg) <= len(lite) and pg[-1][0] == "error" and pg[-1][2] in ("ValueError", "RowidUnavailable") and (
        re.search(_AFFINITY[1] + "|" + _NULL_KEY[1] + "|" + _NO_ROWID[1] + "|would round", pg[-1][3])
    ):
        # A clear refusal where SQLite went on: the same results up to it.
        assert all(map(_same, lite, pg[:-1])), f"\n{names}\nsqlite:   {lite}\npostgres: {pg}"
        return
    assert len(lite) == len(pg) and all(map(_same, lite, pg)), (
        f"\n{names}\nsqlite:   {lite}\npostgres: {pg}"
    )
