"""Targeted checks of compiler fidelity that the corpus cannot express: modules without a
``__spec__``, and the messages and errors a user sees."""

from __future__ import annotations

import sys
import textwrap
import types
import warnings

from workflows import CompileWarning
from workflows.testing import WorkflowHarness


def test_awaiting_with_in_a_module_without_spec_compiles(tmp_path):
    """A module built with types.ModuleType (``__spec__`` None) may hold a with that awaits:
    the compile warning is issued without asking the missing loader for the source line."""
    path = tmp_path / "specless_mod.py"
    path.write_text(textwrap.dedent("""
        from workflows import timer, workflow

        class Res:
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return False

        @workflow
        async def wf(x):
            with Res():
                await timer("t", 1)
            return x
    """))
    mod = types.ModuleType("specless_mod")
    assert mod.__spec__ is None
    sys.modules["specless_mod"] = mod
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)  # noqa: S102
        assert any(issubclass(w.category, CompileWarning) and w.lineno == 12 for w in caught)
        h = WorkflowHarness(mod.wf, 5)
        h.send(None)
        assert h.done and h.value == 5
    finally:
        del sys.modules["specless_mod"]
