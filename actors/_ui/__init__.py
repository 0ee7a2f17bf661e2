"""``wf ui``: a local web view of the workflows in a database, with actions.

Needs the ``ui`` extra (from a checkout: ``pip install -e '.[ui]'``; Starlette, uvicorn, Jinja2). Imported
only by ``wf ui``: nothing else of actorflow loads it.
"""

from __future__ import annotations

import socket

from .app import LOOPBACK_NAMES, create_app

__all__ = ["LOOPBACK_NAMES", "create_app", "serve"]


def serve(db: str, *, host: str = "127.0.0.1", port: int = 8765, read_only: bool = False) -> None:
    """Serve the view of ``db`` (a file or a ``postgresql://`` URL) until interrupted."""
    import uvicorn

    from .. import _cli_shared as cli

    # Bound here, so that a port in use or an address not of this machine is an OSError for
    # wf to report, before the database is opened.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    try:
        store = cli._open(db)
        # Bound to a loopback address, the server answers only for loopback names (a page of
        # another site cannot point its own name here and read it); bound elsewhere, for any.
        loopback = host in LOOPBACK_NAMES or host.startswith("127.")
        allowed = frozenset((*LOOPBACK_NAMES, host)) if loopback else None
        app = create_app(store, db, read_only=read_only, allowed_hosts=allowed)
        shown = f"[{host}]" if ":" in host else host
        line = (f"wf ui: serving {cli._shown(db)} at http://{shown}:{port}/"
                f"{' (read-only)' if read_only else ''}; Ctrl-C stops it")

        class Server(uvicorn.Server):
            """Says where it serves once it listens and the app has started, not before: a
            script that waits for the line may connect at once."""

            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                if self.started:
                    print(line, flush=True)

        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        Server(config).run(sockets=[sock])
    finally:
        sock.close()
