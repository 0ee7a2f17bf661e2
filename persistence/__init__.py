"""The SQLite store under the runtime.

Layer rule: this package imports the standard library, sqlite-utils and cloudpickle only; never
``workflows`` or ``actors``. It stores bytes and rows.
"""
