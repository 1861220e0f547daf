"""``/api/2.0/mlflow-artifacts/``: MLflow's proxied artifact upload, download and listing.

A run's ``artifact_uri`` is ``mlflow-artifacts:/<experiment>/<run>/artifacts``, so MLflow's
client sends its files here (PUT) and reads them back (GET); they live in the exchange's
store under ``tracking/<project>/<run>/`` (``services.tracking_artifacts``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from bourse.core.errors import InvalidInput
from bourse.server.routes.deps import State
from bourse.server.routes.mlflow import ERRORS, MlflowRoute, Writer
from bourse.server.services import tracking as t
from bourse.server.services import tracking_artifacts as ta

# ``<experiment>/<run>/artifacts/<file>``
ArtifactPath = Annotated[str, Path(min_length=1, max_length=1024)]
router = APIRouter(prefix="/api/2.0/mlflow-artifacts", tags=["mlflow"],
                   route_class=MlflowRoute, responses=ERRORS)


@router.put("/artifacts/{path:path}")
async def upload_artifact(path: ArtifactPath, request: Request, state: State,
                          who: Writer) -> dict[str, Any]:
    place = ta.place_of(path)
    async with state.db.write() as session:
        run = await t.writable_run(session, who, place.run_id, state.clock())
    await ta.put(state.dataplane, run.project_id, place, await request.body())
    return {}


@router.get("/artifacts/{path:path}")
async def download_artifact(path: ArtifactPath, state: State, who: Writer) -> Response:
    place = ta.place_of(path)
    if not place.relative:
        raise InvalidInput("name a file under the run's artifacts")
    async with state.db.write() as session:
        run = await t.job_run(session, who, place.run_id, state.clock())
    data = await ta.get(state.dataplane, run.project_id, place)
    return Response(bytes(data), media_type="application/octet-stream")


@router.get("/artifacts")
async def list_artifacts(state: State, who: Writer,
                         path: Annotated[str, Query(max_length=1024)] = "") -> dict[str, Any]:
    place = ta.place_of(path)
    async with state.db.write() as session:
        run = await t.job_run(session, who, place.run_id, state.clock())
    return {"files": await ta.listing(state.dataplane, run.project_id, place)}
