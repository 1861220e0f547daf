"""Every UI endpoint goes through ``guarded``: it authenticates the session cookie first, then
turns the exchange's errors into a page, a fragment or JSON as the endpoint serves.

Without a valid session a page redirects to the login form (remembering where it was going), a
fragment answers 401 with ``HX-Redirect`` so that htmx takes the whole page there, and JSON
answers 401.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bourse.core.compute import MAX_NODES
from bourse.core.errors import BourseError, InvalidInput, NotFound, Unauthorized
from bourse.protocol.common import ID_PATTERN
from bourse.server.access import Scope
from bourse.server.routes.deps import get_state
from bourse.server.state import ServerState
from bourse.server.ui.render import json_response, page, secured
from bourse.server.ui.session import LOGIN_PATH, Session, session_of

_ID = re.compile(ID_PATTERN)
MAX_ID = 2**63 - 1


class Kind(Enum):
    PAGE = "page"
    FRAGMENT = "fragment"
    JSON = "json"


@dataclass(frozen=True)
class Ctx:
    """What an authenticated UI endpoint works with."""

    request: Request
    state: ServerState
    session: Session

    @property
    def scope(self) -> Scope:
        """What the signed-in token may see (its project; everything for an admin)."""
        return self.session.principal.scope

    @property
    def htmx(self) -> bool:
        return self.request.headers.get("hx-request") == "true"

    def context(self, **values: Any) -> dict[str, Any]:
        """Template values every page needs, plus ``values``."""
        return {"csrf": self.session.csrf, "path": self.request.url.path, **values}


Handler = Callable[[Ctx], Awaitable[Response]]


def guarded(handler: Handler, kind: Kind) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        state = get_state(request)
        try:
            session = await session_of(request, state)
        except Unauthorized as exc:
            return unauthenticated(request, kind, exc)
        try:
            return secured(await handler(Ctx(request, state, session)))
        except BourseError as exc:
            return failure(exc, kind, session)

    endpoint.__name__ = handler.__name__
    return endpoint


def unauthenticated(request: Request, kind: Kind, exc: Unauthorized) -> Response:
    if kind is Kind.PAGE:
        return secured(RedirectResponse(login_url(request.url.path, request.url.query), 303))
    if kind is Kind.FRAGMENT:
        current = urlsplit(request.headers.get("hx-current-url", ""))
        target = login_url(current.path, current.query)
        return page("fragment_error.html", 401, headers={"HX-Redirect": target},
                    message="your session has ended", hint="sign in again")
    return json_response({"error": exc.message, "hint": "sign in again at /ui/login"}, 401)


def login_url(path: str, query: str = "") -> str:
    if not path.startswith("/ui/") or path.startswith(LOGIN_PATH):
        return LOGIN_PATH
    target = f"{path}?{query}" if query else path
    return f"{LOGIN_PATH}?next={quote(target, safe='')}"


def failure(exc: BourseError, kind: Kind, session: Session) -> Response:
    status = exc.http_status if 400 <= exc.http_status < 600 else 500
    if kind is Kind.JSON:
        return json_response({"error": exc.message, "hint": exc.hint}, status)
    template = "error.html" if kind is Kind.PAGE else "fragment_error.html"
    return page(template, status, message=exc.message, hint=exc.hint, csrf=session.csrf,
                path="")


def path_id(ctx: Ctx, name: str) -> str:
    """A job or node id from the path; NotFound when it cannot be one."""
    value = str(ctx.request.path_params[name])
    if len(value) > 64 or not _ID.fullmatch(value):
        raise NotFound(f"no {name.removesuffix('_id')} {value[:64]!r}")
    return value


def int_param(ctx: Ctx, name: str, default: int, high: int = MAX_ID) -> int:
    raw = ctx.request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or int(raw) > high:
        raise InvalidInput(f"{name} must be a whole number from 0 to {high}", field=name)
    return int(raw)


def member_rank(ctx: Ctx) -> int | None:
    """The gang member a page or a feed shows (``?rank=``); None: every one."""
    if not ctx.request.query_params.get("rank"):
        return None
    return int_param(ctx, "rank", 0, MAX_NODES - 1)
