"""Whether this interpreter is one whose object layouts the ``ctypes`` readers of hidden iterator
and table state were written for (``_dequestate``, ``_odictstate``, ``_memview``, ``_settable``):
CPython 3.11 to 3.13 with the GIL. Each reader also checks its own layout when it loads."""

from __future__ import annotations

import sys
import sysconfig


def known() -> bool:
    """True on CPython 3.11 to 3.13 built with the GIL."""
    return (
        sys.implementation.name == "cpython"
        and (3, 11) <= sys.version_info[:2] <= (3, 13)
        and not sysconfig.get_config_var("Py_GIL_DISABLED")
    )
