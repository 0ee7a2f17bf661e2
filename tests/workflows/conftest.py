"""Test configuration for the compiler's tests.

The corpus and the generated programs use ``with`` across awaits and ``global`` writes on
purpose, to check their semantics; the CompileWarning each of them earns at decoration time is
expected there and silenced for workflows defined by this package's own modules only.
``test_compiler_warnings.py`` checks the warnings themselves (it records them explicitly).
"""

from __future__ import annotations


def pytest_configure(config):
    """Ignore CompileWarnings of the workflows this test package defines on purpose."""
    config.addinivalue_line(
        "filterwarnings", r"ignore::workflows.CompileWarning:tests\.workflows\."
    )
