"""Fixtures for the integration tests: the demo's database on each backend."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.demo import clock_file
from persistence import open_store
from tests.conftest import schema_of


@dataclasses.dataclass
class DemoDb:
    """Where a demo test's world lives (a SQLite file or a PostgreSQL URL) and its clock file,
    read back as any application could: through a read-only store."""

    db: str
    clock: Path

    @property
    def cli(self) -> tuple[str, ...]:
        """``wf demo`` options naming this database and its clock file."""
        return ("--db", self.db, "--clock-file", str(self.clock))

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """The rows of ``sql``, as tuples (name its columns apart: they come through dicts)."""
        store = open_store(self.db, owner=False)
        try:
            return [tuple(r.values()) for r in store.read_table(sql, params)]
        finally:
            store.close()

    def workflows(self) -> dict[str, Any]:
        """{workflow id: its record}, every workflow the database holds."""
        store = open_store(self.db, owner=False)
        try:
            return {r.id: r for r in store.list_workflows()}
        finally:
            store.close()

    def pruned_total(self) -> int:
        store = open_store(self.db, owner=False)
        try:
            return store.pruned_total()
        finally:
            store.close()


def _demo_db(kind: str, request: pytest.FixtureRequest, tmp_path: Path, name: str) -> Iterator[DemoDb]:
    if kind == "sqlite":
        db = str(tmp_path / name)
        yield DemoDb(db, clock_file(db).resolve())
        return
    server = request.getfixturevalue("pg_durable_server" if kind == "postgres-durable" else "pg_server")
    with server.schema() as url:
        db = f"{url}&schema={schema_of(url)}"
        yield DemoDb(db, tmp_path / clock_file(db))


@pytest.fixture(params=["sqlite", "postgres"])
def demo_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DemoDb]:
    """The demo's database, on each backend (PostgreSQL: a schema of the test's own)."""
    yield from _demo_db(request.param, request, tmp_path, "demo.db")


@pytest.fixture(params=["sqlite", "postgres-durable"])
def durable_demo_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DemoDb]:
    """``demo_db`` for kill tests: PostgreSQL on the server with production settings (fsync on)."""
    yield from _demo_db(request.param, request, tmp_path, "demo.db")
