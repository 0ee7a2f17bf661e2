"""The web application of ``wf ui``: Starlette routes over one read-only store.

Reads go to the database through a store opened with ``owner=False`` (it never takes the file or
the schema from a running system). Actions are requests appended the way ``wf`` appends them,
carried out by the system that owns the database; the answer says what happened to each.

Safety: every page is rendered by Jinja2 with autoescaping, and the Content-Security-Policy
allows no inline script, so a workflow id or a payload holding markup shows as text. Actions are
POSTs that carry the page's anti-forgery token (a random secret of this server, compared in
constant time), and a request whose Host header is not this server's (a DNS rebinding page) or
whose Origin is another site's (scheme, host and port compared) is refused. ``read_only`` serves
no action at all. Nothing the browser sends is unpickled: payloads are JSON.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import hmac
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from persistence import STATUSES, PersistenceError, StorageUnavailable, Store

from .. import _cli_shared as cli
from .._info import utc_text, waiting_text
from . import data

HERE = Path(__file__).resolve().parent
# How long an action waits for the running system to carry out its request before it answers.
ACTION_WAIT = 10.0
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
OUTCOMES_KEPT = 200

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]


def _host_of(value: str) -> str:
    """The host of a Host header or an Origin's netloc, without its port (IPv6 unbracketed)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    return value.rpartition(":")[0] if value.count(":") == 1 else value


DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(scheme: str, netloc: str) -> tuple[str, str, int | None]:
    """An origin as a browser compares it: scheme, host and port (the scheme's default port when
    none is written; -1 for one that is not a port, which matches none)."""
    scheme = scheme.strip().lower()
    parts = urllib.parse.urlsplit(f"//{netloc.strip()}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    return scheme, _host_of(netloc), DEFAULT_PORTS.get(scheme) if port is None else port


class Guard:
    """ASGI middleware: refuse requests for another host name, and add the security headers."""

    def __init__(self, app: ASGIApp, allowed_hosts: frozenset[str] | None) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts  # None: any (the server was bound to a public address)

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host = _host_of(headers.get("host", ""))
        if self.allowed_hosts is not None and host not in self.allowed_hosts:
            await PlainTextResponse(
                f"refused: this server answers for {', '.join(sorted(self.allowed_hosts))}, not "
                f"for the host {host!r} (a page of another site that points its name here)",
                status_code=421,
            )(scope, receive, send)
            return
        origin = headers.get("origin")
        if scope["method"] == "POST" and origin not in (None, "null"):
            # Scheme, host and port: another port of this machine is another site.
            sent = urllib.parse.urlsplit(origin)
            if _origin(sent.scheme, sent.netloc) != _origin(scope.get("scheme", "http"), headers.get("host", "")):
                await PlainTextResponse(
                    f"refused: a form of another site ({origin}) posted to this one", status_code=403,
                )(scope, receive, send)
                return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + SECURITY_HEADERS
            await send(message)

        await self.app(scope, receive, with_headers)


def _ts(t: float | None) -> str:
    if t is None:
        return "-"
    return utc_text(t, "%Y-%m-%d %H:%M:%S")


def _ago(t: float | None, now: float) -> str:
    if t is None:
        return "-"
    d = now - t
    ahead = d < 0
    d = abs(d)
    if d < 60:
        text = f"{d:.0f}s"
    elif d < 3600:
        text = f"{d // 60:.0f}m {d % 60:02.0f}s"
    elif d < 86400:
        text = f"{d // 3600:.0f}h {d % 3600 // 60:02.0f}m"
    else:
        text = f"{d // 86400:.0f}d {d % 86400 // 3600:.0f}h"
    return f"in {text}" if ahead else f"{text} ago"


def _quote(value: str) -> str:
    return urllib.parse.quote(value, safe="")


class UI:
    """The state of one ``wf ui`` server: its store, its token, the answers to its actions."""

    def __init__(self, store: Store, db: str, *, read_only: bool) -> None:
        self.store = store
        self.db = db
        self.shown_db = cli._shown(db)
        self.read_only = read_only
        self.token = secrets.token_urlsafe(32)
        self._outcomes: collections.OrderedDict[str, dict[str, str]] = collections.OrderedDict()
        self._lock = threading.Lock()
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every template, whatever its name
            undefined=jinja2.StrictUndefined,
        )
        env.filters.update(ts=_ts, short=data.short, q=_quote,
                           qs=lambda d: urllib.parse.urlencode(d))
        env.globals.update(statuses=STATUSES, ago=_ago)
        self.env = env

    # -- rendering ------------------------------------------------------------------------------
    def page(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        context.update(db=self.shown_db, read_only=self.read_only, token=self.token,
                       now=context.get("now", time.time()))
        context.setdefault("owner_unknown", False)
        if "owner" not in context:
            context["owner"] = self.owner()
        if "nodes_shown" not in context:
            context["nodes_shown"] = bool(data.nodes(self.store))
        return HTMLResponse(self.env.get_template(name).render(**context), status_code=status_code)

    def owner(self) -> dict[str, object] | None:
        """The system running on the database, None if none runs; raises the store's error if
        it cannot be asked (a page never says "no system runs" then)."""
        return cli.owner_of(self.store)

    def store_failed(self, request: Request, exc: Exception) -> Response:
        """The answer to a request the store could not serve: 503 with the store's message while
        it may pass (a server away, a busy file), 500 with it otherwise; never a bare 500."""
        passing = isinstance(exc, StorageUnavailable)
        status = 503 if passing else 500
        message = str(exc) if isinstance(exc, PersistenceError) else f"{type(exc).__name__}: {exc}"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        title = ("The database does not answer now" if passing else "The database could not be read")
        hint = " Reload the page once it is back." if passing else ""
        return self.page("error.html", status, title=title, message=message + hint,
                         owner=None, owner_unknown=True, nodes_shown=False)

    def error(self, status_code: int, title: str, message: str) -> HTMLResponse:
        return self.page("error.html", status_code, title=title, message=message)

    def keep_outcome(self, outcome: dict[str, str]) -> str:
        key = secrets.token_urlsafe(12)
        with self._lock:
            self._outcomes[key] = outcome
            while len(self._outcomes) > OUTCOMES_KEPT:
                self._outcomes.popitem(last=False)
        return key

    def outcome(self, key: str | None) -> dict[str, str] | None:
        if not key:
            return None
        with self._lock:
            return self._outcomes.get(key)

    # -- actions --------------------------------------------------------------------------------
    def act(self, kind: str, wid: str, name: str | None, payload_text: str | None) -> dict[str, str]:
        """Queue a request as ``wf`` does, wait a little for the owner to carry it out, and say
        what happened ({"level": "ok"|"waiting"|"refused", "text": ...})."""
        what = kind.replace("_", " ")
        rec = self.store.load_workflow(wid)
        if rec is None:
            return {"level": "refused", "text": f"refused: no workflow with id {wid!r} (finished and pruned, or never there)"}
        if kind in ("signal", "fire_timer") and not name:
            return {"level": "refused", "text": f"refused: a {what} needs a name"}
        try:
            cli.check_request(self.store, rec, kind, name)
        except cli.CliError as e:
            return {"level": "refused", "text": f"refused: {e}"}
        note = ""
        if kind == "signal":
            try:
                value = cli.strict_json(payload_text) if payload_text and payload_text.strip() else None
            except json.JSONDecodeError as e:
                return {"level": "refused",
                        "text": f"refused: the payload is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); "
                                f'e.g. {{"amount": 100}}, [1, 2], "text" or empty for null'}
            except cli.NotStandardJson as e:
                return {"level": "refused", "text": f"refused: the payload {e}"}
            payload: str | None = json.dumps(value)
            at = cli.wait_location(rec.waiting_on)
            names = cli._signal_names_of(rec.type, at)
            if names is not None and name not in names:
                awaited = cli.awaited_text(rec.type, at, "signal")
                note = (f" Note: the code of {rec.type} never awaits a signal named {name!r} ({awaited}); "
                        f"it stays in the workflow's inbox.")
            elif names is not None and name is not None:
                other = cli.other_kind_note(rec.type, at, name, "signal")
                note = f" Note: {other}." if other else ""
        elif kind == "cancel":
            payload = json.dumps(payload_text.strip() or None if payload_text else None)
        else:
            payload = None
        label = f"{what} {name!r}" if name else what
        seq = self.store.post_external(kind, rec.id, name, payload, at=time.time())
        try:
            owner = self.owner()
        except PersistenceError as e:
            return {"level": "waiting",
                    "text": f"queued {label} (request #{seq}), but whether a system runs on {self.shown_db} could not be "
                            f"asked ({e}); a running system carries it out, or else the next to start.{note}"}
        if owner is None:
            return {"level": "waiting",
                    "text": f"queued {label} (request #{seq}): no system has {self.shown_db} open, so the request waits "
                            f"in the database for the next one to start, which carries it out first.{note}"}
        who = f"the running system (pid {owner.get('pid')})"
        deadline = time.monotonic() + ACTION_WAIT
        while any(x.seq == seq for x in self.store.take_external(seq - 1)[:1]):
            if time.monotonic() >= deadline:
                return {"level": "waiting",
                        "text": f"queued {label} (request #{seq}): {who} has not taken it within {ACTION_WAIT:g}s (it is "
                                f"busy, or the workflow's inbox is full); it stays queued, and is listed "
                                f"below until it is carried out.{note}"}
            time.sleep(0.05)
        # Taken: give the workflow a moment to take the step it wakes.
        after = self.store.load_workflow(rec.id)
        while after is not None and after.step_seq == rec.step_seq and time.monotonic() < deadline:
            if kind == "signal" and not self._awaits(after, name):
                break
            time.sleep(0.05)
            after = self.store.load_workflow(rec.id)
        if after is None:
            now = "it is gone (finished and pruned)"
        elif after.step_seq == rec.step_seq:
            if kind == "signal" and not self._awaits(after, name):
                now = f"buffered: the workflow does not await {name!r} now, and takes it when it does"
            else:
                now = f"delivered; the workflow has not taken its step yet (still {after.status}, this page follows it)"
        elif after.status == "running":
            now = f"it is running, waiting on {waiting_text(after.waiting_on) or 'nothing'}"
        else:
            now = f"it has {after.status}"
        return {"level": "ok", "text": f"{label} carried out by {who}: {now}.{note}"}

    @staticmethod
    def _awaits(rec: Any, name: str | None) -> bool:
        w = data.waiting(rec) or {}
        return any(a.get("kind") == "signal" and a.get("name") == name for a in w.get("arms", []))


def create_app(store: Store, db: str, *, read_only: bool = False,
               allowed_hosts: frozenset[str] | None = frozenset(LOOPBACK_NAMES),
               close_store: bool = True) -> Starlette:
    """The ASGI application over ``store`` (opened with owner=False); ``db`` names it on pages."""
    ui = UI(store, db, read_only=read_only)

    async def in_thread(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await run_in_threadpool(fn, *args, **kw)

    async def index(request: Request) -> Response:
        try:
            f = data.Filters.parse(dict(request.query_params))
        except ValueError as e:
            return ui.error(400, "A filter of this page is not right", str(e))
        if f.type is not None and ":" not in f.type:
            # A short name, as the list shows types: the full key when one type alone has it.
            c = await in_thread(ui.store.count_workflows)
            try:
                f = data.Filters(**{**f.__dict__, "type": cli._resolve_type(c, f.type, ui.shown_db)})
            except cli.CliError as e:
                return ui.error(400, "No such type", str(e))
        page = await in_thread(data.list_page, ui.store, f)
        nodes = await in_thread(data.nodes, ui.store)
        return ui.page("list.html", page=page, f=f, nodes=nodes, nodes_shown=bool(nodes))

    async def counts(request: Request) -> Response:
        c = await in_thread(data.counts, ui.store)
        return JSONResponse({"total": c["total"], "by_status": c["by_status"]})

    async def workflow(request: Request) -> Response:
        wid = request.path_params["wid"]
        try:
            older = int(request.query_params.get("older", "0"))
        except ValueError:
            older = 0
        page = await in_thread(functools.partial(data.workflow_page, ui.store, wid, older=older))
        if page is None:
            why = await in_thread(cli.why_missing, ui.store, wid)
            return ui.error(404, "No such workflow", f"no workflow with id {wid!r} in {ui.shown_db}: {why}.")
        names = await in_thread(cli._signal_names_of, page["type"], page["location"])
        return ui.page("workflow.html", w=page, now=page["now"],
                       outcome=ui.outcome(request.query_params.get("outcome")),
                       signal_names=sorted(names or ()))

    async def state(request: Request) -> Response:
        wid = request.query_params.get("id", "")
        rec = await in_thread(ui.store.load_workflow, wid)
        if rec is None:
            return JSONResponse({"id": wid, "gone": True}, status_code=404)
        pending = await in_thread(ui.store.take_external, 0)
        return JSONResponse({"id": rec.id, "status": rec.status, "steps": rec.step_seq,
                             "updated_at": rec.updated_at,
                             "pending": sum(1 for x in pending if x.workflow_id == rec.id)})

    async def value(request: Request) -> Response:
        wid, what = request.query_params.get("id", ""), request.query_params.get("what", "")
        text = await in_thread(data.whole_value, ui.store, wid, what)
        if text is None:
            return PlainTextResponse(f"no value {what!r} of workflow {wid!r}", status_code=404)
        return PlainTextResponse(text)

    async def nodes_page(request: Request) -> Response:
        nodes = await in_thread(data.nodes, ui.store)
        return ui.page("nodes.html", nodes=nodes, nodes_shown=bool(nodes))

    async def schedules_page(request: Request) -> Response:
        from actors._schedules import schedule_rows

        rows = await in_thread(schedule_rows, ui.store)
        return ui.page("schedules.html", schedules=rows)

    async def action(request: Request) -> Response:
        if ui.read_only:
            return PlainTextResponse("refused: this server was started with --read-only; it takes no actions",
                                     status_code=403)
        form = await request.form()
        token = form.get("csrf")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), ui.token.encode()):
            return PlainTextResponse(
                "refused: the form's anti-forgery token is missing or wrong (a page of this server "
                "sends it; reload the page and try again)", status_code=403)
        kind = {"/signal": "signal", "/cancel": "cancel", "/fire-timer": "fire_timer"}[request.url.path]
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        wid = fields.get("id", "")
        outcome = await in_thread(ui.act, kind, wid, fields.get("name") or None,
                                  fields.get("payload") if kind == "signal" else fields.get("reason"))
        key = ui.keep_outcome(outcome)
        return RedirectResponse(f"/w/{_quote(wid)}?outcome={key}", status_code=303)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if close_store:
                ui.store.close()

    routes = [
        Route("/", index),
        Route("/api/counts", counts),
        Route("/api/state", state),
        Route("/value", value),
        Route("/nodes", nodes_page),
        Route("/schedules", schedules_page),
        Route("/w/{wid:path}", workflow),
        Route("/signal", action, methods=["POST"]),
        Route("/cancel", action, methods=["POST"]),
        Route("/fire-timer", action, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={PersistenceError: ui.store_failed, Exception: ui.store_failed})
    app.state.ui = ui
    app.add_middleware(Guard, allowed_hosts=allowed_hosts)
    return app
