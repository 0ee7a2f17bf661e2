"""The mixed workload the runtime kill tests run: signals, timers, procedures, children, reducers,
and listeners that take broadcasts (through a subscription) and the signals the mixed workflows send."""

from __future__ import annotations

import os

from workflows import (
    idempotency_key,
    now,
    procedure,
    reducer,
    select,
    send,
    signal,
    spawn,
    subscribe,
    timer,
    workflow,
    workflow_id,
)

LISTENERS = 3


@reducer
def record_round(db, wf: str, r: int, x: int) -> None:
    db.execute("INSERT INTO rounds (wf, r, x) VALUES (?, ?, ?)", [wf, r, x])


@reducer
def record_order(db, wf: str, r: int, tag: str) -> None:
    db.execute("INSERT INTO orders (wf, r, tag) VALUES (?, ?, ?)", [wf, r, tag])


@reducer
def record_late(db, wf: str, r: int, late: float) -> None:
    db.execute("INSERT INTO lates (wf, r, late) VALUES (?, ?, ?)", [wf, r, late])


@reducer
def record_heard(db, wf: str, kind: str, a: int, b: int) -> None:
    db.execute("INSERT INTO heard (wf, kind, a, b) VALUES (?, ?, ?, ?)", [wf, kind, a, b])


@reducer
def record_kid(db, wf: str, i: int, r: int) -> None:
    db.execute("INSERT INTO kids (wf, i, r) VALUES (?, ?, ?)", [wf, i, r])


@procedure
def side(i: int, r: int) -> int:
    # At least once: every run leaves a line; the value is deterministic.
    with open(os.environ["ACTORFLOW_SIDE_LOG"], "a") as f:
        f.write(f"{i} {r} {idempotency_key()}\n")
    return i * 1000 + r


@workflow
async def kid(i: int, r: int) -> int:
    await timer("kid", 0.02)
    reducer(record_kid, workflow_id(), i, r)
    return i + r


@workflow
async def mixed(i: int, rounds: int) -> int:
    total = 0
    for r in range(rounds):
        x = await signal("tick")
        send(f"l{i % LISTENERS}", "note", [i, r])  # in the same step as the round's reducers
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
    return total


@workflow
async def listener(group: int) -> int:
    """Takes the broadcasts of its group (subscribed in its first step) and the mixed workflows'
    notes, recording each in the step that consumes it, until told to stop."""
    subscribe("bell", group)
    heard = 0
    while True:
        ev = await select(signal("bell"), signal("note"), signal("stop"))
        if ev.name == "stop":
            return heard
        a, b = (group, ev.value) if ev.name == "bell" else ev.value
        reducer(record_heard, workflow_id(), ev.name, a, b)
        heard += 1


def expected(i: int, rounds: int) -> int:
    total = 0
    for r in range(rounds):
        if r % 3 == 0:
            total += i + r
        total += r + i * 1000 + r
    return total
