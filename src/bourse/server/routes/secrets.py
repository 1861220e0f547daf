"""``/api/v1/secrets``: the caller's project's secrets. Values go in and never come out."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from bourse.protocol.access import SECRET_NAME_PATTERN, SecretList, SecretSet, SecretView
from bourse.server.errors import responses
from bourse.server.routes.deps import State, User
from bourse.server.services import secrets

router = APIRouter(prefix="/api/v1/secrets", tags=["secrets"])
NamePath = Annotated[str, Path(pattern=SECRET_NAME_PATTERN, max_length=128)]


@router.get("", responses=responses(401))
async def list_secrets(state: State, user: User) -> SecretList:
    """Names and times only."""
    async with state.db.read() as session:
        rows = await secrets.list_secrets(session, user.project_id)
    return SecretList(secrets=[secrets.secret_view(r) for r in rows])


@router.put("/{name}", status_code=201, responses=responses(400, 401, 413, 422))
async def set_secret(name: NamePath, body: SecretSet, state: State, user: User) -> SecretView:
    """Create or replace a secret; jobs started from now on get the new value."""
    async with state.db.write() as session:
        row = await secrets.set_secret(session, state.secret_box, user.project_id, name,
                                       value=body.value, now=state.clock())
        return secrets.secret_view(row)


@router.delete("/{name}", responses=responses(401, 404, 422))
async def delete_secret(name: NamePath, state: State, user: User) -> SecretView:
    async with state.db.write() as session:
        return secrets.secret_view(await secrets.delete_secret(session, user.project_id, name))
