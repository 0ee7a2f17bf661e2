"""Kills that land where a kill test needs them, whatever the machine's speed.

A kill timed by the wall clock lands where the machine's speed puts it: on a fast or idle machine
the work may be done before it, on a loaded one it may fall before the work began. So a kill test
here kills on progress instead: it watches what the process has committed (a count read from the
database) and sends SIGKILL once that count has moved past a target the test drew at random. The
kill then lands while the work is under way, in a step, a commit or between them, wherever the
process happens to be; a run that finished before its target was reached (there was less to do
than the test hoped) is reported, and the test retries on fresh work rather than failing.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable

POLL = 0.002  # seconds between two looks at the progress count


def kill_on_progress(
    proc: subprocess.Popen[str] | subprocess.Popen[bytes],
    progress: Callable[[], int],
    target: int,
    *,
    timeout: float = 120.0,
) -> bool:
    """SIGKILL ``proc`` as soon as ``progress()`` reaches ``target``. True if it was killed, False
    if it exited first (its exit status is the caller's to check). Raises if neither happened
    within ``timeout`` seconds (the process is killed then too)."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if progress() >= target:
            proc.send_signal(signal.SIGKILL)
            return proc.wait(timeout=30) == -signal.SIGKILL  # not if it exited just before
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait(timeout=30)
            raise AssertionError(
                f"the process made no progress to {target} in {timeout:.0f} s (at {progress()}); it was killed"
            )
        time.sleep(POLL)
    return False
