"""``/api/v1/runs``: app runs (the jobs that carry one ``JobSpec.run``), listed and shown."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from bourse.protocol.api import RunDetail, RunList
from bourse.protocol.common import ID_PATTERN
from bourse.server.errors import responses
from bourse.server.routes.deps import State, User
from bourse.server.services import runs

router = APIRouter(prefix="/api/v1/runs", tags=["runs"])
RunIdPath = Annotated[str, Path(pattern=ID_PATTERN, max_length=64)]


@router.get("", responses=responses(401, 422))
async def list_runs(state: State, user: User,
                    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                    app: Annotated[str | None, Query(
                        max_length=200, description="only runs of apps whose name contains "
                        "this, ignoring case")] = None) -> RunList:
    async with state.db.read() as session:
        return RunList(runs=await runs.list_runs(session, user.scope, limit, app))


@router.get("/{run_id}", responses=responses(401, 404, 422))
async def show(run_id: RunIdPath, state: State, user: User) -> RunDetail:
    async with state.db.read() as session:
        return await runs.run_detail(session, run_id, user.scope)
