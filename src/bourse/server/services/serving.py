"""Services' rows (issue 20): apply a version, list and show, roll back, stop; the changes the
service keeper (``server.serving.keeper``) decides, written with their reasons.

A version is its job and policy by digest: applying the same again changes nothing; another
starts a rollout (a canary at the first step). The first version of a service is stable at
once. Replicas are ordinary jobs (``ServiceReplica`` links them); stopping one is cancelling
its job, and the commands for that are returned, to be sent after the commit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import Conflict, NotFound
from bourse.core.rollout import Rules
from bourse.core.states import JobState
from bourse.core.uri import StoreURI
from bourse.protocol.common import JobSpec, Port
from bourse.protocol.services import ServiceApply, ServiceEventView, ServicePolicy
from bourse.server.access import Scope
from bourse.server.commands import Command
from bourse.server.db.schema import Job, ServiceEvent, ServiceReplica, ServiceRow, ServiceVersion
from bourse.server.ids import new_id
from bourse.server.services.jobs import cancel_row, submit_job
from bourse.server.services.secrets import SecretBox

RUNNING, STOPPED = "running", "stopped"


def digest_of(body: ServiceApply) -> str:
    canonical = json.dumps({"job": body.job.model_dump(mode="json"),
                            "policy": body.policy.model_dump(mode="json")}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def rules_of(policy: ServicePolicy) -> Rules:
    return Rules(steps=tuple(policy.steps), pause_s=policy.pause_s,
                 error_margin=policy.error_margin, p99_margin_ms=policy.p99_margin_ms,
                 min_requests=policy.min_requests, ready_timeout_s=policy.ready_timeout_s)


def add_service_event(session: AsyncSession, service: ServiceRow, now: float, kind: str,
                      message: str, *, version: int | None = None,
                      data: dict[str, Any] | None = None) -> None:
    session.add(ServiceEvent(service_id=service.id, time=now, kind=kind, version=version,
                             message=message, data=data or {}))


async def get_service(session: AsyncSession, name: str, scope: Scope,
                      project_id: str | None = None) -> ServiceRow:
    """The service named ``name`` in ``project_id`` (the caller's project by default); one
    the scope cannot see is as missing as none."""
    query = select(ServiceRow).where(ServiceRow.name == name)
    if project_id is not None:
        query = query.where(ServiceRow.project_id == project_id)
    rows = [r for r in (await session.scalars(scope.filter(query, ServiceRow.project_id)))
            if scope.sees(r.project_id)]
    if len(rows) != 1:
        raise NotFound(f"no service {name!r}" if not rows else
                       f"service {name!r} exists in several projects",
                       hint="`bourse services` lists services")
    return rows[0]


async def list_services(session: AsyncSession, scope: Scope) -> Sequence[ServiceRow]:
    query = scope.filter(select(ServiceRow), ServiceRow.project_id).order_by(ServiceRow.name)
    return (await session.scalars(query)).all()


async def versions_of(session: AsyncSession, service_id: str) -> list[ServiceVersion]:
    return list(await session.scalars(select(ServiceVersion).where(
        ServiceVersion.service_id == service_id).order_by(ServiceVersion.number)))


async def apply_service(session: AsyncSession, body: ServiceApply, project_id: str,
                        now: float) -> tuple[ServiceRow, str, list[Command]]:
    """Create the service, or start a rollout of a changed version; what was done."""
    digest = digest_of(body)
    service = await session.scalar(select(ServiceRow).where(
        ServiceRow.project_id == project_id, ServiceRow.name == body.name))
    if service is None:
        service = ServiceRow(id=new_id("svc"), project_id=project_id, name=body.name,
                             state=RUNNING, created_at=now, updated_at=now)
        session.add(service)
        await session.flush()
        _new_version(session, service, body, number=1, digest=digest, state="stable", now=now)
        service.stable = 1
        add_service_event(session, service, now, "version", "version 1 applied", version=1)
        return service, "created", []
    versions = await versions_of(session, service.id)
    return service, *await _apply_to(session, service, versions, body, digest=digest, now=now)


async def _apply_to(session: AsyncSession, service: ServiceRow,
                    versions: list[ServiceVersion], body: ServiceApply, *, digest: str,
                    now: float) -> tuple[str, list[Command]]:
    live = {service.stable, service.canary} - {None}
    if service.state == RUNNING and any(v.digest == digest for v in versions
                                        if v.number in live):
        return "unchanged", []
    commands: list[Command] = []
    number = versions[-1].number + 1
    if service.state == STOPPED:
        service.state, service.stable, service.canary, service.step = RUNNING, number, None, None
        _new_version(session, service, body, number=number, digest=digest, state="stable",
                     now=now)
        add_service_event(session, service, now, "version", f"version {number} applied",
                          version=number)
        return "restarted", commands
    if service.canary is not None:
        old = next(v for v in versions if v.number == service.canary)
        commands += await _end_version(session, service, old, "retired",
                                       reason=f"superseded by version {number}", now=now)
    _new_version(session, service, body, number=number, digest=digest, state="canary", now=now)
    service.canary, service.step, service.step_since, service.rollout_since = number, 0, now, now
    service.updated_at = now
    add_service_event(session, service, now, "rollout",
                      f"version {number} applied: rollout from version {service.stable} "
                      f"at {body.policy.steps[0]} %", version=number)
    return "rollout", commands


def _new_version(session: AsyncSession, service: ServiceRow, body: ServiceApply, *,
                 number: int, digest: str, state: str, now: float) -> None:
    session.add(ServiceVersion(service_id=service.id, number=number, digest=digest,
                               job=body.job.model_dump(mode="json"),
                               policy=body.policy.model_dump(mode="json"), state=state,
                               created_at=now))


async def live_replicas(session: AsyncSession, service_id: str,
                        version: int | None = None) -> list[tuple[ServiceReplica, Job]]:
    query = select(ServiceReplica, Job).join(Job, Job.id == ServiceReplica.job_id).where(
        ServiceReplica.service_id == service_id, ServiceReplica.ended.is_(False))
    if version is not None:
        query = query.where(ServiceReplica.version == version)
    return [(r, j) for r, j in await session.execute(query)]


async def _end_version(session: AsyncSession, service: ServiceRow, version: ServiceVersion,
                       state: str, *, reason: str, now: float) -> list[Command]:
    version.state, version.reason = state, reason
    commands: list[Command] = []
    for replica, job in await live_replicas(session, service.id, version.number):
        commands += cancel_row(session, job, now, f"service {service.name}: {reason}")
        replica.ended = JobState(job.state).terminal
    return commands


async def roll_back(session: AsyncSession, service: ServiceRow, reason: str,
                    now: float) -> list[Command]:
    """The canary gets no more traffic, its replicas are stopped; the stable version stays."""
    if service.canary is None:
        raise Conflict(f"service {service.name} has no rollout in progress",
                       hint="`bourse serve FILE` with a changed version starts one")
    canary = await session.get(ServiceVersion, (service.id, service.canary))
    assert canary is not None
    commands = await _end_version(session, service, canary, "rolled_back", reason=reason,
                                  now=now)
    add_service_event(session, service, now, "decision", f"rolled back version "
                      f"{canary.number}: {reason}", version=canary.number,
                      data={"verdict": "roll_back"})
    service.canary = service.step = service.step_since = service.rollout_since = None
    service.updated_at = now
    return commands


async def advance(session: AsyncSession, service: ServiceRow, steps: Sequence[int], *,
                  reason: str, now: float, data: dict[str, Any]) -> list[Command]:
    """The canary's next step, or its promotion (the old stable version is stopped)."""
    assert service.canary is not None and service.step is not None
    number = service.canary
    add_service_event(session, service, now, "decision", reason, version=number,
                      data={"verdict": "advance", **data})
    service.updated_at = now
    if service.step + 1 < len(steps):
        service.step, service.step_since = service.step + 1, now
        return []
    canary = await session.get(ServiceVersion, (service.id, number))
    assert canary is not None
    canary.state = "stable"
    commands: list[Command] = []
    if service.stable is not None:
        old = await session.get(ServiceVersion, (service.id, service.stable))
        assert old is not None
        commands = await _end_version(session, service, old, "retired",
                                      reason=f"replaced by version {number}", now=now)
    service.stable, service.canary = number, None
    service.step = service.step_since = service.rollout_since = None
    return commands


async def stop_service(session: AsyncSession, service: ServiceRow, now: float) -> list[Command]:
    if service.state == STOPPED:
        return []
    commands: list[Command] = []
    for version in await versions_of(session, service.id):
        if version.number in (service.stable, service.canary):
            commands += await _end_version(session, service, version, "stopped",
                                           reason="the service was stopped", now=now)
    service.state, service.stable, service.canary, service.step = STOPPED, None, None, None
    service.updated_at = now
    add_service_event(session, service, now, "stopped", "the service was stopped")
    return commands


async def service_events(session: AsyncSession, service_id: str, *, kind: str | None = None,
                         skip: str | None = None, limit: int = 200) -> list[ServiceEvent]:
    query = select(ServiceEvent).where(ServiceEvent.service_id == service_id)
    if kind is not None:
        query = query.where(ServiceEvent.kind == kind)
    if skip is not None:
        query = query.where(ServiceEvent.kind != skip)
    rows = await session.scalars(query.order_by(ServiceEvent.id.desc()).limit(limit))
    return list(reversed(list(rows)))


def event_view(row: ServiceEvent) -> ServiceEventView:
    return ServiceEventView(id=row.id, time=row.time, kind=row.kind, version=row.version,
                            message=row.message, data=row.data or {})


def weights_of(service: ServiceRow, steps: Sequence[int] | None) -> dict[int, int]:
    """Percent of the traffic per version now."""
    if service.state != RUNNING:
        return {}
    split: dict[int, int] = {}
    if service.stable is not None:
        split[service.stable] = 100
    if service.canary is not None and service.step is not None and steps:
        share = steps[service.step]
        split[service.canary] = share
        if service.stable is not None:
            split[service.stable] = 100 - share
    return split


async def add_replicas(session: AsyncSession, service: ServiceRow, number: int, count: int,
                       *, now: float, store: StoreURI | None, box: SecretBox | None) -> None:
    """``count`` more replicas of version ``number``: ordinary jobs, refused as jobs are.
    Each gets a port of its own, the service's port or the next free above it, declared and
    given in ``$PORT``: replicas placed on one node must not collide, whichever service they
    serve — so the port is free among the live replicas of every service. (Anything else on
    a node that holds the port is the agent's to refuse: ``agent.listeners``.)"""
    version = await session.get(ServiceVersion, (service.id, number))
    assert version is not None
    spec = JobSpec.model_validate(version.job)
    base = ServicePolicy.model_validate(version.policy).port
    used = set(await session.scalars(select(ServiceReplica.port).where(
        ServiceReplica.ended.is_(False))))
    for _ in range(count):
        port = next(p for p in range(base, 65536) if p not in used)
        used.add(port)
        mine = spec.model_copy(update={"ports": [Port(number=port)],
                                       "env": {**spec.env, "PORT": str(port)},
                                       "name": spec.name or f"{service.name}-v{number}"})
        job = await submit_job(session, mine, service.project_id, now, store, box=box)
        session.add(ServiceReplica(job_id=job.id, service_id=service.id, version=number,
                                   port=port, created_at=now, ended=False))


def first_count(body: ServiceApply) -> int:
    """Replicas a new version starts with."""
    return max(body.policy.min_replicas, 1)
