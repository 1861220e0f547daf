"""Projects (tenants) and the API tokens that belong to them."""

from __future__ import annotations

import re

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import Conflict, InvalidInput, NotFound
from bourse.protocol.access import (
    TAG_PATTERN,
    ProjectCreate,
    ProjectView,
    TokenCreate,
    TokenCreated,
    TokenView,
)
from bourse.server.access import Scope
from bourse.server.db.schema import DEFAULT_PROJECT, Project, Token
from bourse.server.ids import new_id
from bourse.server.services.tokens import create_token


def project_view(project: Project) -> ProjectView:
    return ProjectView(name=project.id, required_tags=list(project.required_tags or []),
                       created_at=project.created_at)


async def create_project(session: AsyncSession, body: ProjectCreate, now: float) -> Project:
    if await session.get(Project, body.name) is not None:
        raise Conflict(f"project {body.name!r} already exists", hint="`bourse projects` lists them")
    tags = sorted(set(body.required_tags))
    for tag in tags:
        check_tag(tag, "required_tags")
    project = Project(id=body.name, required_tags=tags, created_at=now)
    session.add(project)
    return project


async def ensure_defaults(session: AsyncSession, now: float) -> None:
    """The ``default`` project (made by migration 0008; again here for a database whose rows
    were emptied by hand)."""
    if await session.get(Project, DEFAULT_PROJECT) is None:
        session.add(Project(id=DEFAULT_PROJECT, required_tags=[], created_at=now))


def check_tag(tag: str, field: str) -> str:
    if not re.fullmatch(TAG_PATTERN, tag):
        raise InvalidInput(f"{tag[:40]!r} is not a tag", field=field,
                           hint="tags are lower-case letters, digits, '_', '.', '-' (32 at most)")
    return tag


async def get_project(session: AsyncSession, name: str, scope: Scope) -> Project:
    project = await session.get(Project, name) if scope.sees(name) else None
    if project is None:
        raise NotFound(f"no project {name!r}", hint="`bourse projects` lists projects; an "
                       "admin creates one with `bourse projects create NAME`")
    return project


async def list_projects(session: AsyncSession, scope: Scope) -> list[Project]:
    return list((await session.scalars(
        scope.filter(select(Project).order_by(Project.id), Project.id))).all())


def token_view(token: Token, secret: str | None = None) -> TokenView:
    fields = {"id": token.id, "name": token.name, "project": token.project_id or "default",
              "role": token.role or "member", "created_at": token.created_at,
              "expires_at": token.expires_at, "revoked_at": token.revoked_at}
    return TokenCreated(**fields, token=secret) if secret else TokenView(**fields)


async def create_user_token(session: AsyncSession, body: TokenCreate,
                            now: float) -> TokenCreated:
    await get_project(session, body.project, Scope(None))
    token_id = new_id("tok")
    expires_at = now + body.expires_in_s if body.expires_in_s is not None else None
    secret = await create_token(session, "user", now, name=body.name, role=body.role,
                                expires_at=expires_at, project_id=body.project,
                                token_id=token_id)
    await session.flush()
    token = await session.get(Token, token_id)
    assert token is not None
    created = token_view(token, secret)
    assert isinstance(created, TokenCreated)
    return created


async def list_user_tokens(session: AsyncSession) -> list[Token]:
    return list((await session.scalars(select(Token).where(Token.kind == "user")
                                       .order_by(Token.created_at, Token.id))).all())


async def revoke_token(session: AsyncSession, token_id: str, now: float) -> Token:
    token = await session.get(Token, token_id, with_for_update=True)
    if token is None or token.kind != "user":
        raise NotFound(f"no token {token_id!r}", hint="`bourse tokens list` lists tokens")
    if token.revoked_at is None:
        token.revoked_at = now
    return token
