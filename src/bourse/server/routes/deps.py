"""Request dependencies: the server state and the authenticated principal."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from starlette.requests import HTTPConnection

from bourse.server.errors import Forbidden
from bourse.server.services.tokens import Principal, TokenKind, authenticate
from bourse.server.state import ServerState


def get_state(request: HTTPConnection) -> ServerState:
    state: ServerState = request.app.state.bourse
    return state


def bearer(connection: HTTPConnection) -> str | None:
    header = connection.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


async def principal_of(connection: HTTPConnection, kind: TokenKind) -> Principal:
    state = get_state(connection)
    async with state.db.read() as session:
        return await authenticate(session, bearer(connection), kind, state.clock())


async def user(request: Request) -> Principal:
    return await principal_of(request, "user")


async def admin(request: Request) -> Principal:
    principal = await principal_of(request, "user")
    if not principal.admin:
        raise Forbidden("this needs an admin token")
    return principal


async def user_or_node(request: Request) -> Principal:
    kind: TokenKind = "node" if (bearer(request) or "").startswith("bse_n_") else "user"
    return await principal_of(request, kind)


State = Annotated[ServerState, Depends(get_state)]
User = Annotated[Principal, Depends(user)]
Admin = Annotated[Principal, Depends(admin)]
UserOrNode = Annotated[Principal, Depends(user_or_node)]
