"""``/api/2.0/mlflow/``: the part of MLflow's tracking REST API its clients use
(``mlflow.log_*``, ``MlflowClient``, Lightning's ``MLFlowLogger``), over ``services.tracking``.

Errors are MLflow's: ``{"error_code": ..., "message": ...}`` (``MlflowRoute``). The caller is
a user token (``MLFLOW_TRACKING_TOKEN`` is sent as a bearer token) or a job's tracking token.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.exceptions import HTTPException

from bourse.core.errors import (
    BourseError,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    Unauthorized,
)
from bourse.protocol import mlflow as m
from bourse.server.routes.deps import Credentials, State, bearer, get_state, principal_of
from bourse.server.services import tracking as t
from bourse.server.services import tracking_log as tl
from bourse.server.services import tracking_search as ts
from bourse.server.services.tracking_tokens import PREFIX, run_writer

_JSON: TypeAdapter[Any] = TypeAdapter(Any)  # pydantic's JSON parser
WRITER = "bourse.mlflow.writer"  # the request scope's key for the authenticated writer
MAX_BODY = 1024 * 1024  # MLflow's limit on a request body
NUL = "a NUL character (\\u0000) is not allowed in names, keys or values"  # PostgreSQL's text
CODES: tuple[tuple[type[BourseError], str, int], ...] = (
    (NotFound, "RESOURCE_DOES_NOT_EXIST", 404), (Conflict, "RESOURCE_ALREADY_EXISTS", 400),
    (Unauthorized, "UNAUTHENTICATED", 401), (Forbidden, "PERMISSION_DENIED", 403),
    (InvalidInput, "INVALID_PARAMETER_VALUE", 400))


# The statuses MLflow's errors come with, declared on every MLflow route (its clients retry
# nothing on these; 422 is never sent: a body that fails validation is MLflow's 400)
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": m.MlflowErrorView, "description": meaning} for status, meaning in (
        (400, "INVALID_PARAMETER_VALUE or RESOURCE_ALREADY_EXISTS: the request is not valid."),
        (401, "UNAUTHENTICATED: no token, or one that is unknown, revoked or expired."),
        (403, "PERMISSION_DENIED: the token may not write this run."),
        (404, "RESOURCE_DOES_NOT_EXIST: not found, or not visible to the token's project."))}


def mlflow_error(exc: Exception) -> JSONResponse:
    if isinstance(exc, RequestValidationError):
        first = (exc.errors() or [{}])[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return JSONResponse({"error_code": "INVALID_PARAMETER_VALUE",
                             "message": f"{where}: {first.get('msg', 'invalid')}"}, 400)
    assert isinstance(exc, BourseError)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    for kind, code, status in CODES:
        if isinstance(exc, kind):
            return JSONResponse({"error_code": code, "message": str(exc)}, status,
                                headers=headers)
    return JSONResponse({"error_code": "INTERNAL_ERROR", "message": str(exc)}, 500)


class MlflowRequest(Request):
    """A request whose JSON body is parsed by pydantic's parser, into the route's body model
    where it has one (``model``): one pass from the bytes to the model, where parsing the
    JSON to dicts and validating those took four times as long for a 1,000-point log-batch
    (benchmarks/tracking.py); FastAPI then takes the model as it is. A body pydantic's JSON
    parser refuses goes to ``json``, for its error."""

    model: type[BaseModel] | None = None

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            if b"\x00" in body or b"\\u0000" in body:
                raise InvalidInput(NUL)
            self._json = self._parse(body)
        return self._json

    def _parse(self, body: bytes) -> Any:
        try:
            if self.model is not None:
                return self.model.model_validate_json(body)
            return _JSON.validate_json(body)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            if any(e["type"] == "json_invalid" for e in errors):
                return json.loads(body)  # raises its JSONDecodeError
            raise RequestValidationError(errors) from None


class MlflowRoute(APIRoute):
    """A route whose errors (validation and auth included) are MLflow-shaped."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        model = _body_model(self)

        async def handle(request: Request) -> Response:
            parsed = MlflowRequest(request.scope, request.receive)
            parsed.model = model
            try:
                # who is asking comes before what is asked: an unauthenticated request gets
                # 401 whatever its body, never a validation error that probes the API
                request.scope[WRITER] = await _writer_of(parsed)
                if int(request.headers.get("content-length") or 0) > MAX_BODY:
                    raise InvalidInput("the request body is larger than 1 MB")
                if b"%00" in request.url.query.encode():
                    raise InvalidInput(NUL)
                return await handler(parsed)
            except (BourseError, RequestValidationError) as exc:
                return mlflow_error(exc)
            except HTTPException as exc:  # FastAPI's own: a body that is not JSON
                if isinstance(exc.__cause__, BourseError | RequestValidationError):
                    return mlflow_error(exc.__cause__)  # MlflowRequest.json refused it
                return JSONResponse({"error_code": "MALFORMED_REQUEST", "message": exc.detail},
                                    exc.status_code)

        return handle


def _body_model(route: APIRoute) -> type[BaseModel] | None:
    """The route's body model, when its whole body is one (``body: m.LogBatch``)."""
    field = route.body_field
    found = field.field_info.annotation if field is not None else None
    return found if isinstance(found, type) and issubclass(found, BaseModel) else None


async def _writer_of(request: Request) -> t.Writer:
    """The caller as a tracking writer: a job's tracking token, or a user token."""
    secret = bearer(request) or ""
    if secret.startswith(PREFIX):
        state = get_state(request)
        async with state.db.read() as session:
            return await run_writer(session, state.key, secret)
    principal = await principal_of(request, "user")
    return t.writer_of(principal.project_id, principal.scope)


async def writer(request: Request, _: Credentials) -> t.Writer:
    """The writer ``MlflowRoute`` authenticated before it read the body."""
    found = request.scope.get(WRITER)
    return found if isinstance(found, t.Writer) else await _writer_of(request)


Writer = Annotated[t.Writer, Depends(writer)]
router = APIRouter(prefix="/api/2.0/mlflow", tags=["mlflow"], route_class=MlflowRoute,
                   responses=ERRORS)


def _run_id(body: m.RunRef) -> str:
    run_id = body.run_id or body.run_uuid
    if not run_id:
        raise InvalidInput("run_id is required", field="run_id")
    return run_id


def _tags(items: list[m.KeyValue]) -> dict[str, str]:
    return {i.key: i.value for i in items}


@router.post("/experiments/create")
async def create_experiment(body: m.CreateExperiment, state: State,
                            who: Writer) -> dict[str, Any]:
    async with state.db.write() as session:
        row = await t.create_experiment(session, who, body.name, _tags(body.tags),
                                        state.clock())
        return {"experiment_id": row.id}


@router.get("/experiments/get")
async def get_experiment(state: State, who: Writer,
                         experiment_id: Annotated[str, Query(max_length=40)]) -> dict[str, Any]:
    async with state.db.write() as session:
        row = await t.get_experiment(session, who, experiment_id, state.clock())
        return {"experiment": t.experiment_dict(row)}


@router.get("/experiments/get-by-name")
async def experiment_by_name(state: State, who: Writer, experiment_name: Annotated[
        str, Query(max_length=500)]) -> dict[str, Any]:
    async with state.db.write() as session:
        row = await t.experiment_by_name(session, who, experiment_name)
        return {"experiment": t.experiment_dict(row)}


@router.post("/experiments/search")
async def search_experiments(body: m.SearchExperiments, state: State,
                             who: Writer) -> dict[str, Any]:
    offset = _offset(body.page_token)
    async with state.db.write() as session:
        await t.ensure_default(session, who.project_id, state.clock())
        rows = await t.list_experiments(session, who.scope, limit=body.max_results + 1,
                                        offset=offset)
        page = [t.experiment_dict(r) for r in rows[:body.max_results]]
    more = len(rows) > body.max_results
    return {"experiments": page} | ({"next_page_token": str(offset + len(page))} if more
                                    else {})


@router.post("/runs/create")
async def create_run(body: m.CreateRun, state: State, who: Writer) -> dict[str, Any]:
    async with state.db.write() as session:
        run = await t.create_run(session, who, body.experiment_id, name=body.run_name,
                                 start_time=body.start_time, tags=_tags(body.tags),
                                 user_id=body.user_id, now=state.clock())
        return {"run": _run_dicts(await t.run_data(session, [run]))[0]}


@router.post("/runs/update")
async def update_run(body: m.UpdateRun, state: State, who: Writer) -> dict[str, Any]:
    run_id = _run_id(m.RunRef(run_id=body.run_id, run_uuid=body.run_uuid))
    async with state.db.write() as session:
        run = await t.update_run(session, who, run_id, status=body.status,
                                 end_time=body.end_time, name=body.run_name, now=state.clock())
        return {"run_info": run_info(run)}


@router.get("/runs/get")
async def get_run(state: State, who: Writer, run_id: Annotated[str | None, Query(
        max_length=64)] = None, run_uuid: Annotated[str | None, Query(
        max_length=64)] = None) -> dict[str, Any]:
    async with state.db.write() as session:
        run = await t.job_run(session, who, _run_id(m.RunRef(run_id=run_id, run_uuid=run_uuid)),
                              state.clock())
        return {"run": _run_dicts(await t.run_data(session, [run]))[0]}


@router.post("/runs/search")
async def search_runs(body: m.SearchRuns, state: State, who: Writer) -> dict[str, Any]:
    offset = _offset(body.page_token)
    async with state.db.read() as session:
        runs, more = await ts.search_runs(session, who.scope, body.experiment_ids, body.filter,
                                          body.order_by, limit=body.max_results, offset=offset,
                                          view=body.run_view_type)
        found = _run_dicts(await t.run_data(session, runs))
    return {"runs": found} | ({"next_page_token": str(offset + len(found))} if more else {})


@router.post("/runs/delete")
async def delete_run(body: m.RunRef, state: State, who: Writer) -> dict[str, Any]:
    async with state.db.write() as session:
        await t.set_lifecycle(session, who, _run_id(body), "deleted", state.clock())
    return {}


@router.post("/runs/restore")
async def restore_run(body: m.RunRef, state: State, who: Writer) -> dict[str, Any]:
    async with state.db.write() as session:
        await t.set_lifecycle(session, who, _run_id(body), "active", state.clock())
    return {}


@router.post("/runs/log-batch")
async def log_batch(body: m.LogBatch, state: State, who: Writer) -> dict[str, Any]:
    params = {p.key: p.value for p in body.params}
    if len(params) != len(body.params):
        raise InvalidInput("a batch names a param twice; params are written once")
    async with state.db.write() as session:
        await tl.log_batch(session, who, _run_id(body), metrics=body.metrics, params=params,
                           tags=_tags(body.tags), now=state.clock())
    return {}


@router.post("/runs/log-metric")
async def log_metric(body: m.LogMetric, state: State, who: Writer) -> dict[str, Any]:
    point = tl.Point(body.key, body.value, body.timestamp or t.ms(state.clock()), body.step)
    async with state.db.write() as session:
        await tl.log_batch(session, who, _run_id(body), metrics=[point], params={}, tags={},
                           now=state.clock())
    return {}


@router.post("/runs/log-parameter")
async def log_param(body: m.LogParam, state: State, who: Writer) -> dict[str, Any]:
    async with state.db.write() as session:
        await tl.log_batch(session, who, _run_id(body), metrics=[],
                           params={body.key: body.value}, tags={}, now=state.clock())
    return {}


@router.post("/runs/set-tag")
async def set_tag(body: m.SetTag, state: State, who: Writer) -> dict[str, Any]:
    async with state.db.write() as session:
        await tl.log_batch(session, who, _run_id(body), metrics=[], params={},
                           tags={body.key: body.value}, now=state.clock())
    return {}


@router.post("/runs/delete-tag")
async def delete_tag(body: m.DeleteTag, state: State, who: Writer) -> dict[str, Any]:
    async with state.db.write() as session:
        await t.delete_tag(session, who, _run_id(body), body.key, state.clock())
    return {}


@router.get("/metrics/get-history")
async def metric_history(state: State, who: Writer, *, metric_key: Annotated[str, Query(
        max_length=250)], run_id: Annotated[str | None, Query(max_length=64)] = None,
        run_uuid: Annotated[str | None, Query(max_length=64)] = None,
        max_results: Annotated[int, Query(ge=1, le=25_000)] = 25_000,
        page_token: Annotated[str | None, Query(max_length=80)] = None) -> dict[str, Any]:
    after = _after(page_token)
    async with state.db.write() as session:
        run = await t.job_run(session, who, _run_id(m.RunRef(run_id=run_id, run_uuid=run_uuid)),
                              state.clock())
        rows = await tl.history(session, run.id, metric_key, after=after,
                                limit=max_results + 1)
    page = rows[:max_results]
    body: dict[str, Any] = {"metrics": [tl.metric_dict(r.key, r.value, r.timestamp, r.step)
                                        for r in page]}
    if len(rows) > max_results:
        last = page[-1]
        body["next_page_token"] = f"{last.step}:{last.timestamp}:{last.seq}"
    return body


def _offset(token: str | None) -> int:
    if not token:
        return 0
    if not (token.isascii() and token.isdigit() and len(token) <= 18):
        raise InvalidInput(f"invalid page_token {token[:20]!r}",
                           hint="pass the next_page_token of the previous page")
    return int(token)


def _after(token: str | None) -> tuple[int, int, int] | None:
    if not token:
        return None
    parts = token.split(":")
    if len(parts) != 3 or not all(p.lstrip("-").isdigit() for p in parts):
        raise InvalidInput(f"invalid page_token {token[:20]!r}",
                           hint="pass the next_page_token of the previous page")
    return int(parts[0]), int(parts[1]), int(parts[2])


def run_info(run: Any) -> dict[str, Any]:
    info = {"run_id": run.id, "run_uuid": run.id, "experiment_id": run.experiment_id,
            "run_name": run.name, "user_id": run.user_id, "status": run.status,
            "start_time": run.start_time, "lifecycle_stage": run.lifecycle_stage,
            "artifact_uri": f"mlflow-artifacts:/{run.experiment_id}/{run.id}/artifacts"}
    return info | ({"end_time": run.end_time} if run.end_time is not None else {})


def _run_dicts(found: list[t.RunData]) -> list[dict[str, Any]]:
    return [{"info": run_info(d.run), "data": {
        "metrics": [tl.metric_dict(x.key, x.value, x.timestamp, x.step) for x in d.latest],
        "params": [{"key": k, "value": v} for k, v in d.params.items()],
        "tags": [{"key": k, "value": v} for k, v in d.tags.items()]},
        "inputs": {}} for d in found]
