"""``/jobs/{id}/ports/{port}/...``: HTTP and WebSocket to a port a running job declared, through
its node's agent channel (``bourse.server.streams.proxy``).

Authenticated like the API (a bearer user token) or like the UI (its session cookie, so that a
page of the proxied server opens in the browser). A WebSocket authenticated by the cookie must
also come from this origin, or another site could open one in a signed-in user's name.
"""

from __future__ import annotations

import re

from fastapi import APIRouter
from starlette.requests import HTTPConnection, Request
from starlette.responses import RedirectResponse, Response
from starlette.websockets import WebSocket

from bourse.core.errors import BourseError, Forbidden, NotFound, Unauthorized
from bourse.protocol.common import ID_PATTERN, Port
from bourse.protocol.stream import PortTarget
from bourse.server.audit.middleware import remember
from bourse.server.http.cookie import COOKIE
from bourse.server.routes.deps import bearer, get_state, principal_of
from bourse.server.routes.sockets import refuse
from bourse.server.services.streams import Running, declared_port, running_job
from bourse.server.services.tokens import Principal
from bourse.server.streams.proxy import BadGateway, Upstream, proxy_http, proxy_websocket
from bourse.server.streams.tunnels import Unreachable
from bourse.server.ui.session import authenticate_secret, same_origin
from bourse.tunnel.stream import Stream

PREFIX = "/jobs/{job_id}/ports/{port}"
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
CLOSE_REFUSED = 4403
_ID = re.compile(ID_PATTERN)

router = APIRouter(include_in_schema=False)


async def authenticate(connection: HTTPConnection) -> Principal:
    """A bearer user token, or the UI's cookie (from this origin, for a WebSocket)."""
    if bearer(connection) is not None:
        return await principal_of(connection, "user")
    secret = connection.cookies.get(COOKIE)
    if secret is None:
        raise Unauthorized("a user token is needed",
                           hint="send `Authorization: Bearer <token>`, or sign in at /ui/login")
    principal = await authenticate_secret(get_state(connection), secret)
    remember(connection.scope, principal)
    if connection.scope["type"] == "websocket" and not same_origin(connection):
        raise Forbidden("a cross-site WebSocket is refused", hint="open it from this exchange")
    return principal


def _target(connection: HTTPConnection) -> tuple[str, int]:
    job_id, port = connection.path_params["job_id"], connection.path_params["port"]
    if len(job_id) > 64 or not _ID.fullmatch(job_id) or not str(port).isdigit():
        raise NotFound(f"no job port at {connection.url.path[:200]}")
    return job_id, int(port)


async def _open(connection: HTTPConnection) -> tuple[Running, Port, Stream]:
    principal = await authenticate(connection)
    job_id, number = _target(connection)
    state = get_state(connection)
    async with state.db.read() as session:
        running = await running_job(session, job_id, principal.scope)
    port = declared_port(running, number)
    carrier = state.hub.connections.get(running.node_id)
    if carrier is None:
        raise Unreachable(f"node {running.node_id}, where job {job_id} runs, is not connected",
                          hint="retry when its agent has reconnected")
    stream = await state.hub.tunnels.open(carrier, running.job_id, running.attempt,
                                          PortTarget(port=port.number))
    return running, port, stream


def upstream(connection: HTTPConnection, port: Port) -> Upstream:
    """The path the job's server sees: below the prefix, or whole for a ``keep`` port."""
    job_id, number = _target(connection)
    prefix = PREFIX.format(job_id=job_id, port=number)
    raw = connection.scope.get("raw_path") or connection.url.path.encode()
    path = raw.decode("latin-1")  # as the client sent it: percent-escapes kept
    if port.path == "strip":  # "", "jobs", id, "ports", port, rest
        parts = path.split("/", 5)
        path = "/" + (parts[5] if len(parts) > 5 else "")
    query = connection.scope.get("query_string", b"").decode("latin-1")
    return Upstream(f"{path}?{query}" if query else path, prefix)


async def http_endpoint(request: Request) -> Response:
    _running, port, stream = await _open(request)
    tunnels = get_state(request).hub.tunnels
    try:
        return await proxy_http(request, stream, upstream(request, port),
                                lambda: tunnels.close(stream))
    except BadGateway as exc:
        raise Unreachable(str(exc)) from None


async def websocket_endpoint(ws: WebSocket) -> None:
    try:
        _running, port, stream = await _open(ws)
    except BourseError as exc:
        await refuse(ws, exc, CLOSE_REFUSED)
        return
    try:
        await proxy_websocket(ws, stream, upstream(ws, port))
    finally:
        get_state(ws).hub.tunnels.close(stream)


async def add_slash(request: Request) -> Response:
    """``/jobs/{id}/ports/{port}`` -> ``.../{port}/``, so relative links resolve below it."""
    return RedirectResponse(f"{request.url.path}/", 307)


router.add_route(PREFIX, add_slash, ["GET", "HEAD"])
router.add_route(PREFIX + "/{path:path}", http_endpoint, METHODS)
router.add_websocket_route(PREFIX + "/{path:path}", websocket_endpoint)
