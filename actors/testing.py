"""Testing helpers: a virtual clock for a whole ``ActorSystem``.

``ActorSystem(db, clock=VirtualClock())`` replaces real time: ``clock.advance(3600)`` then
``system.idle()`` runs everything an hour brings, in milliseconds.
"""

from ._clock import VirtualClock

__all__ = ["VirtualClock"]
