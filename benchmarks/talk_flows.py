"""The workflow ``benchmarks/talk.py`` asks and signals (importable by ``module:qualname``)."""

from __future__ import annotations

from workflows import Event, reply, request, select, signal, workflow


@workflow
async def pinger() -> None:
    """Takes ``signal("ping")`` and answers ``ask("ping", x)`` with ``x``, forever."""
    while True:
        ev = await select(request("ping"), signal("ping"))
        match ev:
            case Event("ping", req) if ev.kind == "request":
                reply(req, req.payload)
            case _:
                pass
