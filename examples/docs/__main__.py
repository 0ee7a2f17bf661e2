"""Run one program of the documentation: ``python -m examples.docs NAME [ARGS...]``.

The programs are imported by their module name (never run as ``__main__``), so the workflows they
define are stored under keys like ``examples.docs.failures:quest`` that a restarted process finds.
"""

import importlib
import sys

PROGRAMS = ("asyncio_server", "failures", "persistence", "porting", "upgrade", "versioning")

if len(sys.argv) < 2 or sys.argv[1] not in PROGRAMS:
    sys.exit(f"usage: python -m examples.docs {{{','.join(PROGRAMS)}}} [ARGS...]")
# No logging configured: the runtime's warnings and errors reach stderr (the standard library's
# last resort), and stdout is the program's own output.
importlib.import_module(f"examples.docs.{sys.argv[1]}").main(*sys.argv[2:])
