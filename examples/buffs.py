"""A buff: a timed effect on a character that can be refreshed, stacked or dispelled."""

from __future__ import annotations

from workflows import Event, reducer, select, signal, timer, workflow

from .world import apply_buff, remove_buff


@workflow
async def buff(target: str, name: str, duration_secs: float) -> dict:
    """Keep ``name`` on ``target`` until it expires or is dispelled.

    Signals: ``refresh`` (restart the duration), ``stack`` with a count (add stacks, which also
    refreshes), ``dispel``. The expiry timer is armed each time the ``select`` starts, so any
    signal that loops back restarts the full duration: that is what refreshing a buff means.
    """
    stacks = 1
    reducer(apply_buff, target, name, stacks)
    while True:
        match await select(
            timer("expire", duration_secs), signal("refresh"), signal("stack"), signal("dispel")
        ):
            case Event("expire"):
                ended_by = "expired"
                break
            case Event("refresh"):
                continue
            case Event("stack", n):
                stacks += n
                reducer(apply_buff, target, name, stacks)
            case Event("dispel"):
                ended_by = "dispelled"
                break
    reducer(remove_buff, target, name)
    return {"final_stacks": stacks, "ended_by": ended_by}
