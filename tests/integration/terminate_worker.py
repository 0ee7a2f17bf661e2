"""A process for the terminate-and-kill test on PostgreSQL: counters fed by senders.

``python -m tests.integration.terminate_worker URL RUN ACKS SECONDS``: open the system
(durability "full"), start the counters (``t0`` ... ``t{COUNTERS-1}``; those there already go on),
and send from ``SENDERS`` threads, for ``SECONDS`` seconds, signals each carrying a value no other
signal carries (``RUN`` keeps the runs' values apart). A signal whose ``signal()`` returned is
written to ACKS (``wid value``) right after. Then wait until every counter took everything
(``idle``), print the writer's settled COMMIT outcomes (JSON) and exit. ``SECONDS`` 0: send
nothing, only drain.

Each counter's step takes one value, counts it in its state, and a reducer writes the row
``(wf, v, n)`` (``n``: the state's count after it) into ``seen``.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time

import psycopg

from actors import ActorSystem
from workflows import reducer, signal, workflow, workflow_id

COUNTERS = 8
SENDERS = 4


@reducer
def note(db, wf: str, v: int, n: int) -> None:
    db.execute("INSERT INTO seen (wf, v, n) VALUES (?, ?, ?)", (wf, v, n))


@workflow
async def counter() -> int:
    n = 0
    while True:
        v = await signal("inc")
        n += 1
        reducer(note, workflow_id(), v, n)


def main() -> None:
    url, run, ackfile, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    from tests.integration import terminate_worker as flows  # by its module name, for the keys

    with ActorSystem(url, durability="full") as system:
        with psycopg.connect(url.split("&schema=")[0], autocommit=True) as con:
            con.execute("CREATE TABLE IF NOT EXISTS seen (wf text, v bigint, n integer)")
        refs = [system.start(flows.counter, id=f"t{i}") for i in range(COUNTERS)]
        print("ready", flush=True)
        stop = time.monotonic() + seconds
        lock = threading.Lock()
        failures = [0]

        def send(k: int) -> None:
            rng = random.Random(run * 1000 + k)
            i = 0
            with open(ackfile, "a") as acks:
                while time.monotonic() < stop:
                    ref = rng.choice(refs)
                    value = (run * 100 + k) * 10_000_000 + i
                    i += 1
                    try:
                        ref.signal("inc", value)
                    except Exception as e:  # noqa: BLE001 - not acknowledged: may or may not be in
                        with lock:
                            failures[0] += 1
                        print(f"send failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                        time.sleep(0.05)
                        continue
                    acks.write(f"{ref.id} {value}\n")
                    acks.flush()

        threads = [threading.Thread(target=send, args=(k,)) for k in range(SENDERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        system.idle(timeout=300)
        writer = system._rt.store._writer  # type: ignore[attr-defined]
        outcomes = getattr(writer, "outcomes", {})
        print(json.dumps({"outcomes": outcomes, "send_failures": failures[0]}), flush=True)


if __name__ == "__main__":
    main()
