"""Run one program of the documentation: ``python -m examples.docs NAME [ARGS...]``.

The programs are imported by their module name (never run as ``__main__``), so the workflows they
define are stored under keys like ``examples.docs.failures:quest`` that a restarted process finds.
"""

import importlib
import logging
import sys

import structlog

PROGRAMS = ("failures", "persistence", "porting", "versioning")

if len(sys.argv) < 2 or sys.argv[1] not in PROGRAMS:
    sys.exit(f"usage: python -m examples.docs {{{','.join(PROGRAMS)}}} [ARGS...]")
# Only warnings and errors, on stderr: stdout is the program's own output.
structlog.configure(
    wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    logger_factory=structlog.PrintLoggerFactory(sys.stderr),
)
importlib.import_module(f"examples.docs.{sys.argv[1]}").main(*sys.argv[2:])
