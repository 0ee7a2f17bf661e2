"""The corpus: every workflow the corpus modules register with ``diffharness.add``, and its cases.

It lives here, in a module no corpus program imports, and not in ``diffharness``, which every
corpus module imports: a checkpoint walks the module data of the modules its workflow's module
reaches whenever that data changed since its last walk (and the corpus programs change it at
every step: the ``probes`` log), so a registry of some 600 entries (their functions, cases and
oracles) held there was walked up to 200,000 objects at a time, at nearly every checkpoint of the
compiler's tests: minutes of the suite spent on the tests' own bookkeeping, not on the programs.
"""

from __future__ import annotations

from typing import Any

CORPUS: list[Any] = []  # diffharness.Entry
