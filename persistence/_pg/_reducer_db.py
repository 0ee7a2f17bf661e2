"""What reducers receive on PostgreSQL: sqlite-utils' ``Database`` API (SPEC §9's subset) on psycopg.

``PgDatabase(conn)`` works on the connection it is given, inside whatever transaction that
connection has open (the step's), and never commits. It does what sqlite-utils does for the same
calls, on tables it creates the way sqlite-utils creates them:

- ``db["t"].insert(row, pk=..., replace=False, ignore=False)``, ``.insert_all(rows, ...)``,
  ``.upsert(row, pk=...)``, ``.upsert_all``, ``.update(pk, values)``, ``.delete(pk)``,
  ``.delete_where(where, params)``, ``.get(pk)`` (``sqlite_utils.db.NotFoundError`` when there is
  no such row), ``.rows_where(where, params, ...)``, ``.rows``, ``.create(columns, pk=...,
  not_null=, defaults=, column_order=, if_not_exists=)``, ``.exists()``, ``.count``, ``.pks``,
  ``.columns_dict``, ``.last_pk``;
- ``db.execute(sql, params)`` (a cursor: ``fetchone``, ``fetchall``, ``rowcount``,
  ``description``, iteration) and ``db.query(sql, params)`` (rows as dicts), with SQLite's ``?``
  placeholders (and ``:name`` with a dict of parameters), ``db.table_names()``;
- ``db.conn``: the psycopg connection itself, for native SQL (``%s`` placeholders).

Types follow sqlite-utils: a table made by a first insert takes its columns' types from the rows
(int and bool -> bigint, float -> double precision, str -> text, bytes -> bytea, dict, list and
tuple -> JSON in text); a single integer primary key is filled in when a row leaves it out, as
SQLite's rowid is; booleans are stored as 1 and 0, and come back so (``SELECT a = b`` too);
``sum`` and ``avg`` come back as int or float, never Decimal; text columns compare by bytes
(``COLLATE "C"``); ``CURRENT_TIMESTAMP`` defaults are SQLite's UTC text.

Parameters are bound as sqlite3 binds them (a NaN as NULL; a list, dict or Decimal refused; an
int beyond 64 bits an ``OverflowError``); ``LIKE`` ignores case and `` `name` `` quotes a name,
as in SQLite; ``query()`` runs at the call, names its columns as SQLite does (``count(*)``, a
repeated one ``a_2``) and refuses (undoing it) a statement without rows, as sqlite-utils does; a
cursor's ``rowcount`` and ``description`` are sqlite3's; ``rows_where(order_by=)`` puts NULLs
first, as SQLite.

Where PostgreSQL differs, and nothing here hides it: an error in a statement aborts the whole
transaction (the step fails, as when the reducer raises; a statement after a caught error says
so); names are case-sensitive once quoted (create tables with lower-case names to query them
unquoted); a generated key is never reused; there is no rowid (``RowidUnavailable`` where
sqlite-utils would answer with one); a column holds only values of its type (a ``ValueError``
naming the column where SQLite would keep any value, or a NULL in a key column).
"""

from __future__ import annotations

import datetime
import functools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.adapt import Dumper, Loader
from sqlite_utils.db import (
    COLUMN_TYPE_MAPPING,
    NotFoundError,
    PrimaryKeyRequired,
    jsonify_if_needed,
)
from sqlite_utils.utils import dedupe_keys, suggest_column_types

# SQLite's type names (as sqlite-utils maps Python types to them) in PostgreSQL.
PG_TYPES = {
    "INTEGER": "bigint",
    "REAL": "double precision",
    "FLOAT": "double precision",
    "TEXT": "text",
    "BLOB": "bytea",
    "ANY": "text",
}
# sqlite-utils sizes a multi-row INSERT to SQLite's variable limit; the same chunks here, so a
# table made by a first insert takes its types from the same rows on both backends.
SQLITE_MAX_VARS = 999
DEFAULT_BATCH = 100

# What sqlite-utils' query() refuses before running it, and says for any statement without rows.
_QUERY_REJECTED = frozenset(
    {"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "VACUUM", "ATTACH", "DETACH"}
)
_QUERY_ROWS_ONLY = (
    "query() can only be used with SQL that returns rows - use execute() for other statements"
)
# Statements that only read: query() runs them without a savepoint.
_READS = frozenset({"SELECT", "VALUES", "TABLE", "SHOW", "EXPLAIN"})


def _first_keyword(sql: str) -> str:
    """The statement's first keyword, upper-cased, after blanks, ``;`` and comments."""
    i, n = 0, len(sql)
    while i < n:
        if sql[i].isspace() or sql[i] in (";", "\ufeff", "("):
            i += 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            if j < 0:
                return ""
            i = j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            if j < 0:
                return ""
            i = j + 2
        else:
            break
    j = i
    while j < n and (sql[j].isalpha() or sql[j] == "_"):
        j += 1
    return sql[i:j].upper()


# -- column names as SQLite gives them -------------------------------------------------------------

_ENDS_SELECT_LIST = frozenset(
    {"FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "WINDOW", "UNION",
     "INTERSECT", "EXCEPT", "INTO", "FETCH", "FOR"}
)
_IDENT = r'(?:"(?:[^"]|"")*"|`[^`]*`|\[[^\]]*\]|[A-Za-z_][A-Za-z_0-9$]*)'
_TRAILING_IDENT = re.compile(rf"({_IDENT})\s*\Z")
_COLUMN_REF = re.compile(rf"\s*(?:{_IDENT}\s*\.\s*)*{_IDENT}\s*\Z")


def _select_list(sql: str) -> list[str] | None:
    """The items of a SELECT's list, as written; None for any other statement."""
    i, n = 0, len(sql)
    while i < n and (sql[i].isspace() or sql[i] == ";"):
        i += 1
    keyword = _first_keyword(sql)
    if keyword == "WITH" and sql[i:].upper().startswith("WITH"):
        i = _main_select(sql, i + len("WITH"))
        if i < 0:
            return None
    elif keyword != "SELECT" or not sql[i:].upper().startswith("SELECT"):
        return None  # (a leading comment: not worth reading)
    i += len("SELECT")
    items: list[str] = []
    start, depth = i, 0
    while i < n:
        c = sql[i]
        if c in "'\"`[":
            close = "]" if c == "[" else c
            j = sql.find(close, i + 1)
            while j >= 0 and close != "]" and sql.startswith(close * 2, j):
                j = sql.find(close, j + 2)
            if j < 0:
                return None
            i = j + 1
            continue
        if sql.startswith("--", i) or sql.startswith("/*", i):
            return None
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(sql[start:i])
            start = i + 1
        elif (c.isalpha() or c == "_") and depth == 0 and (i == 0 or not (
            sql[i - 1].isalnum() or sql[i - 1] in "_$."
        )):
            m = _NAME.match(sql, i)
            assert m is not None
            if m.group(0).upper() in _ENDS_SELECT_LIST:
                break
            i = m.end()
            continue
        i += 1
    items.append(sql[start:i])
    items = [item.strip() for item in items]
    first = items[0].split(None, 1)
    if first and first[0].upper() in ("DISTINCT", "ALL"):
        items[0] = first[1] if len(first) > 1 else ""
    return items


def _main_select(sql: str, i: int) -> int:
    """Where the SELECT after a WITH's common table expressions starts (-1: none)."""
    depth, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`":
            j = sql.find(c, i + 1)
            while j >= 0 and sql.startswith(c * 2, j):
                j = sql.find(c, j + 2)
            if j < 0:
                return -1
            i = j + 1
            continue
        if sql.startswith("--", i) or sql.startswith("/*", i):
            return -1
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and c in "sS" and sql[i : i + 6].upper() == "SELECT" and (
            i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] in "_$")
        ) and (i + 6 >= n or not (sql[i + 6].isalnum() or sql[i + 6] in "_$")):
            return i
        i += 1
    return -1


_NULLS = re.compile(r"\bNULLS\s+(FIRST|LAST)\s*\Z", re.IGNORECASE)
_DESC = re.compile(r"\bDESC\s*\Z", re.IGNORECASE)


def _nulls_first(order_by: str) -> str:
    """An ORDER BY list that puts NULLs where SQLite does: first, and last when descending
    (PostgreSQL does the other way round)."""
    terms, depth, start, quote = [], 0, 0, ""
    for i, c in enumerate(order_by):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"`":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            terms.append(order_by[start:i])
            start = i + 1
    terms.append(order_by[start:])
    return ", ".join(
        t.strip() if _NULLS.search(t) else
        f"{t.strip()} NULLS {'LAST' if _DESC.search(t) else 'FIRST'}"
        for t in terms
    )


def _unquote(name: str) -> tuple[str, bool]:
    if name[:1] in ('"', "`", "["):
        return name[1:-1].replace('""', '"') if name[0] == '"' else name[1:-1], True
    return name, False


def _sqlite_names(sql: str, names: list[str]) -> list[str]:
    """The names SQLite gives a query's columns, where PostgreSQL's differ: an expression is
    named as written (``count(*)``, not ``count``; ``id + 1``, not ``?column?``), an alias as
    written (``AS Total``, not ``total``); a column is named as PostgreSQL names it."""
    items = _select_list(sql)
    if items is None or len(items) != len(names) or any(i.endswith("*") for i in items):
        return names  # (a * stands for the table's columns, which PostgreSQL names as SQLite)
    out = []
    for item, name in zip(items, names, strict=True):
        bare = item
        while bare.startswith("(") and bare.endswith(")"):
            bare = bare[1:-1].strip()
        m = _TRAILING_IDENT.search(bare)
        if m is not None:
            ident, quoted = _unquote(m.group(1))
            if (ident if quoted else ident.lower()) == name:
                # A column (PostgreSQL gives its name, as SQLite does) or an alias, as written.
                out.append(name if _COLUMN_REF.match(bare) else ident)
                continue
        out.append(item)
    return out


# Statements that leave the tables' shapes alone (anything else may change them).
_DML = ("select", "insert", "update", "delete", "with", "values", "table", "show", "explain")


def quote_identifier(name: str) -> str:
    """``name`` as a quoted PostgreSQL identifier."""
    return '"' + name.replace('"', '""') + '"'


# -- placeholders ----------------------------------------------------------------------------------

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


@functools.lru_cache(maxsize=2048)
def translate(sql: str, named: bool = False) -> str:
    """SQLite-style SQL with ``?`` (or, ``named``, ``:name``) placeholders in psycopg's style.

    Placeholders inside string literals, quoted identifiers, comments and dollar-quoted strings
    are left alone; every ``%`` is doubled (psycopg reads ``%`` anywhere as the start of one of
    its placeholders). ``::`` casts are not names. A `` `name` `` (SQLite's other quoting of an
    identifier) is PostgreSQL's ``"name"``, and ``LIKE`` (which ignores case on SQLite) is
    ``ILIKE``, but in ``CREATE`` and ``ALTER`` statements.

    Raises:
        ValueError: a numbered placeholder (``?1``), which psycopg has no form for.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "`":
            # SQLite also takes `name` for an identifier: PostgreSQL's "name".
            j = sql.find("`", i + 1)
            j = n if j < 0 else j
            out.append('"' + sql[i + 1 : j].replace('"', '""').replace("%", "%%") + '"')
            i = j + 1
        elif c in "'\"":
            j = i + 1
            while j < n:
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:  # a doubled quote inside the literal
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i : j + 1].replace("%", "%%"))
            i = j + 1
        elif c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j].replace("%", "%%"))
            i = j
        elif c == "/" and sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(sql[i:j].replace("%", "%%"))
            i = j
        elif c == "$" and (m := _DOLLAR_TAG.match(sql, i)) is not None:
            tag = m.group(0)
            j = sql.find(tag, m.end())
            j = n if j < 0 else j + len(tag)
            out.append(sql[i:j].replace("%", "%%"))
            i = j
        elif c == "?":
            if i + 1 < n and sql[i + 1].isdigit():
                raise ValueError(
                    f"numbered placeholders such as {sql[i : i + 3]!r} are not supported on "
                    f"PostgreSQL (in {sql!r}); use plain ? placeholders in order, or :name with a "
                    f"dict of parameters."
                )
            out.append("%s")
            i += 1
        elif c == ":" and named:
            if sql.startswith("::", i):
                out.append("::")
                i += 2
            elif (m := _NAME.match(sql, i + 1)) is not None:
                out.append(f"%({m.group(0)})s")
                i = m.end()
            else:
                out.append(c)
                i += 1
        elif c == "%":
            out.append("%%")
            i += 1
        elif (
            c in "lL" and sql[i : i + 4].upper() == "LIKE" and _LIKE.match(sql, i)
            and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] in "_$.\"`"))
            and _first_keyword(sql) not in ("CREATE", "ALTER")
        ):
            out.append("ILIKE")  # SQLite's LIKE ignores case (of ASCII letters), PostgreSQL's not
            i += 4
        else:
            out.append(c)
            i += 1
    return "".join(out)


_LIKE = re.compile(r"like(?![A-Za-z0-9_$])", re.IGNORECASE)


# -- adaptation ------------------------------------------------------------------------------------


class _BoolAsUnknown(Dumper):
    """A bool as the untyped literal 1 or 0, as sqlite3 binds it: an integer column takes it as
    1 or 0, and a PostgreSQL boolean column as true or false."""

    oid = 0

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


class _NumericAsNumber(Loader):
    """numeric (what ``sum`` and ``avg`` of integers return) as int or float, as SQLite gives."""

    def load(self, data: Any) -> Any:
        text = bytes(data).decode()
        if text.lstrip("-").isdigit():
            return int(text)
        return float(text)


_MISSING = re.compile(r'relation "([^"]+)" does not exist')
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9$]*")


def _case_hint(sql: str, exc: psycopg.Error) -> str | None:
    """What to say when a table named with capitals was written unquoted: SQLite matches names
    in any case, PostgreSQL folds an unquoted one to lower case."""
    m = _MISSING.search(str(exc))
    if m is None:
        return None
    written = {w for w in _WORD.findall(sql) if w.lower() == m.group(1) and w != m.group(1)}
    if not written:
        return None
    name = sorted(written)[0]
    return (
        f"HINT:  SQLite matches table names in any case, PostgreSQL folds an unquoted name to "
        f"lower case: if the table is {name!r}, quote it in the SQL (\"{name}\"), or give tables "
        f"lower-case names."
    )


class _BoolAsInt(Loader):
    """A boolean (what a comparison gives: ``SELECT a = b``) as 1 or 0, as SQLite gives it."""

    def load(self, data: Any) -> Any:
        return 1 if bytes(data) == b"t" else 0


def _cursor(conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
    cur = conn.cursor()
    cur.adapters.register_dumper(bool, _BoolAsUnknown)
    cur.adapters.register_loader("numeric", _NumericAsNumber)
    cur.adapters.register_loader("bool", _BoolAsInt)
    return cur


_INT64 = (-(2**63), 2**63 - 1)


def _param(value: Any, where: str) -> Any:
    """One parameter as sqlite3 binds it, or the error sqlite3 raises for it (psycopg would
    bind more: a list as an array, a Decimal or an int past 64 bits as numeric)."""
    if isinstance(value, float) and math.isnan(value):
        return None  # sqlite3 binds a NaN as NULL
    if value is None or isinstance(value, (str, float, bytes)):
        return value
    if isinstance(value, int):
        if not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
            raise OverflowError(
                f"Python int too large to convert to SQLite INTEGER (parameter {where}: {value} does not "
                f"fit in 64 bits, on SQLite nor in PostgreSQL's bigint); store it as str"
            )
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat(" ")  # sqlite3's own adapters
    if isinstance(value, datetime.date):
        return value.isoformat()
    raise psycopg.ProgrammingError(
        f"Error binding parameter {where}: type {type(value).__name__!r} is not supported "
        f"(sqlite3 binds only None, int, float, str and bytes, so the reducer db on PostgreSQL "
        f"refuses the rest too); convert it first (json.dumps for a list or dict, str for a "
        f"Decimal), or use db.conn (psycopg) directly for PostgreSQL's own types"
    )


def _params(params: Any) -> Any:
    if params is None:
        return ()
    if isinstance(params, Mapping):
        return {k: _param(v, f":{k}") for k, v in params.items()}
    if isinstance(params, (str, bytes)):
        raise TypeError(
            f"parameters must be a sequence (or a dict for :name), got {type(params).__name__} "
            f"{params!r}; wrap a single value in a list: [value]."
        )
    return tuple(_param(v, str(i)) for i, v in enumerate(params, 1))


class PgCursor:
    """The result of ``db.execute``: the parts of ``sqlite3.Cursor`` reducers use."""

    @property
    def lastrowid(self) -> int:
        raise RowidUnavailable(
            "cursor.lastrowid: PostgreSQL has no rowid; add RETURNING to the INSERT and fetch the "
            "key (it works on SQLite too), or use the table's insert() and its last_pk"
        )

    def __init__(self, cur: psycopg.Cursor[Any], sql: str = "") -> None:
        self._cur = cur
        self._sql = sql

    @property
    def rowcount(self) -> int:
        """The rows the statement changed; -1 for a query, as sqlite3 says (psycopg gives how
        many rows it returned)."""
        if self._cur.description is not None and (
            _first_keyword(self._sql) in ("SELECT", "VALUES") or _select_list(self._sql)
        ):
            return -1
        return self._cur.rowcount

    @property
    def description(self) -> tuple[tuple[str, None, None, None, None, None, None], ...] | None:
        """As sqlite3 gives it: each column's name (as SQLite names it) and six Nones."""
        columns = self._cur.description
        if columns is None:
            return None
        names = _sqlite_names(self._sql, [c.name for c in columns])
        return tuple((name, None, None, None, None, None, None) for name in names)

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._cur.description is None:
            return None
        row: tuple[Any, ...] | None = self._cur.fetchone()
        return row

    def fetchall(self) -> list[tuple[Any, ...]]:
        if self._cur.description is None:
            return []
        return list(self._cur.fetchall())

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        if self._cur.description is None:
            return []
        return list(self._cur.fetchmany(size))

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        if self._cur.description is None:
            return iter(())
        return iter(self._cur)

    def close(self) -> None:
        self._cur.close()


# -- the database and its tables -------------------------------------------------------------------


class RowidUnavailable(Exception):
    """What sqlite-utils would answer with a row's rowid, which PostgreSQL has not: ``last_pk``
    or ``last_rowid`` after an insert that gave no key, or ``get``, ``update`` or ``delete`` on a
    table without a primary key. (Not a ``NotFoundError``: the row may well be there.)"""


@dataclass(frozen=True)
class _Shape:
    """What the facade needs to know of a table: its columns (name -> type), primary key, and
    the column filled in from a sequence when left out (with that sequence)."""

    columns: dict[str, str]
    pks: tuple[str, ...]
    identity: str | None
    sequence: str | None


_SHAPE_SQL = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attidentity != '',
       array_position(i.indkey::int2[], a.attnum),
       pg_get_serial_sequence(c.oid::regclass::text, a.attname)
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
WHERE c.oid = to_regclass(%s) AND c.relkind IN ('r', 'p')
ORDER BY a.attnum
"""


class PgDatabase:
    """sqlite-utils' ``Database`` subset on a psycopg connection, in its open transaction.

    The shapes of the tables it has looked at are remembered; ``forget()`` drops them (the
    store calls it when a transaction rolls back, since a table created in it is gone), as does
    any statement through ``execute`` that is not a query or a row change.
    """

    def __init__(self, conn: psycopg.Connection[Any], sync: Callable[[], None] | None = None) -> None:
        self.conn = conn
        # The error of one of this transaction's statements, which PostgreSQL aborted it for.
        self._failed: psycopg.Error | None = None
        # On a connection in pipeline mode (the store's writer): wait for each statement's
        # answer, so that a row count, an error or a lock is there when the reducer goes on.
        self._sync = sync
        self._shapes: dict[str, _Shape | None] = {}

    def __getitem__(self, name: str) -> PgTable:
        return self.table(name)

    def table(self, name: str) -> PgTable:
        """The table ``name`` (it need not exist yet)."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"a table name must be a non-empty str, got {name!r}")
        return PgTable(self, name)

    def __repr__(self) -> str:
        return f"<PgDatabase {self.conn.info.dbname}>"

    @property
    def failed(self) -> psycopg.Error | None:
        """The error of a statement of this transaction that PostgreSQL aborted it for (none
        once a rollback to a savepoint undid it)."""
        return self._failed

    def forget(self) -> None:
        """Drop the remembered table shapes (after a rollback, or DDL run elsewhere)."""
        self._shapes.clear()
        self._failed = None

    def execute(self, sql: str, parameters: Any = None) -> PgCursor:
        """Run one statement, with ``?`` placeholders (or ``:name`` and a dict)."""
        params = _params(parameters)
        query = translate(sql, isinstance(params, dict))
        cur = _cursor(self.conn)
        try:
            cur.execute(query, params)
            if self._sync is not None:
                self._sync()
        except psycopg.errors.InFailedSqlTransaction as exc:
            raise self._after_failure(exc) from exc
        except psycopg.errors.UndefinedTable as exc:
            self._failed = exc
            hint = _case_hint(sql, exc)
            if hint is None:
                raise
            raise psycopg.errors.UndefinedTable(f"{exc}\n{hint}") from exc
        except psycopg.Error as exc:
            self._failed = exc
            raise
        if not sql.lstrip(" \t\r\n(").lower().startswith(_DML):
            self.forget()
        return PgCursor(cur, sql)

    def query(self, sql: str, params: Any = None) -> Iterator[dict[str, Any]]:
        """Run a query now; yield its rows as dicts (a name twice gets ``_2``, as sqlite-utils
        names it). A statement that returns no rows is undone and refused with sqlite-utils'
        ``ValueError``."""
        keyword = _first_keyword(sql)
        if keyword in _QUERY_REJECTED:
            raise ValueError(_QUERY_ROWS_ONLY)
        if keyword in _READS or (
            self.conn.autocommit
            and self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        ):
            # (Outside a transaction, on a connection in autocommit as the store's reads, there
            # is none to hold a savepoint: the statement is its own.)
            cur = self.execute(sql, params)
            if cur.description is None:
                raise ValueError(_QUERY_ROWS_ONLY)
            rows: Iterable[tuple[Any, ...]] = cur
        else:
            # It may change something and return nothing: run it in a savepoint, to undo it then.
            self._plain('SAVEPOINT "sqlite_utils_query"')
            released = False
            try:
                cur = self.execute(sql, params)
                if cur.description is None:
                    raise ValueError(_QUERY_ROWS_ONLY)
                rows = cur.fetchall()
                self._plain('RELEASE "sqlite_utils_query"')
                released = True
            finally:
                if not released:
                    self._plain('ROLLBACK TO "sqlite_utils_query"')
                    self._plain('RELEASE "sqlite_utils_query"')
                    self.forget()
        names = dedupe_keys(d[0] for d in cur.description or ())
        return (dict(zip(names, row, strict=True)) for row in rows)

    def _after_failure(self, exc: psycopg.errors.InFailedSqlTransaction) -> psycopg.Error:
        """The error for a statement refused because an earlier one of this transaction failed
        and the reducer went on: it names that earlier error and says what to do."""
        if self._failed is None:
            return exc
        return psycopg.errors.InFailedSqlTransaction(
            f"an earlier statement of this transaction failed ({type(self._failed).__name__}: "
            f"{str(self._failed).splitlines()[0]}) and the reducer went on after catching it: "
            f"on PostgreSQL that error aborted the whole transaction, so no statement can run "
            f"after it (SQLite goes on). Let the error propagate, or avoid it (ignore=True, "
            f"upsert, INSERT ... ON CONFLICT, or test first for what would fail)"
        )

    def _run(self, sql: str, params: Any = None, *, rows: bool = False) -> list[tuple[Any, ...]]:
        """Run one statement of the reducer db's own (no placeholders translated), with the
        errors ``execute`` gives; its rows with ``rows=True`` (else it is synced, as
        ``execute`` does on a pipeline)."""
        cur = _cursor(self.conn)
        try:
            cur.execute(sql, params)
            if rows:
                return cur.fetchall()
            if self._sync is not None:
                self._sync()
        except psycopg.errors.InFailedSqlTransaction as exc:
            raise self._after_failure(exc) from exc
        except psycopg.Error as exc:
            self._failed = exc
            raise
        return []

    def _plain(self, sql: str) -> None:
        self._run(sql)

    def table_names(self) -> list[str]:
        """The tables of the connection's current schema, by name."""
        found = self._run(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema() ORDER BY c.oid",
            rows=True,
        )
        return [r[0] for r in found]

    def _creating(self, name: str) -> _Shape | None:
        """Hold this transaction's lock on making table ``name``, then read its shape afresh.

        Two transactions that both find no table and both create it (the first inserts of two
        nodes, or of two batches) would have the second fail on PostgreSQL's catalog once the first
        commits; with the lock, the second waits for the first and then finds its table."""
        self.execute("SELECT pg_advisory_xact_lock(?, hashtext(current_schema() || '.' || ?))",
                     [_CREATE_LOCK_CLASS, name])
        self._shapes.pop(name, None)
        return self._shape(name)

    def _shape(self, name: str) -> _Shape | None:
        if name in self._shapes:
            return self._shapes[name]
        rows = self._run(_SHAPE_SQL, (quote_identifier(name),), rows=True)
        shape: _Shape | None = None
        if rows:
            pks = tuple(r[0] for r in sorted((r for r in rows if r[3] is not None), key=lambda r: r[3]))
            identity = next((r[0] for r in rows if r[2] or r[4]), None)
            sequence = next((r[4] for r in rows if r[0] == identity), None)
            shape = _Shape({r[0]: r[1] for r in rows}, pks, identity, sequence)
        self._shapes[name] = shape
        return shape


_INTEGER_TYPES = frozenset({"bigint", "integer", "smallint"})

# The first key of the transaction locks that serialize the making of reducers' tables.
_CREATE_LOCK_CLASS = 0x61660001


_INT_TEXT = re.compile(r"\s*[+-]?\d+\s*\Z")
_REAL_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*\Z")
_MADE_FROM = {
    "bigint": "an int", "integer": "an int", "smallint": "an int", "double precision": "a float",
    "bytea": "bytes", "text": "a str",
}


def _check_exact(table: str, shape: _Shape, rows: list[dict[str, Any]]) -> None:
    """Refuse a float with a fraction bound for an integer column: PostgreSQL would round it
    (SQLite keeps it as it is, a column's type there being only an affinity); and any value a
    column's PostgreSQL type cannot hold, which SQLite would keep as it is (text in a number or
    bytes column, bytes in a text column, a float in a text column, which SQLite writes in its
    own format)."""
    for row in rows:
        for column, value in row.items():
            if (
                type(value) is float and not value.is_integer() and math.isfinite(value)
                and shape.columns.get(column) in _INTEGER_TYPES
            ):
                raise ValueError(
                    f"column {column!r} of table {table!r} holds integers "
                    f"({shape.columns[column]}: it was made from an int), so PostgreSQL would "
                    f"round {value!r} to {round(value)}; store the column as a float from the "
                    f"start (a float in the first row, or create(..., {{{column!r}: float}})), "
                    f"or round the value yourself"
                )
            kind = shape.columns.get(column)
            if value is None or kind is None:
                continue
            bound = _value(value)
            if kind in _INTEGER_TYPES or kind == "double precision":
                fits = (
                    isinstance(bound, (int, float))
                    or isinstance(bound, str)
                    and (_INT_TEXT if kind in _INTEGER_TYPES else _REAL_TEXT).match(bound) is not None
                )
            elif kind == "bytea":
                fits = isinstance(bound, bytes)
            elif kind == "text":
                # (SQLite writes a float there in its own format: 1.0 as '1.0', 1e20 as '1.0e+20')
                fits = not isinstance(bound, (bytes, float)) or (
                    isinstance(bound, float) and math.isnan(bound)
                )
            else:
                fits = True
            if not fits:
                raise ValueError(
                    f"column {column!r} of table {table!r} is {kind} (it was made from "
                    f"{_MADE_FROM.get(kind, 'its first value')}), which cannot hold "
                    f"{type(value).__name__} {value!r:.60}: SQLite stores any value in any column, "
                    f"PostgreSQL does not. Convert the value, or make the column from a value of "
                    f"this type (create(..., {{{column!r}: {type(bound).__name__}}}))"
                )


def _check_keys(table: str, shape: _Shape, rows: list[dict[str, Any]]) -> None:
    """Refuse a row without a value for a key column that is not filled in: SQLite takes a NULL
    in a primary key that is not its rowid (a legacy of SQLite's), PostgreSQL never does."""
    for row in rows:
        for column in shape.pks:
            if column != shape.identity and row.get(column) is None:
                raise ValueError(
                    f"a row of table {table!r} has no value for its primary key column "
                    f"{column!r}: SQLite stores a NULL there (a key column that is not its rowid "
                    f"may be NULL there), PostgreSQL refuses it; give every row its key"
                )


def _unsupported(method: str, extra: Mapping[str, Any]) -> None:
    if extra:
        names = ", ".join(f"{k}=" for k in sorted(extra))
        raise TypeError(
            f"{method}() on PostgreSQL does not support {names}: the reducer db there covers the "
            f"portable subset of sqlite-utils (see docs/guides/postgresql.md). Write the SQL with "
            f"db.execute, or use db.conn (psycopg) directly."
        )


def _pk_tuple(pk: Any) -> tuple[str, ...]:
    if pk is None:
        return ()
    if isinstance(pk, str):
        return (pk,)
    return tuple(pk)


# SQLite compares and sorts text by its bytes (BINARY); PostgreSQL by the database's locale
# unless a column says otherwise ("C": by bytes, as SQLite).
_COLLATE_BINARY = 'COLLATE "C"'


def _pg_type(column: str, kind: Any) -> str:
    sqlite_type = COLUMN_TYPE_MAPPING.get(kind)
    if sqlite_type is None:
        raise ValueError(
            f"column {column!r} has type {kind!r}, which has no column type: use int, float, "
            f"str, bytes, bool, dict or list (or a SQLite type name such as 'TEXT')."
        )
    return PG_TYPES[sqlite_type]


# SQLite's CURRENT_TIMESTAMP, CURRENT_DATE and CURRENT_TIME: UTC text, in its format
# (PostgreSQL's, cast to text, has a fraction of a second and a time zone).
_SQLITE_NOW = {
    name: f"(to_char(statement_timestamp() AT TIME ZONE 'UTC', '{form}'))"
    for name, form in (
        ("CURRENT_TIMESTAMP", "YYYY-MM-DD HH24:MI:SS"), ("CURRENT_DATE", "YYYY-MM-DD"),
        ("CURRENT_TIME", "HH24:MI:SS"),
    )
}


def _quote_default(value: Any) -> str:
    """A column default as SQL, the way sqlite-utils writes it: a quoted literal, a keyword or a
    parenthesized expression as given, anything else quoted."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    if text.upper() in _SQLITE_NOW:
        return _SQLITE_NOW[text.upper()]
    if (text.startswith("'") and text.endswith("'")) or text.upper() == "NULL":
        return text
    if text.upper() in ("TRUE", "FALSE"):
        return "1" if text.upper() == "TRUE" else "0"  # SQLite's booleans are integers
    if text.endswith(")"):
        return f"({text})"
    return "'" + text.replace("'", "''") + "'"


def _value(value: Any) -> Any:
    value = jsonify_if_needed(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value == 0:
        return 0.0  # SQLite keeps -0.0 in a REAL column as 0.0
    return value


class PgTable:
    """One table of a ``PgDatabase`` (sqlite-utils' ``Table`` subset)."""

    def __init__(self, db: PgDatabase, name: str) -> None:
        self.db = db
        self.name = name
        self._last_pk: Any = None
        self._last_rowid: int | None = None
        # Why the last insert's rowid is not known, once it was one PostgreSQL has no rowid for.
        self._no_rowid: str | None = None
        self._pk_is_rowid = False  # last_pk would be that rowid too (no pk= given)

    @property
    def last_pk(self) -> Any:
        """The key of the row the last single-row write touched, as sqlite-utils gives it;
        ``RowidUnavailable`` where sqlite-utils would give a rowid, which PostgreSQL has not."""
        if self._no_rowid is not None and self._pk_is_rowid:
            raise RowidUnavailable(f"last_pk {self._no_rowid}")
        return self._last_pk

    @last_pk.setter
    def last_pk(self, value: Any) -> None:
        self._last_pk = value
        self._no_rowid = None

    @property
    def last_rowid(self) -> int | None:
        """The rowid of the row the last single-row insert wrote: on PostgreSQL only for a table
        whose key is one integer column (SQLite's rowid there); ``RowidUnavailable`` otherwise."""
        if self._no_rowid is not None:
            raise RowidUnavailable(f"last_rowid {self._no_rowid}")
        return self._last_rowid

    @last_rowid.setter
    def last_rowid(self, value: int | None) -> None:
        self._last_rowid = value

    def __repr__(self) -> str:
        return f"<PgTable {self.name}>"

    # -- what it is ----------------------------------------------------------------------------
    def exists(self) -> bool:
        """True if the table exists."""
        return self.db._shape(self.name) is not None

    @property
    def count(self) -> int:
        """How many rows the table holds."""
        cur = self.db.execute(f"SELECT count(*) FROM {quote_identifier(self.name)}")
        row = cur.fetchone()
        assert row is not None
        return int(row[0])

    @property
    def pks(self) -> list[str]:
        """The primary key's columns (sqlite-utils says ``["rowid"]`` for none; here it is an
        error to need one)."""
        shape = self.db._shape(self.name)
        if shape is None:
            raise NotFoundError(f"table {self.name!r} does not exist")
        if not shape.pks:
            raise RowidUnavailable(
                f"table {self.name!r} has no primary key, and PostgreSQL has no rowid to stand "
                f"for one as SQLite does: create it with pk=... to get, update or delete rows by "
                f"key"
            )
        return list(shape.pks)

    @property
    def columns_dict(self) -> dict[str, str]:
        """{column: PostgreSQL type}, in table order."""
        shape = self.db._shape(self.name)
        return dict(shape.columns) if shape is not None else {}

    @property
    def rows(self) -> Iterator[dict[str, Any]]:
        return self.rows_where()

    # -- creating --------------------------------------------------------------------------------
    def create(
        self,
        columns: Mapping[str, Any],
        pk: Any = None,
        *,
        not_null: Iterable[str] | None = None,
        defaults: Mapping[str, Any] | None = None,
        column_order: Sequence[str] | None = None,
        if_not_exists: bool = False,
        replace: bool = False,
        ignore: bool = False,
        **unsupported: Any,
    ) -> PgTable:
        """Create the table, with sqlite-utils' column types mapped to PostgreSQL's."""
        _unsupported("create", unsupported)
        if not columns:
            raise ValueError("Tables must have at least one column")
        items = list(columns.items())
        if column_order is not None:
            order = list(column_order)
            items.sort(key=lambda p: order.index(p[0]) if p[0] in order else 999)
        pks = _pk_tuple(pk)
        if len(pks) == 1 and pks[0] not in dict(items):
            items.insert(0, (pks[0], int))
        names = [c for c, _ in items]
        nn = set(not_null or ())
        dfl = dict(defaults or {})
        for what, given in (("not_null", nn), ("defaults", set(dfl))):
            if not given <= set(names):
                raise ValueError(
                    f"{what} set {sorted(given)!r} includes items not in columns {names!r}"
                )
        missing_pk = [p for p in pks if p not in names]
        if missing_pk:
            raise ValueError(f"primary key columns {missing_pk!r} are not in columns {names!r}")
        quoted = quote_identifier(self.name)
        if self.db._creating(self.name) is not None:
            if if_not_exists or ignore:
                return self
            if replace:
                self.db.execute(f"DROP TABLE {quoted}")
        defs = []
        for column, kind in items:
            pg_type = _pg_type(column, kind)
            extra = [_COLLATE_BINARY] if pg_type == "text" else []
            if len(pks) == 1 and column == pks[0]:
                # SQLite's INTEGER PRIMARY KEY is the rowid: filled in when a row leaves it out.
                if pg_type == "bigint":
                    extra.append("GENERATED BY DEFAULT AS IDENTITY")
                extra.append("PRIMARY KEY")
            if column in nn:
                extra.append("NOT NULL")
            if dfl.get(column) is not None:
                extra.append(f"DEFAULT {_quote_default(dfl[column])}")
            defs.append(" ".join([quote_identifier(column), pg_type, *extra]))
        if len(pks) > 1:
            defs.append(f"PRIMARY KEY ({', '.join(map(quote_identifier, pks))})")
        exists = "IF NOT EXISTS " if if_not_exists else ""
        self.db.execute(f"CREATE TABLE {exists}{quoted} ({', '.join(defs)})")
        return self

    def _add_missing_columns(self, records: Sequence[Mapping[str, Any]]) -> None:
        shape = self.db._shape(self.name)
        assert shape is not None
        wanted = suggest_column_types([dict(r) for r in records])
        if any(column not in shape.columns for column in wanted):
            # Under the making lock, read afresh: another transaction may be adding them now.
            shape = self.db._creating(self.name)
            assert shape is not None
        for column, kind in wanted.items():
            if column not in shape.columns:
                self.db.execute(
                    f"ALTER TABLE {quote_identifier(self.name)} ADD COLUMN "
                    f"{quote_identifier(column)} {_pg_type(column, kind)}"
                    + (f" {_COLLATE_BINARY}" if _pg_type(column, kind) == "text" else "")
                )

    # -- writing ---------------------------------------------------------------------------------
    def insert(
        self,
        record: Mapping[str, Any],
        pk: Any = None,
        *,
        not_null: Iterable[str] | None = None,
        defaults: Mapping[str, Any] | None = None,
        column_order: Sequence[str] | None = None,
        alter: bool = False,
        ignore: bool = False,
        replace: bool = False,
        **unsupported: Any,
    ) -> PgTable:
        """Insert one row, creating the table from it first if there is none."""
        _unsupported("insert", unsupported)
        return self.insert_all(
            [record], pk, not_null=not_null, defaults=defaults, column_order=column_order,
            alter=alter, ignore=ignore, replace=replace,
        )

    def upsert(
        self,
        record: Mapping[str, Any],
        pk: Any = None,
        *,
        not_null: Iterable[str] | None = None,
        defaults: Mapping[str, Any] | None = None,
        column_order: Sequence[str] | None = None,
        alter: bool = False,
        **unsupported: Any,
    ) -> PgTable:
        """Insert the row, or update the columns it names in the row with its key."""
        _unsupported("upsert", unsupported)
        return self.insert_all(
            [record], pk, not_null=not_null, defaults=defaults, column_order=column_order,
            alter=alter, upsert=True,
        )

    def upsert_all(
        self, records: Iterable[Mapping[str, Any]], pk: Any = None, **kwargs: Any
    ) -> PgTable:
        """``upsert`` for each row, in one statement per chunk."""
        return self.insert_all(records, pk, upsert=True, **kwargs)

    def insert_all(
        self,
        records: Iterable[Mapping[str, Any]],
        pk: Any = None,
        *,
        not_null: Iterable[str] | None = None,
        defaults: Mapping[str, Any] | None = None,
        column_order: Sequence[str] | None = None,
        batch_size: int = DEFAULT_BATCH,
        alter: bool = False,
        ignore: bool = False,
        replace: bool = False,
        truncate: bool = False,
        upsert: bool = False,
        **unsupported: Any,
    ) -> PgTable:
        """Insert rows in chunks, creating the table from the first chunk if there is none."""
        _unsupported("upsert_all" if upsert else "insert_all", unsupported)
        if ignore and replace:
            raise ValueError("Use either ignore=True or replace=True, not both")
        rows = [dict(r) for r in records]
        if not rows:
            return self
        for r in rows:
            if not isinstance(r, dict):
                raise TypeError(f"rows must be dicts of column -> value, got {type(r).__name__}")
        pks = _pk_tuple(pk)
        shape = self.db._shape(self.name) or self.db._creating(self.name)
        if upsert and not pks:
            pks = shape.pks if shape is not None else ()
            if not pks:
                raise PrimaryKeyRequired("upsert() requires a pk")
        if pks and shape is not None:
            missing = [p for p in pks if p not in shape.columns]
            if missing and not alter:
                from sqlite_utils.db import InvalidColumns

                raise InvalidColumns(
                    f"Invalid primary key column{'s' if len(missing) > 1 else ''} {missing} for "
                    f"table {self.name} with columns {list(shape.columns)}"
                )
        width = max(1, len(rows[0]))
        size = max(1, min(batch_size, SQLITE_MAX_VARS // width))
        if truncate and shape is not None:
            self.db.execute(f"DELETE FROM {quote_identifier(self.name)}")
        self.last_pk = None
        self.last_rowid = None
        all_columns: list[str] = []
        last: tuple[Any, ...] | None = None
        for start in range(0, len(rows), size):
            chunk = rows[start : start + size]
            if start == 0:
                if shape is None:
                    self.create(
                        suggest_column_types(chunk), pks or None, not_null=not_null,
                        defaults=defaults, column_order=column_order,
                    )
                elif alter:
                    self._add_missing_columns(chunk)
                all_columns = sorted({c for r in chunk for c in r})
            else:
                if alter:
                    self._add_missing_columns(chunk)
                all_columns += [c for r in chunk for c in r if c not in all_columns]
            last = self._insert_chunk(chunk, all_columns, upsert=upsert, ignore=ignore,
                                      replace=replace, pk=pks)
        if len(rows) == 1:
            self._set_last(rows[0], pks, last, upsert=upsert)
        return self

    def _set_last(
        self, row: dict[str, Any], pks: tuple[str, ...], last: tuple[Any, ...] | None, *,
        upsert: bool,
    ) -> None:
        """``last_pk`` and ``last_rowid`` after a one-row write, as sqlite-utils sets them."""
        shape = self.db._shape(self.name)
        assert shape is not None
        key = shape.pks
        # SQLite's rowid is this table's key when that is one integer column (INTEGER PRIMARY KEY).
        rowid_key = len(key) == 1 and shape.columns[key[0]] in _INTEGER_TYPES

        def of_row(names: tuple[str, ...]) -> Any:
            if not names or not all(k in row for k in names):
                return None
            return row[names[0]] if len(names) == 1 else tuple(row[k] for k in names)

        if upsert:
            self.last_pk = of_row(pks or key)
            return
        if last is None or not key:  # a row ignored, or a table without a key
            self.last_pk = of_row(pks or key)
            if rowid_key:
                self.last_rowid = self.last_pk if not pks or pks == key else of_row(key)
        else:
            self.last_pk = (last[0] if len(last) == 1 else last) if pks in ((), key) else of_row(pks)
            if rowid_key:
                self.last_rowid = last[0]
        if rowid_key:
            return
        self._no_rowid = (
            f"of table {self.name!r} would be the new row's rowid on SQLite, and PostgreSQL "
            f"has no rowid: "
            + ("the table has no primary key (create it with pk=... to have one)" if not key else
               f"pass pk={list(key) if len(key) > 1 else key[0]!r} to insert to get its key as "
               f"last_pk")
        )
        # sqlite-utils' last_pk is that rowid too when no pk= was given and the row went in.
        self._pk_is_rowid = not pks and (not key or last is not None)

    def _insert_chunk(
        self, chunk: list[dict[str, Any]], columns: list[str], *, upsert: bool, ignore: bool,
        replace: bool, pk: tuple[str, ...],
    ) -> tuple[Any, ...] | None:
        shape = self.db._shape(self.name)
        assert shape is not None
        _check_exact(self.name, shape, chunk)
        _check_keys(self.name, shape, chunk)
        key = shape.pks or pk
        if (upsert or replace) and key and len(chunk) > 1:
            # One INSERT ... ON CONFLICT may not touch a row twice: rows that repeat a key go
            # one statement each, in order, as SQLite applies them.
            keys = [tuple(r.get(k) for k in key) for r in chunk]
            if len(set(keys)) != len(keys):
                last = None
                for r in chunk:
                    last = self._insert_chunk([r], columns, upsert=upsert, ignore=ignore,
                                              replace=replace, pk=pk)
                return last
        quoted = quote_identifier(self.name)
        if not columns:
            sql = f"INSERT INTO {quoted} DEFAULT VALUES"
            if ignore:
                sql += " ON CONFLICT DO NOTHING"
            returning = f" RETURNING {', '.join(map(quote_identifier, key))}" if key else ""
            last = None
            for _ in chunk:
                cur = self.db.execute(sql + returning)
                last = cur.fetchone()
            return last
        identity = shape.identity
        placeholders: list[str] = []
        params: list[Any] = []
        explicit_identity = False
        for r in chunk:
            marks = []
            for c in columns:
                v = r.get(c)
                if c == identity and v is None:
                    marks.append("DEFAULT")  # SQLite fills in a NULL rowid: so does the sequence
                    continue
                if c == identity:
                    explicit_identity = True
                marks.append("?")
                params.append(_value(v))
            placeholders.append(f"({', '.join(marks)})")
        sql = (
            f"INSERT INTO {quoted} ({', '.join(map(quote_identifier, columns))}) "
            f"VALUES {', '.join(placeholders)}"
        )
        if replace and key:
            # INSERT OR REPLACE: the whole row is the new one (columns it leaves out are reset).
            others = [c for c in shape.columns if c not in key]
            sets = ", ".join(f"{quote_identifier(c)} = EXCLUDED.{quote_identifier(c)}" for c in others)
            conflict = ", ".join(map(quote_identifier, key))
            sql += f" ON CONFLICT ({conflict}) " + (f"DO UPDATE SET {sets}" if sets else "DO NOTHING")
        elif upsert:
            others = [c for c in columns if c not in key]
            sets = ", ".join(f"{quote_identifier(c)} = EXCLUDED.{quote_identifier(c)}" for c in others)
            conflict = ", ".join(map(quote_identifier, key))
            sql += f" ON CONFLICT ({conflict}) " + (f"DO UPDATE SET {sets}" if sets else "DO NOTHING")
        elif ignore:
            sql += " ON CONFLICT DO NOTHING"
        if key and len(chunk) == 1:
            sql += f" RETURNING {', '.join(map(quote_identifier, key))}"
        cur = self.db.execute(sql, params)
        last = cur.fetchone() if key and len(chunk) == 1 else None
        if explicit_identity and shape.sequence is not None:
            # Keys given explicitly: move the sequence past them, as SQLite's next rowid is past
            # the largest one.
            self.db.execute(
                f"SELECT setval(?, GREATEST((SELECT max({quote_identifier(identity or '')}) "
                f"FROM {quoted}), (SELECT last_value FROM {shape.sequence})))",
                [shape.sequence],
            )
        return last

    def _where_pk(self, pk_values: Any) -> tuple[str, list[Any]]:
        values = list(pk_values) if isinstance(pk_values, (list, tuple)) else [pk_values]
        pks = self.pks
        if len(pks) != len(values):
            raise NotFoundError(
                "Need {} primary key value{}".format(len(pks), "" if len(pks) == 1 else "s")
            )
        return " AND ".join(f"{quote_identifier(p)} = ?" for p in pks), [_value(v) for v in values]

    def get(self, pk_values: Any) -> dict[str, Any]:
        """The row with this primary key; ``NotFoundError`` if there is none."""
        if not self.exists():
            raise NotFoundError
        where, params = self._where_pk(pk_values)
        for row in self.rows_where(where, params):
            self.last_pk = params[0] if len(params) == 1 else tuple(params)
            return row
        raise NotFoundError

    def update(
        self, pk_values: Any, updates: Mapping[str, Any] | None = None, *, alter: bool = False,
        **unsupported: Any,
    ) -> PgTable:
        """Set ``updates`` in the row with this primary key (``NotFoundError`` if none)."""
        _unsupported("update", unsupported)
        self.get(pk_values)
        updates = dict(updates or {})
        if not updates:
            return self
        if alter:
            self._add_missing_columns([updates])
        shape = self.db._shape(self.name)
        if shape is not None:
            _check_exact(self.name, shape, [updates])
        where, params = self._where_pk(pk_values)
        sets = ", ".join(f"{quote_identifier(c)} = ?" for c in updates)
        self.db.execute(
            f"UPDATE {quote_identifier(self.name)} SET {sets} WHERE {where}",
            [*(_value(v) for v in updates.values()), *params],
        )
        self.last_pk = params[0] if len(params) == 1 else tuple(params)
        return self

    def delete(self, pk_values: Any) -> PgTable:
        """Delete the row with this primary key (``NotFoundError`` if none)."""
        self.get(pk_values)
        where, params = self._where_pk(pk_values)
        self.db.execute(f"DELETE FROM {quote_identifier(self.name)} WHERE {where}", params)
        return self

    def delete_where(self, where: str | None = None, where_args: Any = None) -> PgTable:
        """Delete the rows matching ``where`` (every row without one)."""
        if not self.exists():
            return self
        sql = f"DELETE FROM {quote_identifier(self.name)}"
        if where is not None:
            sql += " WHERE " + where
        self.db.execute(sql, where_args)
        return self

    # -- reading ---------------------------------------------------------------------------------
    def rows_where(
        self,
        where: str | None = None,
        where_args: Any = None,
        order_by: str | None = None,
        select: str = "*",
        limit: int | None = None,
        offset: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The rows matching ``where`` (every row without one), as dicts."""
        if not self.exists():
            return iter(())
        sql = f"SELECT {select} FROM {quote_identifier(self.name)}"
        if where is not None:
            sql += " WHERE " + where
        if order_by is not None:
            sql += " ORDER BY " + _nulls_first(order_by)
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if offset is not None:
            sql += f" OFFSET {int(offset)}"
        return self.db.query(sql, where_args)
