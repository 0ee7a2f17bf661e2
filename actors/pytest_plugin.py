"""pytest plugin: the ``workflow_system`` fixture for users' own tests (being written)."""
