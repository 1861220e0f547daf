"""The audit middleware: every mutating request (any method but GET, HEAD and OPTIONS) to the
API or the UI is recorded before its response starts, with the caller the auth dependency
found, the client's address, the route, the masked JSON body and query, and the status.

A request whose handler fails is recorded as ``500``; one refused before authentication as
``401`` with an anonymous actor. Bodies that are not JSON (bundles, forms holding tokens) are
not recorded, only their size.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bourse.server.services import audit
from bourse.server.services.tokens import Principal

log = logging.getLogger(__name__)
READ_ONLY = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_RECORDED_BODY = 64 * 1024
PRINCIPAL_KEY = "bourse.principal"
# a service's own traffic through the gateway is counted in its figures, not audited
# (hundreds of requests a second); changes to services are audited like any API call
SERVICE_TRAFFIC = "/svc/"
# MLflow's logging calls, a run reporting on itself (a training job sends one every few
# steps, as a job's agent sends its tracking records, which are not audited one by one
# either): recorded only when refused. Creating, updating, deleting and restoring a run, and
# every other MLflow call, are audited like any API call.
TELEMETRY = frozenset(f"/api/2.0/mlflow/runs/{call}" for call in (
    "log-batch", "log-metric", "log-parameter", "set-tag"))
Recorder = Callable[[audit.Entry], Awaitable[None]]


def remember(scope: Scope, principal: Principal) -> None:
    """Called by authentication: the audit record's actor."""
    scope[PRINCIPAL_KEY] = principal


def actor_of(scope: Scope) -> tuple[str, str, str | None]:
    """(actor, kind, project) of the request's principal."""
    who: Principal | None = scope.get(PRINCIPAL_KEY)
    if who is None:
        return "-", "anonymous", None
    if who.kind == "node":
        return who.node_id or who.token_id, "node", who.project_id
    return who.token_id, who.kind, who.project_id


def source_of(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "-"


class AuditMiddleware:
    def __init__(self, app: ASGIApp, record: Recorder, clock: Callable[[], float]) -> None:
        self.app, self.record, self.clock = app, record, clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["method"] in READ_ONLY
                or scope["path"].startswith(SERVICE_TRAFFIC)):
            await self.app(scope, receive, send)
            return
        body = _Body()
        started = False
        telemetry = scope["path"] in TELEMETRY

        async def tee(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start" and not started:
                started = True
                if not (telemetry and message["status"] < 400):
                    await self._record(scope, body, str(message["status"]))
            await send(message)

        async def listen() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.add(message.get("body", b""))
            return message

        try:
            await self.app(scope, listen, tee)
        except Exception:
            if not started:
                await self._record(scope, body, "500")
            raise

    async def _record(self, scope: Scope, body: _Body, outcome: str) -> None:
        actor, kind, project = actor_of(scope)
        route = scope.get("route")
        action = f"{scope['method']} {getattr(route, 'path', scope['path'])}"
        entry = audit.Entry(time=self.clock(), actor=actor, actor_kind=kind,
                            project_id=project, source=source_of(scope), action=action,
                            target=scope["path"], outcome=outcome,
                            params=_params(scope, body))
        try:
            await self.record(entry)
        except Exception:  # the action happened; a lost record is logged loudly
            log.exception("could not write the audit record of %s %s", action, outcome)


class _Body:
    """The first bytes of a request body, kept to record it."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, chunk: bytes) -> None:
        if self.size + len(chunk) <= MAX_RECORDED_BODY:
            self.parts.append(chunk)
        self.size += len(chunk)


def _params(scope: Scope, body: _Body) -> dict[str, Any]:
    params: dict[str, Any] = {}
    query = scope.get("query_string", b"").decode("latin-1")
    if query:
        params["query"] = audit.masked(query[:1000]) if "token" not in query else audit.MASK
    path_params = scope.get("path_params")
    if path_params:
        params["path"] = audit.masked(dict(path_params))
    headers = dict(scope.get("headers") or [])
    is_json = headers.get(b"content-type", b"").startswith(b"application/json")
    if is_json and body.size <= MAX_RECORDED_BODY:
        try:
            params["body"] = audit.masked(json.loads(b"".join(body.parts) or b"null"))
        except ValueError:
            params["body_bytes"] = body.size
    elif body.size:
        params["body_bytes"] = body.size
    return params
