"""``/api/v1/projects`` and ``/api/v1/tokens``: tenants and their API tokens (admins)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from bourse.protocol.access import (
    ProjectCreate,
    ProjectList,
    ProjectView,
    TokenCreate,
    TokenCreated,
    TokenList,
    TokenView,
)
from bourse.protocol.common import ID_PATTERN
from bourse.server.errors import responses
from bourse.server.routes.deps import Admin, State, User
from bourse.server.services import projects

router = APIRouter(prefix="/api/v1", tags=["access"])
TokenIdPath = Annotated[str, Path(pattern=ID_PATTERN, max_length=64)]


@router.post("/projects", status_code=201, responses=responses(400, 401, 403, 409, 413, 422))
async def create_project(body: ProjectCreate, state: State, _admin: Admin) -> ProjectView:
    async with state.db.write() as session:
        return projects.project_view(await projects.create_project(session, body, state.clock()))


@router.get("/projects", responses=responses(401))
async def list_projects(state: State, user: User) -> ProjectList:
    """Every project for an admin; a member's or provider's own otherwise."""
    async with state.db.read() as session:
        found = await projects.list_projects(session, user.scope)
    return ProjectList(projects=[projects.project_view(p) for p in found])


@router.post("/tokens", status_code=201, responses=responses(400, 401, 403, 404, 413, 422))
async def create_token(body: TokenCreate, state: State, _admin: Admin) -> TokenCreated:
    """A user token for a project and role; its secret is in this answer only."""
    async with state.db.write() as session:
        return await projects.create_user_token(session, body, state.clock())


@router.get("/tokens", responses=responses(401, 403))
async def list_tokens(state: State, _admin: Admin) -> TokenList:
    async with state.db.read() as session:
        found = await projects.list_user_tokens(session)
    return TokenList(tokens=[projects.token_view(t) for t in found])


@router.delete("/tokens/{token_id}", responses=responses(401, 403, 404, 422))
async def revoke_token(token_id: TokenIdPath, state: State, _admin: Admin) -> TokenView:
    """Revoke a user token: refused from the next request on."""
    async with state.db.write() as session:
        token = await projects.revoke_token(session, token_id, state.clock())
        view = projects.token_view(token)
    state.principals.forget()
    return view
