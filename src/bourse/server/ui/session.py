"""The browser's session: a user token in an HttpOnly cookie, checked like a bearer token.

Browsers cannot send ``Authorization`` headers on navigation, so ``/ui/login`` puts the user's
token in a cookie (``HttpOnly``, ``SameSite=Strict``, ``Secure`` over https, path ``/``: the UI
under ``/ui`` and the jobs' proxied ports under ``/jobs`` read it; the API ignores it) and
every UI request is authenticated from it by ``services.tokens.authenticate`` through the same
cache as the API: a revoked or expired token stops working in the UI when it stops working in
the API. The cookie is the token itself rather than a signed reference to it, so there is no
second secret to keep, rotate or leak; the token never appears in a page, a URL after login, or
a log line.

State changes (cancel, logout) are POSTs that must carry a CSRF token and, when the browser sends
an ``Origin``, come from this origin. The CSRF token is an HMAC of a fixed label keyed with the
session's token: a page may show it, since it cannot be turned back into the token, and another
site cannot compute it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response

from bourse.core.errors import Forbidden
from bourse.server.audit.middleware import remember
from bourse.server.http.cookie import COOKIE
from bourse.server.services.tokens import Principal, authenticate
from bourse.server.state import ServerState

COOKIE_PATH = "/"
MAX_FORM_BYTES = 16 * 1024  # the UI's forms hold a token, a CSRF token and a path
MAX_AGE_S = 12 * 3600  # a browser session outlives no token, and no working day
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"
_CSRF_LABEL = b"bourse-ui-csrf-v1"
LOGIN_PATH = "/ui/login"
HOME_PATH = "/ui/jobs"


@dataclass(frozen=True)
class Session:
    """An authenticated browser: who it is, and the CSRF token its forms carry."""

    principal: Principal
    csrf: str


def csrf_token(secret: str) -> str:
    return hmac.new(secret.encode(), _CSRF_LABEL, hashlib.sha256).hexdigest()[:32]


async def authenticate_secret(state: ServerState, secret: str | None) -> Principal:
    """A user token's principal, through the API's cache; Unauthorized otherwise."""
    now = state.clock()
    cached = state.principals.get(secret, "user", now)
    if cached is not None:
        return cached
    async with state.db.read() as session:
        principal = await authenticate(session, secret, "user", now)
    state.principals.put(secret, principal, now)
    return principal


async def session_of(connection: HTTPConnection, state: ServerState) -> Session:
    """The request's session from its cookie; Unauthorized when there is none or it is stale."""
    secret = connection.cookies.get(COOKIE)
    principal = await authenticate_secret(state, secret)
    remember(connection.scope, principal)
    assert secret is not None  # authenticate refuses a missing token
    return Session(principal, csrf_token(secret))


def set_cookie(response: Response, request: Request, secret: str, principal: Principal,
               now: float) -> None:
    max_age = MAX_AGE_S
    if principal.expires_at is not None:
        max_age = max(0, min(max_age, int(principal.expires_at - now)))
    response.set_cookie(COOKIE, secret, max_age=max_age, path=COOKIE_PATH, httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")


def clear_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")


def same_origin(request: HTTPConnection) -> bool:
    """Whether a state-changing request comes from this site's own pages.

    ``Origin`` (sent by browsers on every POST) must name this host; without it,
    ``Sec-Fetch-Site`` must not say another site. Only the host is compared, so that a proxy
    terminating TLS in front of the coordinator does not break it.
    """
    origin = request.headers.get("origin")
    if origin is not None:
        return origin != "null" and urlsplit(origin).netloc == request.headers.get("host")
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")


async def check_csrf(request: Request, session: Session) -> None:
    """Forbidden unless the request is same-origin and carries the session's CSRF token."""
    if not same_origin(request):
        raise Forbidden("cross-site request refused", hint="use the exchange's own pages")
    sent = request.headers.get(CSRF_HEADER) or (await form_fields(request)).get(CSRF_FIELD)
    if sent is None or not hmac.compare_digest(sent, session.csrf):
        raise Forbidden("missing or wrong CSRF token", hint="reload the page and try again")


async def form_fields(request: Request) -> dict[str, str]:
    """The fields of a url-encoded form (the only kind the UI posts), first value of each."""
    if not request.headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"):
        return {}
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise Forbidden("form too large")
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=20)
    return {name: values[0] for name, values in fields.items()}


def safe_next(target: str | None) -> str:
    """Where to go after login: a path of the UI only (never another site)."""
    if not target or not target.startswith("/ui/") or target.startswith("//") or "\\" in target:
        return HOME_PATH
    if urlsplit(target).netloc or target.startswith(LOGIN_PATH):
        return HOME_PATH
    return target
