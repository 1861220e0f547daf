"""``GET /metrics``: the coordinator and its fleet in the Prometheus text format.

Behind an admin token like the rest of the API (a scraper sends it as a bearer token): the
numbers describe every user's jobs. Each scrape reads the database, so replicas agree and a
restart loses nothing; the placement latency histogram is computed over all first attempts.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response
from sqlalchemy import ColumnElement, case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.launch_figures import LaunchFigures
from bourse.core.reliability import Reliability
from bourse.core.states import JobState, NodeState
from bourse.server.access import ALL
from bourse.server.db.schema import Attempt, Job, Node
from bourse.server.errors import responses
from bourse.server.metrics import exposition
from bourse.server.metrics.exposition import Family
from bourse.server.routes.deps import Admin, State
from bourse.server.services.jobs import stalled_in
from bourse.server.services.launch_figures import launch_figures
from bourse.server.services.reliability import (
    ProviderRecord,
    by_provider,
    declared_sla,
    records,
    reliability_of,
)

router = APIRouter(tags=["metrics"])
LATENCY_BOUNDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {exposition.CONTENT_TYPE: {}}},
                       **responses(401, 403)})
async def prometheus_metrics(state: State, _admin: Admin) -> Response:
    async with state.db.read() as session:
        families = await _families(session)
        families += await _reliability(session, state.clock())
        families += _providers(await by_provider(session, ALL, state.clock()))
        families += _launches(await launch_figures(session, state.clock()))
    families.append(Family("bourse_agents_connected",
                           "Agents connected to this coordinator.").add(len(state.hub.connections)))
    return Response(exposition.render(families), media_type=exposition.CONTENT_TYPE)


async def _families(session: AsyncSession) -> list[Family]:
    jobs = await _counts(session, Job.state)
    nodes = await _counts(session, Node.state)
    return [
        exposition.gauge_by("bourse_jobs", "Jobs by state.", "state", jobs,
                            [s.value for s in JobState]),
        Family("bourse_queue_depth", "Jobs waiting to be placed (PENDING).").add(
            jobs.get(JobState.PENDING.value, 0)),
        Family("bourse_jobs_stalled", "Running jobs flagged as stalled.").add(
            await _stalled(session)),
        exposition.gauge_by("bourse_nodes", "Enrolled nodes by state.", "state", nodes,
                            [s.value for s in NodeState]),
        await _latency(session),
    ]


async def _reliability(session: AsyncSession, now: float) -> list[Family]:
    """What the exchange measured of each node it may still place on (core.reliability)."""
    measured = _Measured("node", (
        "Share of the time since a node enrolled that it was connected.",
        "Attempts that ended on a node.", "Attempts lost with a node or preempted on it.",
        "Run time of the attempts that ended on a node, in hours.",
        "Availability times the share of ended attempts not interrupted; for nodes watched an "
        "hour or more.", "The availability a node's provider declared (bourse agent "
        "--declare-sla), beside the measured score."), counters=True)
    for node in await records(session, Node.name, Node.declared):
        measured.add(reliability_of(node, now), declared_sla(node.declared),
                     node=node.id, name=node.name)
    return list(measured.families)


def _providers(found: list[ProviderRecord]) -> list[Family]:
    """Each provider's nodes measured together (``services.reliability.by_provider``)."""
    measured = _Measured("provider", (
        "Share of the time a provider's nodes (those seen in 30 days) were connected since "
        "they enrolled.", "Attempts that ended on a provider's nodes seen in 30 days.",
        "Attempts lost with or preempted on a provider's nodes seen in 30 days.",
        "Run time of the attempts that ended on a provider's nodes, in hours.",
        "A provider's nodes' availability times the share of their ended attempts not "
        "interrupted.", "The availability a provider's nodes declared, when they agree on one."),
        counters=False)
    for p in found:
        measured.add(p.reliability, p.declared, provider=p.provider)
    return list(measured.families)


class _Measured:
    """The families of what was measured of one kind of subject (a node, a provider)."""

    NAMES = ("availability", "attempts_ended", "attempts_interrupted", "work_hours",
             "reliability_score", "declared_sla")
    COUNTS = frozenset({"attempts_ended", "attempts_interrupted", "work_hours"})

    def __init__(self, subject: str, helps: tuple[str, ...], *, counters: bool) -> None:
        """``counters``: the counts only grow (a node's), so they are counters (``_total``);
        a provider's sum over a moving set of nodes may fall, so it is a gauge."""
        self.families = tuple(
            Family(f"bourse_{subject}_{name}_total", text, "counter")
            if counters and name in self.COUNTS else Family(f"bourse_{subject}_{name}", text)
            for name, text in zip(self.NAMES, helps, strict=True))

    def add(self, r: Reliability, declared: float | None, **labels: str) -> None:
        availability, ended, interrupted, work, score, promised = self.families
        availability.add(r.availability, **labels)
        ended.add(r.ended, **labels)
        interrupted.add(r.interrupted, **labels)
        work.add(r.work_h, **labels)
        if r.score is not None:
            score.add(r.score, **labels)
        if declared is not None:
            promised.add(declared, **labels)


def _launches(figures: dict[str, LaunchFigures]) -> list[Family]:
    """How each cloud delivered the machines launched there in 30 days (core.launch_figures):
    only the clouds with a launch that enrolled or failed, or one that enrolled."""
    success = Family("bourse_cloud_launch_success_ratio", "Share of a cloud's launches of the "
                     "last 30 days whose agent enrolled, of those that enrolled or failed.")
    ready = Family("bourse_cloud_launch_ready_seconds", "Seconds from a launch's request to "
                   "its agent's enrolment, over a cloud's enrolled launches of the last 30 days.")
    for cloud, f in figures.items():
        if f.success_rate is not None:
            success.add(f.success_rate, cloud=cloud)
        for quantile, value in (("0.5", f.ready_median_s), ("0.9", f.ready_p90_s)):
            if value is not None:
                ready.add(value, cloud=cloud, quantile=quantile)
    return [success, ready]


async def _counts(session: AsyncSession, column: Any) -> dict[str, int]:
    rows = await session.execute(select(column, func.count()).group_by(column))
    return {str(value): int(count) for value, count in rows.all()}


async def _stalled(session: AsyncSession) -> int:
    rows = (await session.scalars(select(Job).where(
        Job.state == JobState.RUNNING.value, Job.stalled.is_not(None)))).all()
    return sum(1 for job in rows if stalled_in(job) is not None)


async def _latency(session: AsyncSession) -> Family:
    """Seconds from submission to the first placement, over every job placed so far."""
    latency = Attempt.placed_at - Job.created_at
    columns: list[ColumnElement[Any]] = [func.count(), func.coalesce(func.sum(latency), 0.0)]
    columns += [
        func.coalesce(func.sum(case((latency <= bound, 1), else_=0)), 0)
        for bound in LATENCY_BOUNDS]
    row = (await session.execute(select(*columns).select_from(Attempt).join(
        Job, Job.id == Attempt.job_id).where(Attempt.number == 1, Attempt.rank == 0))).one()
    count, total, *cumulative = row
    return exposition.histogram(
        "bourse_placement_latency_seconds", "Seconds from a job's submission to its first "
        "placement.", LATENCY_BOUNDS, [int(c) for c in cumulative], count=int(count),
        total=float(total))
