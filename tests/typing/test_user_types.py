"""The typed API, as a user meets it: a venv built exactly as the README's test command builds it
(an editable install of a clean copy of the checkout, with the test extra), and `mypy --strict`
run there on a user's own files (SPEC §8). The same venv runs `wf demo`: one venv for the demo,
the tests and the user's type checks."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASES = pathlib.Path(__file__).resolve().parent / "cases"
GUIDE_EXAMPLE = ROOT / "examples" / "docs" / "typed_shop.py"
# What a clean checkout does not hold: venvs, caches, what installs and runs leave behind.
NOT_CHECKED_IN = shutil.ignore_patterns(
    ".git",
    ".venv",
    "venv*",
    "__pycache__",
    "*.egg-info",
    ".*cache",
    ".hypothesis",
    "build",
    "*.db",
    "*.db-*",
    "*.clock",
    "*.log",
)
EXPECT = re.compile(r"# E: \[([a-z-]+)\] (.*?)(?=\s+# E: |$)")
REPORTED = re.compile(
    r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<text>.*)  \[(?P<code>[a-z-]+)\]$"
)
# The README's test command: `python3 -m venv .venv && .venv/bin/pip install ... && .venv/bin/pytest`.
README_TEST_COMMAND = re.compile(
    r"^(python3 -m venv \.venv && \.venv/bin/pip install [^\n]*'\.\[test\]'[^\n]*?) && \.venv/bin/pytest$",
    re.M,
)

pytestmark = pytest.mark.slow


def _run(
    cmd: list[str], cwd: pathlib.Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH", "VIRTUAL_ENV")
    }
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _check(out: subprocess.CompletedProcess[str], what: str) -> None:
    assert out.returncode == 0, f"{what} failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"


def readme_install_command() -> str:
    """The install half of the README's test command (what comes before `.venv/bin/pytest`)."""
    found = README_TEST_COMMAND.findall((ROOT / "README.md").read_text())
    assert len(found) == 1, (
        "the README should show one test command: python3 -m venv .venv && .venv/bin/pip install -e '.[test]' ... && .venv/bin/pytest"
    )
    return str(found[0])


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A clean copy of the checkout (an editable install writes its metadata into the checkout),
    with the venv the README's test command builds, on the Python running these tests."""
    src = tmp_path_factory.mktemp("typing") / "checkout"
    shutil.copytree(ROOT, src, ignore=NOT_CHECKED_IN)
    command = readme_install_command()
    assert command.startswith("python3 ")
    command = f"{sys.executable} {command.removeprefix('python3 ')}"  # this run's Python
    _check(_run(["bash", "-c", command], src, timeout=900), command)
    return src


@pytest.fixture(scope="module")
def user_venv(checkout: pathlib.Path) -> pathlib.Path:
    return checkout / ".venv" / "bin" / "python"


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """One cache for the module's mypy runs: the first is cold, the others reuse what it read."""
    return tmp_path_factory.mktemp("mypy-cache")


def _mypy(
    python: pathlib.Path, case: str, tmp_path: pathlib.Path, cache: pathlib.Path
) -> subprocess.CompletedProcess[str]:
    # Run from a folder of its own, outside the checkout: the packages come from the venv only.
    shutil.copy2(CASES / case if (CASES / case).exists() else GUIDE_EXAMPLE, tmp_path / case)
    return _run(
        [
            str(python),
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(cache),
            "--show-error-codes",
            "--no-color-output",
            "--no-error-summary",
            case,
        ],
        tmp_path,
    )


def test_the_packages_come_from_the_editable_install(
    user_venv: pathlib.Path, checkout: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """The venv imports workflows, persistence and actors from the checkout it was installed
    from, through a plain path entry (no import hook, which type checkers cannot follow), with
    py.typed beside them."""
    out = _run(
        [
            str(user_venv),
            "-c",
            "import actors, workflows, persistence, sys; "
            "print(workflows.__file__); print(actors.__file__); print(persistence.__file__); "
            "print([m for m in sys.meta_path if 'editable' in type(m).__module__])",
        ],
        tmp_path,
    )
    _check(out, "import")
    *files, hooks = out.stdout.splitlines()
    for line in files:
        path = pathlib.Path(line)
        assert path.parent.parent == checkout, path
        assert (path.parent / "py.typed").exists(), path
    assert hooks == "[]", f"the editable install uses an import hook: {hooks}"


def test_a_wrong_argument_to_start_is_caught(
    user_venv: pathlib.Path, tmp_path: pathlib.Path, mypy_cache: pathlib.Path
) -> None:
    """A small user program that passes a str where its workflow takes an int fails `mypy
    --strict` on that line, and only there."""
    (tmp_path / "prog.py").write_text(
        "from actors import ActorSystem\n"
        "from workflows import workflow\n"
        "\n"
        "\n"
        "@workflow\n"
        "async def greet(name: str, times: int) -> str:\n"
        "    return name * times\n"
        "\n"
        "\n"
        "def main() -> None:\n"
        "    with ActorSystem('greet.db') as system:\n"
        "        print(system.start(greet, 'hi', 'three', id='g').result(timeout=5))\n"
    )
    out = _run(
        [
            str(user_venv),
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(mypy_cache),
            "--show-error-codes",
            "--no-color-output",
            "--no-error-summary",
            "prog.py",
        ],
        tmp_path,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    reported = [m for m in map(REPORTED.match, out.stdout.splitlines()) if m]
    assert [(m["line"], m["code"]) for m in reported] == [("12", "arg-type")], out.stdout
    assert 'Argument 1 to "start" of "ActorSystem"' in reported[0]["text"], out.stdout


def test_the_same_venv_runs_the_demo(user_venv: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """`wf demo` runs in the venv the types were checked in, and its world moves."""
    wf = user_venv.parent / "wf"
    out = _run(
        [str(wf), "demo", "--db", str(tmp_path / "demo.db"), "--duration", "3", "--no-view"],
        tmp_path,
        timeout=120,
    )
    _check(out, "wf demo")
    assert "finished" in out.stdout or "running" in out.stdout, out.stdout[-2000:]


def test_right_uses_pass_mypy_strict(
    user_venv: pathlib.Path, tmp_path: pathlib.Path, mypy_cache: pathlib.Path
) -> None:
    """A user file using every part of the typed API rightly (with assert_type on each result:
    nothing is Any where the API promises a type) passes `mypy --strict` with no error."""
    out = _mypy(user_venv, "shop_ok.py", tmp_path, mypy_cache)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_talking_to_workflows_passes_mypy_strict(
    user_venv: pathlib.Path, tmp_path: pathlib.Path, mypy_cache: pathlib.Path
) -> None:
    """A user file that publishes, asks and reads history (``ask``/``published`` are ``Any``,
    ``await request(...)`` a ``Request``) passes `mypy --strict` with no error."""
    out = _mypy(user_venv, "talk_ok.py", tmp_path, mypy_cache)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_the_guide_example_passes_mypy_strict_and_runs(
    user_venv: pathlib.Path, tmp_path: pathlib.Path, mypy_cache: pathlib.Path
) -> None:
    """The typed program the guide shows passes `mypy --strict` and prints its receipt."""
    out = _mypy(user_venv, GUIDE_EXAMPLE.name, tmp_path, mypy_cache)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr
    ran = _run([sys.executable, "-c", "from examples.docs.typed_shop import main; main()"], ROOT)
    _check(ran, "the guide's example")
    assert "order-1: paid 2.50" in ran.stdout.splitlines(), ran.stdout


def test_wrong_uses_are_each_reported(
    user_venv: pathlib.Path, tmp_path: pathlib.Path, mypy_cache: pathlib.Path
) -> None:
    """Each wrong use in the user file is reported with the expected code and message, and
    nothing else is: wrong argument types to procedure, spawn, start and an inline call, a result
    assigned to the wrong type, a wrong return, options of the wrong type."""
    expected: set[tuple[int, str, str]] = set()
    for n, line in enumerate((CASES / "shop_wrong.py").read_text().splitlines(), 1):
        if "# E: [" in line:
            expected |= {(n, code, text) for code, text in EXPECT.findall(line)}
    assert len(expected) >= 15
    out = _mypy(user_venv, "shop_wrong.py", tmp_path, mypy_cache)
    assert out.returncode == 1, out.stdout + out.stderr
    reported = [m for m in map(REPORTED.match, out.stdout.splitlines()) if m]
    missing = [
        (n, code, text)
        for n, code, text in sorted(expected)
        if not any(
            int(m["line"]) == n and m["code"] == code and text in m["text"] for m in reported
        )
    ]
    unexpected = [
        m.group(0)
        for m in reported
        if not any(int(m["line"]) == n and m["code"] == code for n, code, _ in expected)
    ]
    assert not missing and not unexpected, (
        f"missing: {missing}\nunexpected: {unexpected}\nmypy said:\n{out.stdout}"
    )
    assert len(reported) == len(expected), out.stdout
