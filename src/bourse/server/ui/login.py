"""Signing in and out.

``GET /ui/login`` shows a token form; ``POST /ui/login`` checks the token like the API does and
sets the session cookie. ``GET /ui/login?token=...`` (a link the CLI prints) signs in at once
when the browser says the navigation did not come from another site (``Sec-Fetch-Site`` of
``none`` for a typed or pasted URL, ``same-origin``); a link on another site only shows the form,
so no one can sign a browser into their own token behind its user's back. Either way the
browser is sent on to a URL without the token, and nothing logs it (the coordinator writes no
access log). ``/ui/login#token=...`` is better still: the fragment never leaves the browser;
the page's script posts it.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bourse.core.errors import Unauthorized
from bourse.server.routes.deps import get_state
from bourse.server.ui.guard import Ctx
from bourse.server.ui.render import page, secured
from bourse.server.ui.session import (
    HOME_PATH,
    LOGIN_PATH,
    authenticate_secret,
    check_csrf,
    clear_cookie,
    form_fields,
    safe_next,
    same_origin,
    set_cookie,
)

NO_REFERRER = {"Referrer-Policy": "no-referrer"}
MAX_TOKEN = 512


REFUSED = {"cross-site": ("this sign-in link came from another site",
                          "paste your token below if you meant to sign in")}


def _form(request: Request, status: int = 200, error: str | None = None,
          hint: str | None = None, target: str | None = None) -> Response:
    if error is None and (refused := REFUSED.get(request.query_params.get("refused", ""))):
        error, hint = refused
    return page("login.html", status, error=error, hint=hint,
                next=safe_next(target or request.query_params.get("next")), csrf="",
                path=LOGIN_PATH)


async def _sign_in(request: Request, secret: str, target: str | None) -> Response:
    state = get_state(request)
    secret = secret.strip()[:MAX_TOKEN]
    try:
        principal = await authenticate_secret(state, secret or None)
    except Unauthorized as exc:
        return _form(request, 401, exc.message, "paste a user token: `bourse up` and "
                     "`bourse server` write one to the credentials file", target)
    response = RedirectResponse(safe_next(target), 303, headers=NO_REFERRER)
    set_cookie(response, request, secret, principal, state.clock())
    return secured(response)


async def login_form(request: Request) -> Response:
    secret = request.query_params.get("token")
    if secret is None:
        return _form(request)
    if request.headers.get("sec-fetch-site", "none") not in ("none", "same-origin"):
        # the token leaves the address bar either way
        return secured(RedirectResponse(f"{LOGIN_PATH}?refused=cross-site", 303,
                                        headers=NO_REFERRER))
    return await _sign_in(request, secret, request.query_params.get("next"))


async def login_submit(request: Request) -> Response:
    if not same_origin(request):
        return _form(request, 403, "cross-site sign-in refused")
    form = await form_fields(request)
    return await _sign_in(request, form.get("token", ""), form.get("next"))


async def logout(ctx: Ctx) -> Response:
    await check_csrf(ctx.request, ctx.session)
    response = RedirectResponse(LOGIN_PATH, 303)
    clear_cookie(response, ctx.request)
    return response


async def home(_request: Request) -> Response:
    return secured(RedirectResponse(HOME_PATH, 307))


async def root(_request: Request) -> Response:
    return secured(RedirectResponse("/ui/", 307))
