"""What both backends' schemas share: the marks that make a database actorflow's, and the sizes
of what a workflow's row and history keep."""

from __future__ import annotations

# "AFW1" as a big-endian 32-bit integer: the SQLite header field that names the application.
APPLICATION_ID = 0x41465731

# Every how many steps a workflow's history is trimmed (by index), when the system keeps only the
# newest steps (``history_limit``; by default every step is kept).
HISTORY_TRIM_EVERY = 50
# How many of a workflow's newest steps its row describes at least (``recent_steps``: what woke
# each; at most twice as many, then the older ones move to the history table together).
RECENT_STEPS = 16

# Every file of the released schema line says so in its meta table (version 1 writes the row).
# Development builds before 0.1.0 wrote versions 1 to 5 without it (squashed into this version
# 1): a file without the row is one of theirs, whatever its version.
SCHEMA_LINE = ("schema_line", "release")


def dev_build_message(where: str, version: int, remedy: str) -> str:
    """What to say of a database a development build made before 0.1.0 (its ``version``)."""
    return (
        f"{where} was made by a development build of actorflow from before 0.1.0 (schema "
        f"version {version} of the pre-release numbering, no {SCHEMA_LINE[0]!r} mark in its "
        f"meta table); this actorflow cannot read or convert it. Recreate it: {remedy}."
    )
