"""Example workflows: every workflow of the original design, ported, and a runnable demo.

The examples use only the public API (``workflows`` and ``actors``). They share one small game
world (``examples.world``) whose state lives in the same SQLite file as the workflows, so a step's
reducers and its checkpoint commit together.

Modules, by theme:

- ``world``: the world's tables, reducers (the only code that changes them), procedures (read-only
  queries and deterministic rolls), and static content (quests, dialogs, blueprints).
- ``basics``: the small workflows of the design's phase 5 (timers, steps, selects, spawns).
- ``buffs``, ``combat``, ``quests``, ``economy``, ``raid``, ``daynight``: the game workflows.
- ``simulation``: long-running "director" workflows that keep the demo world busy.
- ``demo``: ``wf demo``, the live world with a terminal view.
"""
