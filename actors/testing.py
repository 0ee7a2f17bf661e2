"""Testing helpers: a virtual clock for a whole ``ActorSystem``, and a cluster of nodes in one
process (``Cluster(url, n=3)``, on PostgreSQL).

``ActorSystem(db, clock=VirtualClock())`` replaces real time: ``clock.advance(3600)`` then
``system.idle()`` runs everything an hour brings, in milliseconds.
"""

from ._clock import VirtualClock
from ._cluster_testing import Cluster

__all__ = ["Cluster", "VirtualClock"]
