"""The workflows of the ask kill test (``test_talk_kill.py``): ledgers that answer ``add`` asks
with their new total, publish it, and record each reply in an application table with the same
step (its reducer runs exactly once per committed step)."""

from __future__ import annotations

from workflows import publish, reducer, reply, request, workflow


@reducer
def record_reply(db, workflow_id: str, ask_id: str, total: int) -> None:
    db["talk_replies"].insert(
        {"workflow_id": workflow_id, "ask_id": ask_id, "total": total}, alter=True
    )


@workflow
async def ledger(workflow_id: str) -> int:
    total = 0
    publish("total", total)
    while True:
        req = await request("add")
        total += int(req.payload)
        reducer(record_reply, workflow_id, req.id, total)
        publish("total", total)
        reply(req, total)
