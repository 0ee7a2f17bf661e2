"""Tests of the SQLite store (persistence/)."""
