"""The workload of the cluster kill test: the mixed workload's steps (signals, a send, reducers in
order, a procedure, a timer, a child every third round), taken until told to stop, so that the
driver decides how long it runs; and workflows that wait to be cancelled."""

from __future__ import annotations

from workflows import (
    Cancelled,
    now,
    procedure,
    reducer,
    select,
    send,
    signal,
    spawn,
    timer,
    workflow,
    workflow_id,
)

from .crash_flows import LISTENERS, kid, record_late, record_order, record_round, side


@reducer
def record_cancel(db, wf: str) -> None:
    db.execute("INSERT INTO cancels (wf) VALUES (?)", [wf])


@workflow
async def worker(i: int) -> int:
    total = 0
    r = 0
    while True:
        ev = await select(signal("tick"), signal("stop"))
        if ev.name == "stop":
            return total
        x = ev.value
        send(f"l{i % LISTENERS}", "note", [i, r])
        reducer(record_order, workflow_id(), r, "first")
        reducer(record_round, workflow_id(), r, x)
        reducer(record_order, workflow_id(), r, "second")
        y = await procedure(side, i, r)
        due = now() + 0.01 * (1 + (i + r) % 3)
        await timer("pause", at=due)
        reducer(record_late, workflow_id(), r, now() - due)
        if r % 3 == 0:
            total += await spawn(kid, i, r)
        total += x + y
        r += 1


@workflow
async def waiter() -> str:
    try:
        await signal("never")
    except Cancelled:
        reducer(record_cancel, workflow_id())
        raise
    return "not cancelled"


def expected(i: int, rounds: int) -> int:
    total = 0
    for r in range(rounds):
        if r % 3 == 0:
            total += i + r
        total += r + i * 1000 + r
    return total
