"""A process for the retry kill test: a workflow calls a procedure that always fails, with
``maximum_attempts=3`` and a few seconds of backoff; each execution appends a line to a file
(fsynced) before it raises.

``python -m tests.integration.retry_worker DB EXECUTIONS start``: start the workflow and wait to
be killed. ``... resume``: open the database again and print the workflow's result.
"""

from __future__ import annotations

import os
import sys
import time

from actors import ActorSystem
from workflows import ProcedureFailed, RetryPolicy, procedure, workflow

WORKFLOW_ID = "retry-after-kill"
BACKOFF = 3.0


@procedure(retry=RetryPolicy(maximum_attempts=3, initial_interval=BACKOFF, backoff_coefficient=1.0))
def always_fails() -> None:
    with open(os.environ["RETRY_EXECUTIONS"], "a") as f:
        f.write(f"{os.getpid()}\n")
        f.flush()
        os.fsync(f.fileno())
    raise RuntimeError("always fails")


@workflow
async def calls_failing() -> str:
    try:
        await procedure(always_fails)
    except ProcedureFailed as e:
        return str(e)
    return "did not fail"


def main() -> None:
    db, executions, mode = sys.argv[1:4]
    os.environ["RETRY_EXECUTIONS"] = executions
    from tests.integration import retry_worker as flows  # by its module name, for the keys

    with ActorSystem(db) as system:
        ref = system.start(flows.calls_failing, id=WORKFLOW_ID)
        if mode == "start":
            print("started", flush=True)
            time.sleep(600)  # killed meanwhile
            return
        print(ref.result(timeout=120), flush=True)


if __name__ == "__main__":
    main()
