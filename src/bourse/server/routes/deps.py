"""Request dependencies: the server state and the authenticated principal."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from bourse.core.errors import Forbidden
from bourse.server.audit.middleware import remember
from bourse.server.services.tokens import Principal, TokenKind, authenticate
from bourse.server.state import ServerState


def get_state(request: HTTPConnection) -> ServerState:
    state: ServerState = request.app.state.bourse
    return state


async def state_dependency(request: Request) -> ServerState:
    """``get_state`` as an async dependency (FastAPI runs sync ones on a thread pool)."""
    return get_state(request)


def bearer(connection: HTTPConnection) -> str | None:
    header = connection.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


async def principal_of(connection: HTTPConnection, kind: TokenKind) -> Principal:
    state = get_state(connection)
    secret = bearer(connection)
    now = state.clock()
    principal = state.principals.get(secret, kind, now)
    if principal is None:
        async with state.db.read() as session:
            principal = await authenticate(session, secret, kind, now)
        state.principals.put(secret, principal, now)
    remember(connection.scope, principal)
    return principal


# Declares the bearer scheme in the OpenAPI document, so the interactive docs can authorise
# and every route that needs a token says so; the token itself is read by ``principal_of``
# from the same header (auto_error off: a missing token is refused there, in our words).
BEARER = HTTPBearer(auto_error=False, scheme_name="token", bearerFormat="bourse token",
                    description="An API token (`bourse tokens create`) or a node's token.")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]


async def user(request: Request, _: Credentials) -> Principal:
    return await principal_of(request, "user")


async def admin(request: Request, _: Credentials) -> Principal:
    principal = await principal_of(request, "user")
    if not principal.admin:
        raise Forbidden("this needs an admin token",
                        hint="ask an admin: member and provider tokens act in their own project")
    return principal


async def provider(request: Request, _: Credentials) -> Principal:
    principal = await principal_of(request, "user")
    if not principal.provider:
        raise Forbidden("this needs a provider or admin token",
                        hint="an admin creates one with `bourse tokens create --role provider`")
    return principal


async def user_or_node(request: Request, _: Credentials) -> Principal:
    kind: TokenKind = "node" if (bearer(request) or "").startswith("bse_n_") else "user"
    return await principal_of(request, kind)


State = Annotated[ServerState, Depends(state_dependency)]
User = Annotated[Principal, Depends(user)]
Admin = Annotated[Principal, Depends(admin)]
Provider = Annotated[Principal, Depends(provider)]
UserOrNode = Annotated[Principal, Depends(user_or_node)]
