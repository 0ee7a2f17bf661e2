"""Database URLs: which targets are PostgreSQL URLs, and how one is shown (no password).

Free of psycopg, so that the runtime, the ``wf`` command and the examples can tell and show a URL
without loading the PostgreSQL backend.
"""

from __future__ import annotations

import urllib.parse

SCHEMES = ("postgresql://", "postgres://")


def is_url(target: object) -> bool:
    """True if ``target`` names a PostgreSQL database (a ``postgresql://`` URL), not a file."""
    return isinstance(target, str) and target.startswith(SCHEMES)


def unsplit(parts: urllib.parse.SplitResult) -> str:
    """``parts`` (of a PostgreSQL URL) as a URL again, with its ``//`` kept where the host part is
    empty (``postgresql:///db?host=/run/postgresql``, a unix socket), which ``urlunsplit`` leaves
    out: ``postgresql:/db`` is not a URL libpq reads."""
    url = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if parts.query:
        url += "?" + parts.query
    if parts.fragment:
        url += "#" + parts.fragment
    return url


def display_url(url: str) -> str:
    """``url`` with any password removed (from the netloc and from a ``password`` parameter);
    anything that is not a PostgreSQL URL is returned as it is."""
    if not is_url(url):
        return url
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        auth, host = netloc.rsplit("@", 1)
        user = auth.split(":", 1)[0]
        netloc = f"{user}@{host}"
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query = [(k, "***" if k == "password" else v) for k, v in query]
    return unsplit(parts._replace(netloc=netloc, query=urllib.parse.urlencode(query, safe="/:,=-")))
