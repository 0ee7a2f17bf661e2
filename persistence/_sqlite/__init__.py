"""The SQLite backend: one file, one owning process (a cluster of one)."""
