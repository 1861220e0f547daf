"""``/api/v1/clouds``, ``/api/v1/launches`` and a project's launch limits (docs/clouds.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from bourse.protocol.access import PROJECT_PATTERN
from bourse.protocol.clouds import CloudList, LaunchList, ProjectLimits, ProjectLimitsView
from bourse.server.errors import responses
from bourse.server.routes.deps import Admin, State, User
from bourse.server.services import cloud_views
from bourse.server.services.launch_figures import launch_figures
from bourse.server.services.launch_views import launch_views

router = APIRouter(prefix="/api/v1", tags=["clouds"])
ProjectPath = Annotated[str, Path(pattern=PROJECT_PATTERN)]


@router.get("/clouds", responses=responses(401))
async def list_clouds(state: State, _user: User) -> CloudList:
    """Which clouds this exchange launches on, which it does not and why, their regions, and
    how they delivered the machines launched there in the last 30 days."""
    figures = None
    if state.launcher is not None:
        async with state.db.read() as session:
            figures = await launch_figures(session, state.clock())
    return cloud_views.cloud_list(state.launcher, state.config.clouds, figures)


@router.get("/launches", responses=responses(401, 422))
async def list_launches(state: State, user: User,
                        live: Annotated[bool, Query()] = False) -> LaunchList:
    """The machines the exchange launched for the caller's projects, newest first."""
    async with state.db.read() as session:
        found = await launch_views(session, user.scope, state.clock(), live_only=live)
    return LaunchList(launches=found)


@router.get("/projects/{project}/limits", responses=responses(401, 404, 422))
async def get_limits(project: ProjectPath, state: State, user: User) -> ProjectLimitsView:
    async with state.db.read() as session:
        return await cloud_views.limits(session, project, user.scope, state.clock())


@router.patch("/projects/{project}/limits", responses=responses(400, 401, 403, 404, 422))
async def set_limits(project: ProjectPath, body: ProjectLimits, state: State,
                     admin: Admin) -> ProjectLimitsView:
    """Set the clouds a project may launch on and its spending caps (admins)."""
    async with state.db.write() as session:
        await cloud_views.set_limits(session, project, body, admin.scope)
    async with state.db.read() as session:
        return await cloud_views.limits(session, project, admin.scope, state.clock())
