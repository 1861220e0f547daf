"""Placement: pending jobs onto live nodes' free capacity, through the market matcher.

A placement is a lease: the attempt must be acknowledged by the node before ``start_deadline``
or it is declared LOST and the job placed again. A node silent for three keep-alive intervals is
lost, and so are its attempts. Pending jobs are claimed with row locks (``SKIP LOCKED`` on
PostgreSQL) so several coordinators can share one database.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, or_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.blocklist import tiers
from bourse.core.compute import Compute
from bourse.core.constraints import container_engines, first_lack
from bourse.core.devices import Device, choose, groups, held, node_devices, take, weight
from bourse.core.match import Match, cross_region, explain, match
from bourse.core.offer import Offer
from bourse.core.states import AttemptState, JobState
from bourse.market.pricing import list_price
from bourse.protocol.common import Capabilities, ProbeReport
from bourse.server.access import Scope
from bourse.server.commands import Command
from bourse.server.db.schema import Attempt, Job, Node
from bourse.server.services import claims
from bourse.server.services.agents import start_command
from bourse.server.services.jobs import active_attempt_states
from bourse.server.services.lifecycle import add_event, end_attempt, set_job_state
from bourse.server.services.specs import spec_of
from bourse.server.services.verification import PLACEABLE

LOST_AFTER_KEEP_ALIVES = 3
SPOT_SHARE = 0.35  # an interruptible node without a spot price: this share of its list price


@dataclass(frozen=True)
class NodeInfo:
    """The few facts of a node placement needs (not the ORM row, with its large reports)."""

    id: str
    name: str
    price: float | None
    verified_at: float | None
    project_id: str = "default"  # its provider's project
    tags: frozenset[str] = frozenset()  # compliance tags an admin gave it


@dataclass
class Free:
    """What is left on a node during one placement pass."""

    node: NodeInfo
    caps: Capabilities
    cpus: float
    memory_gib: float
    devices: list[Device] = field(default_factory=list)  # its free GPUs (or MIG slices)

    @property
    def gpus(self) -> int:
        return len(self.devices)

    def take(self, need: dict[str, Any]) -> None:
        self.cpus -= need["cpus"]
        self.memory_gib -= need["memory_gib"]
        self.devices = take(self.devices, *held(need))


@dataclass
class PlacementReport:
    placed: int = 0
    unplaced: int = 0
    lost_nodes: list[str] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)


def needs(compute: Compute) -> dict[str, Any]:
    """What an attempt reserves on a node: the CPUs it asks for (a fraction is fine), one when
    it does not say; placement adds the devices it is given (``gpu_uuids``)."""
    return {"cpus": compute.cpus.min if compute.cpus.min > 0 else 1.0,
            "memory_gib": compute.memory.min,
            "gpus": float(compute.gpu.count if compute.gpu else 0)}


LOCAL_REGION = "local"  # a node that does not say where it is


def node_offers(free: Free) -> list[Offer]:
    """A node's free capacity as offers: one per kind of free device (a model, a MIG slice
    profile), or one without GPUs when none is free. The first keeps the node's id."""
    if free.cpus <= 0:
        return []
    kinds = [g for g in groups(free.devices) if g[0].model is not None]
    if not kinds:
        return [_offer(free, free.node.id, [])]
    total = sum(weight(g) for g in kinds)
    return [_offer(free, free.node.id if i == 0 else f"{free.node.id}.{i}", g,
                   share=weight(g) / total if len(kinds) > 1 else 1.0)
            for i, g in enumerate(kinds)]


def _offer(free: Free, offer_id: str, devices: list[Device], share: float = 1.0) -> Offer:
    caps, node = free.caps, free.node
    first = devices[0] if devices else None
    price: float | None = on_demand_price(free)
    spot_price = None
    if caps.interruptible:  # sold only as spot: it can be reclaimed at any time
        spot_price = caps.spot_price or round(on_demand_price(free) * SPOT_SHARE, 4)
        price = None
    verified = datetime.fromtimestamp(node.verified_at, UTC) if node.verified_at else None
    return Offer(id=offer_id, provider=caps.provider or "node", instance_type=node.name,
                 region=caps.region or LOCAL_REGION,
                 gpu=first.model if first else None, gpu_count=len(devices),
                 gpu_memory_mib=min((d.memory_mib for d in devices if d.memory_mib),
                                    default=None),
                 cpus=free.cpus, memory_gib=free.memory_gib,
                 disk_gib=caps.disk_free_gib, driver=caps.driver, price=price,
                 spot_price=spot_price, node_id=node.id, available=1, divisible=True,
                 source="node", verified_at=verified, engines=frozenset(caps.engines),
                 tags=node.tags, gpu_slice=first.slice if first else None,
                 gpu_price_share=share)


def on_demand_price(free: Free) -> float:
    """The node's on-demand price: the provider's, else the list price of its hardware."""
    caps = free.caps
    gpu = next((g.model for g in caps.gpus if g.model), None)
    return free.node.price or list_price(caps.cpus, gpu, len(caps.gpus))


def public_offer(offer: Offer, project_id: str, scope: Scope) -> Offer:
    """The offer as the scope may see it: another project's node under an opaque id."""
    if scope.sees(project_id):
        return offer
    opaque = "o-" + hashlib.sha256(f"offer:{offer.id}".encode()).hexdigest()[:12]
    return replace(offer, id=opaque, instance_type="node", node_id=None)


def _live_nodes(allow_unverified: bool) -> Select[Any]:
    query = select(Node.id, Node.name, Node.price, Node.verified_at, Node.capabilities,
                   Node.project_id, Node.tags).where(
        Node.state == "online", Node.session.is_not(None), Node.capabilities.is_not(None))
    if not allow_unverified:
        query = query.where(Node.verification_status.in_(PLACEABLE))
    return query.order_by(Node.id)


# built once (every placement pass runs them; building one costs more than running it)
_LIVE_NODES = {allow: _live_nodes(allow) for allow in (False, True)}
_HELD = select(Attempt.node_id, Attempt.resources).where(
    Attempt.node_id.in_(bindparam("nodes", expanding=True)),
    Attempt.state.in_(active_attempt_states()))


async def live_capacity(session: AsyncSession, allow_unverified: bool = False) -> list[Free]:
    """Connected, verified nodes and what their active attempts leave free."""
    rows = (await session.execute(_LIVE_NODES[allow_unverified])).all()
    frees = {}
    for node_id, name, price, verified_at, capabilities, project_id, tags in rows:
        caps = await measured(session, node_id, verified_at, capabilities)
        info = NodeInfo(node_id, name, price, verified_at, project_id, frozenset(tags or ()))
        frees[node_id] = Free(info, caps, float(caps.cpus), caps.memory_gib,
                              node_devices(caps.gpus))
    held = await session.execute(_HELD, {"nodes": list(frees)})
    for node_id, resources in held.all():  # columns, not entities: many attempts may run
        frees[node_id].take(resources)
    return list(frees.values())


_MEASURED: dict[tuple[str, float | None, str], Capabilities] = {}


async def measured(session: AsyncSession, node_id: str, verified_at: float | None,
                   capabilities: dict[str, Any]) -> Capabilities:
    """What a node offers: its GPUs and driver as its verified probe report measured them —
    never as its hello claims — and the cpus and memory it offers, capped by those measured.
    Worked out once per report and hello (the report is read only then)."""
    key = (node_id, verified_at, repr(capabilities))
    if key not in _MEASURED:
        report = await session.scalar(select(Node.report).where(Node.id == node_id))
        if len(_MEASURED) > 10_000:
            _MEASURED.clear()
        _MEASURED[key] = offered(Capabilities.model_validate(capabilities),
                                 ProbeReport.model_validate(report) if report else None)
    return _MEASURED[key]


def offered(caps: Capabilities, report: ProbeReport | None) -> Capabilities:
    if report is None:
        return caps
    host = report.host
    return caps.model_copy(update={
        "gpus": report.gpus, "driver": report.driver,
        "engines": container_engines(t.name for t in report.host.tools),
        "cpus": min(caps.cpus, host.cpu_logical_cores or caps.cpus),
        "memory_gib": min(caps.memory_gib, host.memory_mib / 1024 or caps.memory_gib)})


async def place_pending(session: AsyncSession, now: float, lease_s: float, *,
                        batch: int = 200, allow_unverified: bool = False,
                        data_region: str | None = None, full: bool = True) -> PlacementReport:
    """Place pending jobs, oldest first, while any node has room.

    Jobs are read a page at a time and the pass stops as soon as no node has room, so that
    the many passes short jobs cause (one per freed slot) stay cheap with a long queue. Only a
    ``full`` pass (the periodic tick) tells the rest of the queue why it waits, since that
    touches every pending job. ``data_region`` is the region of the exchange's store: jobs
    with inputs prefer nodes there over others of equal price.
    """
    report = PlacementReport()
    frees = await live_capacity(session, allow_unverified)
    offers = _offers(frees)
    if not offers:
        if full:
            report.unplaced = await _no_room(session, _CAPACITY_REASONS[0 if not frees else 1])
        return report
    by_id = {f.node.id: f for f in frees}
    cursor: tuple[float, str] | None = None
    size = first_page(offers)
    while offers and report.placed + report.unplaced < batch:
        jobs = await _pending_page(session, cursor, now, size)
        size = PAGE
        if not jobs:
            break
        for job in jobs:
            compute = compute_of(job)
            near = data_region if job.spec.get("inputs") else None
            chosen = (_choose(compute, offers, _blocklist(job), now, near)
                      if offers else None)
            if chosen is None:
                report.unplaced += 1
                _explain_pending(job, compute, offers, frees)
                continue
            # looked up only for a job about to get credentials, not at every pass it waits
            if job.spec.get("inputs") and await _inputs_taken(session, job, now):
                continue
            report.commands.append(_place(session, job, compute, chosen, frees=by_id,
                                          now=now, lease_s=lease_s, data_region=near,
                                          skipped=skipped_for_environment(compute, offers)))
            report.placed += 1
            offers = _offers(frees)
        cursor = (jobs[-1].created_at, jobs[-1].id)
    if not offers and full:  # the rest of the queue waits for room: one statement says so
        report.unplaced += await _no_room(session, _CAPACITY_REASONS[1])
    return report


PAGE = 16


def first_page(offers: Sequence[Offer]) -> int:
    """How many pending jobs a pass reads first: no more than the free CPUs can take (a job
    reserves one unless it asks for a fraction), so that the pass a freed slot causes loads
    one or two jobs, not a whole page; later pages are full."""
    cpus = {o.node_id or i: o.cpus or 0.0 for i, o in enumerate(offers)}  # a node's offers
    # share its CPUs
    return min(PAGE, max(1, math.ceil(sum(cpus.values()) - 1e-9)))


def _offers(frees: list[Free]) -> list[Offer]:
    return [o for f in frees for o in node_offers(f)]


def _pending(after_cursor: bool) -> Select[Job]:
    query = select(Job).where(Job.state == JobState.PENDING.value,
                              or_(Job.not_before.is_(None), Job.not_before <= bindparam("now")))
    if after_cursor:
        query = query.where(tuple_(Job.created_at, Job.id)
                            > tuple_(bindparam("created_at"), bindparam("id")))
    return (query.order_by(Job.created_at, Job.id).limit(bindparam("size"))
            .with_for_update(skip_locked=True))


_PENDING = {after: _pending(after) for after in (False, True)}  # built once, as _HELD


async def _pending_page(session: AsyncSession, cursor: tuple[float, str] | None,
                        now: float, size: int = PAGE) -> list[Job]:
    params: dict[str, Any] = {"now": now, "size": size}
    if cursor is not None:
        params |= {"created_at": cursor[0], "id": cursor[1]}
    page = await session.scalars(_PENDING[cursor is not None], params)
    return list(page.all())


async def _no_room(session: AsyncSession, reason: str) -> int:
    """No node has room: say so to pending jobs that had no reason or an outdated capacity
    reason, in one statement (a matcher's explanation is kept: it is still true). Returns how
    many jobs were told."""
    result = await session.execute(update(Job).where(
        Job.state == JobState.PENDING.value,
        or_(Job.pending_reason.is_(None),
            and_(Job.pending_reason.in_(_CAPACITY_REASONS), Job.pending_reason != reason)),
    ).values(pending_reason=reason))
    return int(getattr(result, "rowcount", 0) or 0)


async def _inputs_taken(session: AsyncSession, job: Job, now: float) -> bool:
    """Fail a job whose inputs another project has claimed since it was submitted: the
    attempt would get credentials for that project's data (``services.claims``)."""
    reason = await claims.taken_input(session, spec_of(job), job.project_id)
    if reason is None:
        return False
    job.reason = reason
    set_job_state(session, job, JobState.FAILED, now, reason)
    return True


def compute_of(job: Job) -> Compute:
    return spec_of(job).compute


def _blocklist(job: Job) -> list[dict[str, Any]]:
    """The job's blocklist; nodes that lost it before blocklists existed never expire."""
    legacy = [{"kind": "node", "value": node, "until": float("inf")}
              for node in job.avoid_nodes if not job.blocklist]
    return [*(job.blocklist or []), *legacy]


def _choose(compute: Compute, offers: Sequence[Offer], blocklist: list[dict[str, Any]],
            now: float, data_region: str | None = None) -> Match | None:
    """The best offer with room for the reservation, clear of the job's blocklist — its node,
    then its provider and region — unless nothing else fits (``core.blocklist``); near the
    data when prices tie."""
    cpus = needs(compute)["cpus"]
    offers = [o for o in offers if (o.cpus or 0) >= cpus - 1e-9]
    for tier in tiers(offers, blocklist, now):
        found = match(compute, tier, limit=1, data_region=data_region)
        if found:
            return found[0]
    return None


_CAPACITY_REASONS = ("no verified node is connected", "every connected node is busy")


def _explain_pending(job: Job, compute: Compute, offers: list[Offer],
                     frees: list[Free]) -> None:
    """Say why a job waits. The matcher's explanation is worked out once, not every tick."""
    if not frees:
        reason = _CAPACITY_REASONS[0]
    elif not offers:
        reason = _CAPACITY_REASONS[1]
    elif job.pending_reason is None or job.pending_reason in _CAPACITY_REASONS:
        lines = explain(compute, offers, nearest=3).lines()
        reason = "; ".join(line.strip() for line in lines[1:])
    else:
        return
    if job.pending_reason != reason:
        job.pending_reason = reason


ENVIRONMENT_CONSTRAINTS = frozenset({"environment", "image"})


def skipped_for_environment(compute: Compute, offers: Sequence[Offer],
                            most: int = 3) -> list[str]:
    """Nodes that could not run the job's torch/CUDA build or image, with why (only for jobs
    that name one: the common job pays nothing)."""
    if compute.torch is None and compute.cuda is None and compute.image is None:
        return []
    found = []
    for offer in offers:
        lack = first_lack(compute, offer)
        if lack is not None and lack[0] in ENVIRONMENT_CONSTRAINTS:
            found.append(f"{offer.instance_type}: {lack[1]}")
    return found[:most]


def assigned(compute: Compute, offer: Offer, free: Free) -> dict[str, Any]:
    """The devices an attempt placed on ``offer`` gets: ``count`` free ones of the offer's
    kind (the matcher saw that many free, so they are there)."""
    if compute.gpu is None:
        return {}
    kind = (offer.gpu, offer.gpu_slice)
    chosen = choose(free.devices, kind, compute.gpu.count)
    if chosen is None:  # the offer and the free devices disagree: a bug, never a guess
        raise AssertionError(f"offer {offer.id} has no {compute.gpu.count} free devices "
                             f"of kind {kind}")
    return {"gpu_uuids": [d.address for d in chosen]}


def _place(session: AsyncSession, job: Job, compute: Compute, chosen: Match, *,
           frees: dict[str, Free], now: float, lease_s: float,
           data_region: str | None = None, skipped: Sequence[str] = ()) -> Command:
    node_id = chosen.offer.node_id or chosen.offer.id
    need = needs(compute) | assigned(compute, chosen.offer, frees[node_id])
    frees[node_id].take(need)
    job.attempt += 1
    job.node_id, job.pending_reason = node_id, None
    kind = "spot" if chosen.spot else "on-demand"
    placement = (f"{frees[node_id].node.name}: cheapest fit at ${chosen.price:.4f}/h "
                 f"({kind}) for {compute.describe()}")
    if cross_region(chosen.offer, data_region):
        placement += (f"; cross-region: the data is in {data_region}, the node in "
                      f"{chosen.offer.region}")
    if skipped:
        placement += f" (skipped {'; '.join(skipped)})"
    attempt = Attempt(job_id=job.id, number=job.attempt, node_id=node_id,
                      state=AttemptState.SCHEDULED.value, placed_at=now,
                      start_deadline=now + lease_s, placement=placement, resources=need,
                      price=chosen.price, list_price=on_demand_price(frees[node_id]),
                      spot=chosen.spot, provider=chosen.offer.provider,
                      region=chosen.offer.region)
    session.add(attempt)
    set_job_state(session, job, JobState.SCHEDULED, now, f"placed on {placement}")
    return start_command(job, attempt)


async def expire_start_leases(session: AsyncSession, now: float) -> int:
    """Attempts whose node never acknowledged the start: LOST, and their jobs re-placed."""
    expired = (await session.scalars(select(Attempt).where(
        Attempt.state == AttemptState.SCHEDULED.value, Attempt.start_deadline < now))).all()
    for attempt in expired:
        job = await session.get(Job, attempt.job_id, with_for_update=True)
        assert job is not None
        end_attempt(session, job, attempt, AttemptState.LOST, now=now,
                    reason="the node did not acknowledge the start in time")
    return len(expired)


async def grace_after_start(session: AsyncSession, now: float, lease_s: float) -> None:
    """A coordinator that was down heard nobody: restart every node's silence clock and every
    placement lease at its start, so its own downtime is never taken for node silence."""
    await session.execute(update(Node).where(Node.state != "lost").values(last_seen=now))
    await session.execute(update(Node).values(session=None))  # no connection survives it
    await session.execute(update(Attempt).where(
        Attempt.state == AttemptState.SCHEDULED.value, Attempt.start_deadline < now + lease_s,
    ).values(start_deadline=now + lease_s))


async def detect_lost_nodes(session: AsyncSession, now: float) -> list[str]:
    """Nodes silent for three keep-alive intervals are lost, with their attempts."""
    nodes = (await session.scalars(select(Node).where(Node.state != "lost"))).all()
    lost = []
    for node in nodes:
        silent = now - (node.last_seen or node.created_at)
        if silent <= LOST_AFTER_KEEP_ALIVES * node.keep_alive_s:
            continue
        node.state, node.session, node.updated_at = "lost", None, now
        lost.append(node.id)
        await _lose_attempts(session, node, now, f"node {node.name} silent for {silent:.0f} s")
    return lost


async def _lose_attempts(session: AsyncSession, node: Node, now: float, reason: str) -> None:
    attempts = (await session.scalars(select(Attempt).where(
        Attempt.node_id == node.id, Attempt.state.in_(active_attempt_states())))).all()
    for attempt in attempts:
        job = await session.get(Job, attempt.job_id, with_for_update=True)
        assert job is not None
        end_attempt(session, job, attempt, AttemptState.LOST, now=now, reason=reason)
        add_event(session, job.id, attempt.number, "node_lost", now, message=reason)
