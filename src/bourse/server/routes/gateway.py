"""``/svc/{project}/{name}/...``: a service's traffic, balanced over its ready replicas
(``serving.forward``). Authenticated as ports are: a user token of the service's project (or
an admin's), as a bearer token or the UI's cookie; the token never reaches a replica."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bourse.core.errors import NotFound
from bourse.server.routes.deps import get_state
from bourse.server.routes.ports import METHODS, authenticate
from bourse.server.serving.forward import Forwarder
from bourse.server.serving.views import GATEWAY_PREFIX
from bourse.server.streams.proxy import Upstream

PREFIX = GATEWAY_PREFIX + "/{project}/{name}"

router = APIRouter(include_in_schema=False)


def _upstream(request: Request, project: str, name: str) -> Upstream:
    prefix = f"{GATEWAY_PREFIX}/{project}/{name}"
    raw = (request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1")
    path = "/" + raw.split("/", 4)[4] if raw.count("/") >= 4 else "/"  # "", svc, p, n, rest
    query = request.scope.get("query_string", b"").decode("latin-1")
    return Upstream(f"{path}?{query}" if query else path, prefix)


async def forward(request: Request) -> Response:
    principal = await authenticate(request)
    project, name = request.path_params["project"], request.path_params["name"]
    state = get_state(request)
    route = state.gateway.route(project, name)
    if route is None or not principal.scope.sees(project):
        raise NotFound(f"no running service {name!r} in project {project!r}",
                       hint="`bourse services` lists services and their URLs")
    forwarder = Forwarder(state.gateway, state.hub.tunnels, state.hub.connections,
                          state.clock, state.direct)
    return await forwarder.forward(request, route, _upstream(request, project, name))


async def add_slash(request: Request) -> Response:
    """``/svc/{project}/{name}`` -> ``.../{name}/`` (for a caller who may see it)."""
    await authenticate(request)
    return RedirectResponse(f"{request.url.path}/", 307)


router.add_route(PREFIX, add_slash, ["GET", "HEAD"])
router.add_route(PREFIX + "/{path:path}", forward, METHODS)
