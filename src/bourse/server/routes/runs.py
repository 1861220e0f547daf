"""``/api/v1/runs``: app runs (the jobs that carry one ``JobSpec.run``), listed and shown;
their driver's lease, renewed and ended; a run cancelled."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from bourse.protocol.api import RunCancel, RunCancelled, RunDetail, RunLease, RunList
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


@router.post("/{run_id}/lease", responses=responses(401, 404, 409, 422))
async def renew_lease(run_id: RunIdPath, state: State, user: User) -> RunLease:
    """The run's driver is alive: renew its lease (the first call takes it)."""
    async with state.db.write() as session:
        return await runs.renew_lease(session, run_id, user.project_id, state.clock(),
                                      state.config.driver_lease)


@router.delete("/{run_id}/lease", status_code=204, responses=responses(401, 404, 422))
async def end_lease(run_id: RunIdPath, state: State, user: User) -> Response:
    """The run's driver is done: its lease ends without cancelling anything."""
    async with state.db.write() as session:
        await runs.end_run(session, run_id, user.project_id, state.clock())
    return Response(status_code=204)


@router.post("/{run_id}/cancel", responses=responses(400, 401, 404, 422))
async def cancel(run_id: RunIdPath, state: State, user: User,
                 body: RunCancel | None = None) -> RunCancelled:
    """Cancel the run: its jobs that have not ended, and any it would submit later."""
    why = (body or RunCancel()).reason
    async with state.db.write() as session:
        cancelled, commands = await runs.cancel_run(session, run_id, user.scope,
                                                    state.clock(), why)
    state.hub.send(commands)
    state.notifier.notify()
    return cancelled
