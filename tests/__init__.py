"""The actorflow test suite."""
