"""Experiment tracking: experiments and runs (MLflow's data model) of a project.

A job is a tracking run: its run id is the job's id, made the first time a writer or a reader
asks for it, in its app's experiment (the app's file name) or the project's Default one
("0"). Every attempt of the job writes to that one run, so a resumed attempt continues its
step axis. Runs a client makes itself (``runs/create`` with a user token) get ids of their own.

A ``Writer`` says who writes: its project, the scope it reads in, and — for the token a job is
given — the one run it may write (``services.tracking_tokens``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from bourse.server.access import Scope
from bourse.server.db.schema import (
    DEFAULT_PROJECT,
    Job,
    TrackingExperiment,
    TrackingLatest,
    TrackingParam,
    TrackingRun,
    TrackingTag,
)
from bourse.server.ids import new_id

DEFAULT_EXPERIMENT = "0"
DEFAULT_NAME = "Default"
class RunStatus(StrEnum):
    """MLflow's run statuses (not bourse's job states)."""

    RUNNING = "RUNNING"
    SCHEDULED = "SCHEDULED"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


STATUSES = tuple(s.value for s in RunStatus)
RUN_NAME_TAG = "mlflow.runName"


@dataclass(frozen=True)
class Writer:
    project_id: str
    scope: Scope
    run_id: str | None = None  # a job's token: the only run it may write


@dataclass(frozen=True)
class RunData:
    run: TrackingRun
    params: dict[str, str]
    tags: dict[str, str]
    latest: list[TrackingLatest]


def ms(now: float) -> int:
    return int(now * 1000)


async def ensure_default(session: AsyncSession, project_id: str, now: float) -> None:
    if await session.get(TrackingExperiment, (project_id, DEFAULT_EXPERIMENT)) is None:
        session.add(_experiment(project_id, DEFAULT_EXPERIMENT, DEFAULT_NAME, {}, now))
        await session.flush()


def _experiment(project_id: str, experiment_id: str, name: str, tags: Mapping[str, str],
                now: float) -> TrackingExperiment:
    return TrackingExperiment(project_id=project_id, id=experiment_id, name=name,
                              lifecycle_stage="active", tags=dict(tags), created_at=now,
                              updated_at=now)


async def create_experiment(session: AsyncSession, writer: Writer, name: str,
                            tags: Mapping[str, str], now: float) -> TrackingExperiment:
    if not name.strip():
        raise InvalidInput("an experiment needs a name", field="name")
    await ensure_default(session, writer.project_id, now)
    if await _by_name(session, writer.project_id, name) is not None:
        raise Conflict(f"an experiment named {name!r} already exists in this project")
    row = _experiment(writer.project_id, new_id("x"), name, tags, now)
    session.add(row)
    await session.flush()
    return row


async def _by_name(session: AsyncSession, project_id: str,
                   name: str) -> TrackingExperiment | None:
    row: TrackingExperiment | None = await session.scalar(select(TrackingExperiment).where(
        TrackingExperiment.project_id == project_id, TrackingExperiment.name == name))
    return row


async def experiment_by_name(session: AsyncSession, writer: Writer,
                             name: str) -> TrackingExperiment:
    if name == DEFAULT_NAME:
        await ensure_default(session, writer.project_id, 0.0)
    found = await _by_name(session, writer.project_id, name)
    if found is None:
        raise NotFound(f"no experiment named {name!r} in this project")
    return found


async def get_experiment(session: AsyncSession, writer: Writer, experiment_id: str,
                         now: float) -> TrackingExperiment:
    if experiment_id == DEFAULT_EXPERIMENT:
        await ensure_default(session, writer.project_id, now)
    found = await session.get(TrackingExperiment, (writer.project_id, experiment_id))
    if found is None:
        raise NotFound(f"no experiment {experiment_id!r} in this project")
    return found


async def list_experiments(session: AsyncSession, scope: Scope, *, limit: int = 1000,
                           offset: int = 0) -> list[TrackingExperiment]:
    query = scope.filter(select(TrackingExperiment), TrackingExperiment.project_id)
    rows = await session.scalars(query.order_by(TrackingExperiment.created_at,
                                                TrackingExperiment.id)
                                 .offset(offset).limit(limit))
    return list(rows)


async def create_run(session: AsyncSession, writer: Writer, experiment_id: str, *,
                     name: str | None, start_time: int | None, tags: Mapping[str, str],
                     user_id: str, now: float) -> TrackingRun:
    """A new run; for a job's token, the job's own run (so that every MLflow writer in a job,
    the fluent API with MLFLOW_RUN_ID or Lightning's MLFlowLogger, lands on one run)."""
    await get_experiment(session, writer, experiment_id or DEFAULT_EXPERIMENT, now)
    if writer.run_id is not None:
        run = await job_run(session, writer, writer.run_id, now,
                            experiment_id=experiment_id or DEFAULT_EXPERIMENT)
        await set_tags(session, writer, run.id, tags)
        return run
    run_name = name or tags.get(RUN_NAME_TAG) or f"run-{uuid.uuid4().hex[:8]}"
    run = TrackingRun(id=uuid.uuid4().hex, project_id=writer.project_id,
                      experiment_id=experiment_id or DEFAULT_EXPERIMENT, name=run_name,
                      status=RunStatus.RUNNING.value, lifecycle_stage="active", user_id=user_id,
                      start_time=start_time or ms(now), end_time=None, job_id=None)
    session.add(run)
    await session.flush()
    await set_tags(session, writer, run.id, {**tags, RUN_NAME_TAG: run_name})
    return run


async def job_run(session: AsyncSession, writer: Writer, run_id: str, now: float, *,
                  experiment_id: str | None = None) -> TrackingRun:
    """The run ``run_id`` in the writer's scope; a job's run is made when first asked for."""
    run = await session.get(TrackingRun, run_id)
    if run is not None and writer.scope.sees(run.project_id):
        return run
    job = await session.get(Job, run_id)
    if run is not None or job is None or not writer.scope.sees(job.project_id):
        raise NotFound(f"no run {run_id!r} in this project")
    return await _made_for(session, job, experiment_id, now)


async def _made_for(session: AsyncSession, job: Job, experiment_id: str | None,
                    now: float) -> TrackingRun:
    app = job.spec.get("app")
    writer = Writer(job.project_id, Scope(job.project_id))
    if experiment_id is None:
        experiment_id = (await _app_experiment(session, writer, app, now)).id if app \
            else DEFAULT_EXPERIMENT
    await ensure_default(session, job.project_id, now)
    name = job.name or job.id
    run = TrackingRun(id=job.id, project_id=job.project_id, experiment_id=experiment_id,
                      name=name, status=RunStatus.RUNNING.value, lifecycle_stage="active",
                      user_id="",
                      start_time=ms(job.created_at), end_time=None, job_id=job.id)
    session.add(run)
    await session.flush()
    tags = {RUN_NAME_TAG: name, "bourse.job_id": job.id}
    if job.run:
        tags["bourse.app_run"] = job.run
    await _put_tags(session, job.id, tags)
    return run


async def _app_experiment(session: AsyncSession, writer: Writer, app: str,
                          now: float) -> TrackingExperiment:
    found = await _by_name(session, writer.project_id, app)
    return found or await create_experiment(session, writer, app, {}, now)


def may_write(writer: Writer, run: TrackingRun) -> None:
    _check_writable(writer, run.id, "active")


async def writable_run(session: AsyncSession, writer: Writer, run_id: str,
                       now: float) -> TrackingRun:
    run = await job_run(session, writer, run_id, now)
    _check_writable(writer, run.id, run.lifecycle_stage)
    return run


async def writable_run_id(session: AsyncSession, writer: Writer, run_id: str,
                          now: float) -> str:
    """``writable_run``'s checks on a plain row, for the log calls (an ORM object cost more
    than the rest of a small batch); a job's run not made yet is made by ``writable_run``."""
    row = (await (await session.connection()).execute(select(
        TrackingRun.project_id, TrackingRun.lifecycle_stage).where(
        TrackingRun.id == run_id))).first()
    if row is None or not writer.scope.sees(row.project_id):
        return (await writable_run(session, writer, run_id, now)).id
    _check_writable(writer, run_id, row.lifecycle_stage)
    return run_id


def _check_writable(writer: Writer, run_id: str, lifecycle_stage: str) -> None:
    if writer.run_id is not None and run_id != writer.run_id:
        raise Forbidden(f"this job's token writes only its own run ({writer.run_id}), "
                        f"not {run_id}", hint="log from the job's run (MLFLOW_RUN_ID)")
    if lifecycle_stage != "active":
        raise InvalidInput(f"run {run_id!r} is deleted; restore it before logging to it")


async def update_run(session: AsyncSession, writer: Writer, run_id: str, *,
                     status: str | None, end_time: int | None, name: str | None,
                     now: float) -> TrackingRun:
    run = await writable_run(session, writer, run_id, now)
    if status is not None:
        if status not in STATUSES:
            raise InvalidInput(f"unknown run status {status!r}", field="status",
                               hint=f"one of {', '.join(STATUSES)}")
        run.status = status
        live = status in (RunStatus.RUNNING, RunStatus.SCHEDULED)
        run.end_time = None if live else end_time or ms(now)
    if end_time is not None and status is None:
        run.end_time = end_time
    if name:
        run.name = name
        await _put_tags(session, run.id, {RUN_NAME_TAG: name})
    return run


async def set_tags(session: AsyncSession, writer: Writer, run_id: str,
                   tags: Mapping[str, str]) -> None:
    if not tags:
        return
    run = await session.get(TrackingRun, run_id)
    if run is None:
        raise NotFound(f"no run {run_id!r} in this project")
    may_write(writer, run)
    await _put_tags(session, run_id, tags)
    if RUN_NAME_TAG in tags:
        run.name = tags[RUN_NAME_TAG]


async def _put_tags(session: AsyncSession, run_id: str, tags: Mapping[str, str]) -> None:
    found = {t.key: t for t in (await session.scalars(select(TrackingTag).where(
        TrackingTag.run_id == run_id, TrackingTag.key.in_(list(tags))))).all()}
    for key, value in tags.items():
        if key in found:
            found[key].value = value
        else:
            session.add(TrackingTag(run_id=run_id, key=key, value=value))
    await session.flush()


async def delete_tag(session: AsyncSession, writer: Writer, run_id: str, key: str,
                     now: float) -> None:
    run = await writable_run(session, writer, run_id, now)
    tag = await session.get(TrackingTag, (run.id, key))
    if tag is None:
        raise NotFound(f"run {run_id!r} has no tag {key!r}")
    await session.delete(tag)


async def set_lifecycle(session: AsyncSession, writer: Writer, run_id: str, stage: str,
                        now: float) -> None:
    run = await job_run(session, writer, run_id, now)
    may_write(writer, run)
    run.lifecycle_stage = stage


async def run_data(session: AsyncSession, runs: Sequence[TrackingRun]) -> list[RunData]:
    """The runs with their params, tags and latest metrics: three statements in all."""
    ids = [r.id for r in runs]
    params: dict[str, dict[str, str]] = {i: {} for i in ids}
    tags: dict[str, dict[str, str]] = {i: {} for i in ids}
    latest: dict[str, list[TrackingLatest]] = {i: [] for i in ids}
    for p in await session.scalars(select(TrackingParam).where(TrackingParam.run_id.in_(ids))):
        params[p.run_id][p.key] = p.value
    for t in await session.scalars(select(TrackingTag).where(TrackingTag.run_id.in_(ids))):
        tags[t.run_id][t.key] = t.value
    for m in await session.scalars(select(TrackingLatest).where(
            TrackingLatest.run_id.in_(ids))):
        latest[m.run_id].append(m)
    return [RunData(r, params[r.id], tags[r.id], latest[r.id]) for r in runs]


def writer_of(project_id: str | None, scope: Scope, run_id: str | None = None) -> Writer:
    return Writer(project_id or DEFAULT_PROJECT, scope, run_id)


def experiment_dict(row: TrackingExperiment) -> dict[str, Any]:
    return {"experiment_id": row.id, "name": row.name,
            "artifact_location": f"mlflow-artifacts:/{row.id}",
            "lifecycle_stage": row.lifecycle_stage,
            "last_update_time": ms(row.updated_at), "creation_time": ms(row.created_at),
            "tags": [{"key": k, "value": v} for k, v in row.tags.items()]}
