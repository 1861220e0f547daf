"""Tokens: the admin token made at first start, enrolment tokens, node credentials.

Only SHA-256 digests are stored. User and node credentials are different kinds and are never
interchangeable: a user token cannot open the agent channel, a node credential cannot call the
user API.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import Unauthorized
from bourse.core.states import NodeState
from bourse.server.access import ALL, Scope
from bourse.server.db.schema import DEFAULT_PROJECT, Node, Token
from bourse.server.ids import digest, new_id, new_secret

TokenKind = Literal["user", "enroll", "node"]


@dataclass(frozen=True)
class Principal:
    kind: TokenKind
    token_id: str
    role: str | None = None
    node_id: str | None = None
    expires_at: float | None = None
    project_id: str = DEFAULT_PROJECT

    @property
    def admin(self) -> bool:
        return self.kind == "user" and self.role == "admin"

    @property
    def provider(self) -> bool:
        """May enrol nodes into its project."""
        return self.admin or (self.kind == "user" and self.role == "provider")

    @property
    def scope(self) -> Scope:
        return ALL if self.admin else Scope(self.project_id)


@dataclass
class PrincipalCache:
    """Recently authenticated tokens, so that every request does not read the token table.

    A revoked token stays usable for at most ``ttl_s`` (default 5 s); an expired one never is,
    since the expiry is checked on every hit.
    """

    ttl_s: float = 5.0
    _entries: dict[str, tuple[Principal, float, float | None]] = field(default_factory=dict)

    def get(self, secret: str | None, kind: TokenKind, now: float) -> Principal | None:
        entry = self._entries.get(digest(secret)) if secret else None
        if entry is None:
            return None
        principal, cached_at, expires_at = entry
        if (principal.kind != kind or now - cached_at > self.ttl_s
                or (expires_at is not None and expires_at <= now)):
            return None
        return principal

    def put(self, secret: str | None, principal: Principal, now: float) -> None:
        if secret is None:
            return
        if len(self._entries) > 10_000:
            self._entries.clear()
        self._entries[digest(secret)] = (principal, now, principal.expires_at)

    def forget(self) -> None:
        self._entries.clear()


async def has_user_tokens(session: AsyncSession) -> bool:
    found = await session.scalar(select(Token.id).where(Token.kind == "user").limit(1))
    return found is not None


async def create_token(
    session: AsyncSession, kind: TokenKind, now: float, *, name: str | None = None,
    role: str | None = None, node_id: str | None = None, expires_at: float | None = None,
    project_id: str | None = DEFAULT_PROJECT, token_id: str | None = None,
    price: float | None = None,
) -> str:
    """``price``: an enrolment token's node's $/h (its owner's), None to price it by its
    hardware."""
    secret = new_secret({"user": "u", "enroll": "e", "node": "n"}[kind])
    session.add(Token(id=token_id or new_id("tok"), kind=kind, hash=digest(secret), name=name,
                      role=role, node_id=node_id, created_at=now, expires_at=expires_at,
                      project_id=project_id, price=price))
    return secret


async def authenticate(session: AsyncSession, secret: str | None, kind: TokenKind,
                       now: float) -> Principal:
    """The principal behind a bearer token of the given kind, or Unauthorized."""
    if not secret:
        raise Unauthorized("missing bearer token", hint="send 'Authorization: Bearer <token>'")
    token = await session.scalar(select(Token).where(Token.hash == digest(secret)))
    if token is None or token.kind != kind:
        raise Unauthorized(f"not a valid {kind} token")
    if token.revoked_at is not None:
        raise Unauthorized("this token has been revoked")
    if token.expires_at is not None and token.expires_at <= now:
        raise Unauthorized("this token has expired")
    return Principal(kind=kind, token_id=token.id, role=token.role, node_id=token.node_id,
                     expires_at=token.expires_at, project_id=await _project_of(session, token))


async def _project_of(session: AsyncSession, token: Token) -> str:
    if token.kind == "node" and token.node_id is not None:
        found = await session.scalar(select(Node.project_id).where(Node.id == token.node_id))
        return found or DEFAULT_PROJECT
    return token.project_id or DEFAULT_PROJECT


async def enroll_node(session: AsyncSession, enroll_secret: str, name: str,
                      keep_alive_s: float, now: float) -> tuple[str, str]:
    """Spend a one-time enrolment token on a new node; return (node id, node credential)."""
    principal = await authenticate(session, enroll_secret, "enroll", now)
    token = await session.get(Token, principal.token_id, with_for_update=True)
    if token is None or token.used_at is not None:
        raise Unauthorized("this enrolment token has already been used",
                           hint="create a new one with `bourse nodes enroll`")
    token.used_at = now
    if token.node_id is not None:  # made for a node the exchange launched: enrol into it
        return token.node_id, await _enroll_launched(session, token.node_id, keep_alive_s, now)
    node_id = new_id("n")
    session.add(Node(id=node_id, name=name, state=NodeState.OFFLINE, capabilities=None,
                     keep_alive_s=keep_alive_s, last_seen=None, session=None,
                     price=token.price, created_at=now, updated_at=now,
                     project_id=principal.project_id, tags=[]))
    credential = await create_token(session, "node", now, name=name, node_id=node_id,
                                    project_id=None)
    token.node_id = node_id
    return node_id, credential


async def _enroll_launched(session: AsyncSession, node_id: str, keep_alive_s: float,
                           now: float) -> str:
    """A launched node's agent spends the token bound to it: the node row (made at launch)
    keeps its name and price; the token is refused once the node was terminated."""
    node = await session.get(Node, node_id, with_for_update=True)
    if node is None or node.state not in (NodeState.LAUNCHING, NodeState.BOOTING):
        raise Unauthorized("this enrolment token is for a launched node that is gone",
                           hint="the exchange terminated the instance; it launches another")
    node.keep_alive_s, node.state, node.updated_at = keep_alive_s, NodeState.OFFLINE, now
    node.last_seen = now  # its loss window runs from its enrolment, not from its launch
    return await create_token(session, "node", now, name=node.name, node_id=node_id,
                              project_id=None)


def write_credentials(path: Path, url: str, token: str) -> None:
    """Write the CLI's credentials file, readable only by its owner, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": url, "token": token}, handle)
    os.replace(tmp, path)
