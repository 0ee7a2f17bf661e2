"""The PostgreSQL backend: imported only when a ``postgresql://`` URL is opened.

Everything under this package may import psycopg and psycopg_pool (the optional
``postgres`` extra, from a checkout: ``pip install -e '.[postgres]'``); nothing outside it imports this package at module level, so that a
program on SQLite never loads psycopg.
"""
