"""A program on SQLite never loads psycopg: the PostgreSQL backend is imported when a
``postgresql://`` URL is opened, and only then."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROGRAM = """
import sys
import actors, persistence, workflows
from actors import ActorSystem
from persistence import open_store
store = open_store(sys.argv[1] + "/a.db")
store.close()
system = ActorSystem(sys.argv[1] + "/b.db")
system.shutdown()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("psycopg", "psycopg_pool")
                or m.startswith("persistence._pg"))
print(loaded)
"""


def test_opening_sqlite_does_not_import_psycopg(tmp_path: pathlib.Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path)], cwd=ROOT, capture_output=True,
        text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_a_postgresql_url_without_psycopg_says_what_to_install(tmp_path: pathlib.Path) -> None:
    program = (
        "import sys\n"
        "sys.modules['psycopg'] = None  # as if the extra were not installed\n"
        "from persistence import PersistenceError, open_store\n"
        "try:\n"
        "    open_store('postgresql://game@localhost/game')\n"
        "except PersistenceError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "install the postgres extra from a checkout with pip install -e '.[postgres]'" in out.stdout, out.stdout
