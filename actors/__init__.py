"""The runtime: ``ActorSystem``, workflow actors, supervision, timers, procedures, the ``wf`` CLI.

Layer rule: this package may import ``workflows``, ``persistence``, pykka and structlog.
"""
