"""Launched nodes in the database: a launch's rows from request to termination.

A launch is written in three steps so that a coordinator killed at any point leaves nothing
the reconciler cannot find: (1) ``request`` commits the launch row (with its idempotency
token), the node row (``launching``) and a single-use enrolment token bound to that node,
before the cloud is called; (2) ``launched`` records the instance; (3) the agent enrols with
the bound token into that node (``tokens.enroll_node``), says hello, and is verified against
what the offer promised (its declared GPUs). Ending: ``mark_terminating`` takes the node out
of placement and revokes its credential before the cloud's terminate call; ``terminated``
records the call's success.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.clouds.base import Instance
from bourse.core.launch import LaunchBlock
from bourse.core.match import Match
from bourse.core.offer import Offer
from bourse.core.states import LAUNCH_IN_FLIGHT, LAUNCH_LIVE, JobState, LaunchState, NodeState
from bourse.server.db.schema import Job, Launch, LaunchBlockRow, Node, Setting, Token
from bourse.server.ids import new_id
from bourse.server.services import reliability
from bourse.server.services.liveness import lose_attempts
from bourse.server.services.tokens import create_token

EXCHANGE_ID = "exchange_id"


async def exchange_id(session: AsyncSession) -> str:
    """The exchange's id (made at first use): every instance it launches is tagged with it."""
    row = await session.get(Setting, EXCHANGE_ID)
    if row is None:
        row = Setting(key=EXCHANGE_ID, value=new_id("x"))
        session.add(row)
        await session.flush()
    return row.value


def offer_json(offer: Offer) -> dict[str, Any]:
    """What a launch row keeps of its offer (to block it, verify it, and show it)."""
    return {"id": offer.id, "provider": offer.provider, "instance_type": offer.instance_type,
            "region": offer.region, "zone": offer.zone, "gpu": offer.gpu,
            "gpu_count": offer.gpu_count, "cpus": offer.cpus, "memory_gib": offer.memory_gib,
            "price": offer.price, "spot_price": offer.spot_price}


def offer_of(launch: Launch) -> Offer:
    o = launch.offer
    return Offer(id=o["id"], provider=o["provider"], instance_type=o["instance_type"],
                 region=o["region"], zone=o.get("zone"), gpu=o.get("gpu"),
                 gpu_count=int(o.get("gpu_count") or 0), gpu_memory_mib=None,
                 cpus=o.get("cpus"), memory_gib=o.get("memory_gib"), price=o.get("price"),
                 spot_price=o.get("spot_price"))


def declared_gpus(offer: Offer) -> str | None:
    """The node's declaration, checked by verification against what its probe measures."""
    return f"{offer.gpu}:{offer.gpu_count}" if offer.gpu and offer.gpu_count else None


@dataclass(frozen=True)
class Requested:
    launch: Launch
    node: Node
    enrol_secret: str


async def request(session: AsyncSession, job: Job, place: Match, now: float, *,
                  boot_timeout_s: float, gang: str | None = None) -> Requested:
    """Step (1): the rows of a launch, before the cloud is called. ``gang``: the id a gang's
    members share (``launcher.gangs``)."""
    offer, spot, price = place.offer, place.spot, place.price
    launch_id, node_id = new_id("l"), new_id("n")
    name = f"{offer.provider}-{offer.instance_type}-{node_id[2:8]}"
    declared = declared_gpus(offer)
    node = Node(id=node_id, name=name, state=NodeState.LAUNCHING, capabilities=None,
                keep_alive_s=0.0, last_seen=None, session=None, price=price, created_at=now,
                updated_at=now, project_id=job.project_id, tags=[], launch_id=launch_id,
                declared={"gpus": declared} if declared else None)
    launch = Launch(id=launch_id, node_id=node_id, job_id=job.id, project_id=job.project_id,
                    provider=offer.provider, region=offer.region, zone=offer.zone,
                    instance_type=offer.instance_type, spot=spot, price=price,
                    on_demand=offer.price, offer=offer_json(offer),
                    client_token=new_id("ct"), state=LaunchState.REQUESTED,
                    requested_at=now, gang=gang)
    session.add_all([node, launch])
    secret = await create_token(session, "enroll", now, name=name, node_id=node_id,
                                expires_at=now + boot_timeout_s, project_id=job.project_id)
    return Requested(launch, node, secret)


async def launched(session: AsyncSession, launch_id: str, instance: Instance,
                   now: float) -> Launch | None:
    """Step (2): the cloud made the instance. None when the launch was ended meanwhile (the
    caller terminates the instance)."""
    launch = await session.get(Launch, launch_id, with_for_update=True)
    if launch is None or launch.state != LaunchState.REQUESTED:
        return None
    launch.instance_id, launch.launched_at = instance.id, now
    launch.state = LaunchState.BOOTING
    launch.zone = instance.zone or launch.zone
    await session.execute(update(Node).where(Node.id == launch.node_id,
                                             Node.state == NodeState.LAUNCHING)
                          .values(state=NodeState.BOOTING, updated_at=now))
    return launch


async def failed(session: AsyncSession, launch_id: str, reason: str, now: float) -> None:
    """The cloud made no instance: the launch fails, its node row and token go."""
    launch = await session.get(Launch, launch_id, with_for_update=True)
    if launch is None:
        return
    launch.state, launch.reason, launch.terminated_at = LaunchState.FAILED, reason, now
    await session.execute(delete(Token).where(Token.node_id == launch.node_id))
    await session.execute(delete(Node).where(Node.id == launch.node_id))


async def mark_terminating(session: AsyncSession, launch: Launch, reason: str,
                           now: float) -> None:
    """Take the node out of placement and revoke its credentials; the cloud call follows. An
    attempt still on it is lost now (a terminated node is not watched for silence, and its
    agent can no longer report): its job is retried, PREEMPTED if it had notice."""
    launch.state, launch.reason = LaunchState.TERMINATING, reason
    launch.idle_since = None
    node = await session.get(Node, launch.node_id)
    if node is not None and node.state != NodeState.TERMINATED:
        await lose_attempts(session, node, now, f"its instance was terminated: {reason}")
    await session.execute(update(Node).where(Node.id == launch.node_id).values(
        state=NodeState.TERMINATED, session=None, updated_at=now,
        **reliability.closed_values(now)))
    await session.execute(update(Token).where(Token.node_id == launch.node_id,
                                              Token.revoked_at.is_(None))
                          .values(revoked_at=now))


async def terminated(session: AsyncSession, launch_ids: Sequence[str], now: float) -> None:
    """The cloud terminated them (or they were never made)."""
    if not launch_ids:
        return
    await session.execute(update(Launch).where(Launch.id.in_(launch_ids)).values(
        state=LaunchState.TERMINATED, terminated_at=func.coalesce(Launch.terminated_at, now)))


async def on_enrolled(session: AsyncSession, node: Node, now: float) -> None:
    """The launched node's agent said hello."""
    if node.launch_id is None:
        return
    await session.execute(update(Launch).where(
        Launch.id == node.launch_id, Launch.enrolled_at.is_(None)).values(enrolled_at=now))


# --- reads -------------------------------------------------------------------------------------

async def live(session: AsyncSession) -> list[Launch]:
    """Launches that may have an instance, oldest first."""
    return list((await session.scalars(select(Launch).where(
        Launch.state.in_(LAUNCH_LIVE)).order_by(Launch.requested_at).with_for_update())).all())


async def gang_members(session: AsyncSession, gangs: Collection[str]) -> list[Launch]:
    """Every launch of these gangs, whatever its state."""
    if not gangs:
        return []
    return list((await session.scalars(select(Launch).where(
        Launch.gang.in_(list(gangs))).order_by(Launch.requested_at, Launch.id))).all())


async def any_gang(session: AsyncSession, provider: str) -> bool:
    """Whether the exchange ever launched a gang on ``provider``."""
    return await session.scalar(select(Launch.id).where(
        Launch.provider == provider, Launch.gang.is_not(None)).limit(1)) is not None


async def live_gangs(session: AsyncSession, gangs: Collection[str]) -> set[str]:
    """Those of these gangs that have a live launch."""
    if not gangs:
        return set()
    rows = await session.scalars(select(Launch.gang).where(
        Launch.gang.in_(list(gangs)), Launch.state.in_(LAUNCH_LIVE)))
    return {r for r in rows.all() if r}


# the jobs a launch is under way for
_IN_FLIGHT = select(Launch.job_id).where(Launch.state.in_(LAUNCH_IN_FLIGHT),
                                         Launch.job_id.is_not(None))


async def in_flight_jobs(session: AsyncSession) -> set[str]:
    return {r for r in (await session.scalars(_IN_FLIGHT)).all() if r}


def in_flight_job_ids() -> Any:
    """The same as a subquery (a job a launch is under way for: its reason is the
    launcher's)."""
    return _IN_FLIGHT.scalar_subquery()


async def waiting_jobs(session: AsyncSession, now: float, limit: int) -> list[Job]:
    """Due pending jobs that no launch is under way for, oldest first."""
    busy = await in_flight_jobs(session)
    rows = await session.scalars(select(Job).where(
        Job.state == JobState.PENDING.value,
        (Job.not_before.is_(None)) | (Job.not_before <= now))
        .order_by(Job.created_at, Job.id).limit(limit + len(busy)))
    return [job for job in rows.all() if job.id not in busy][:limit]


async def blocks(session: AsyncSession, now: float) -> list[LaunchBlock]:
    rows = await session.scalars(select(LaunchBlockRow).where(LaunchBlockRow.until > now))
    return [LaunchBlock(r.key, r.until, r.reason) for r in rows.all()]


async def add_blocks(session: AsyncSession, found: Sequence[LaunchBlock], now: float) -> None:
    await session.execute(delete(LaunchBlockRow).where(LaunchBlockRow.until <= now))
    for block in found:
        row = await session.get(LaunchBlockRow, block.key)
        if row is None:
            session.add(LaunchBlockRow(key=block.key, until=block.until, reason=block.reason))
        else:
            row.until, row.reason = max(row.until, block.until), block.reason


def day_start(now: float) -> float:
    """00:00 UTC of ``now``'s day: a project's daily cap counts from there."""
    return datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0,
                                                    microsecond=0).timestamp()


async def project_spend(session: AsyncSession, project_id: str, day_start: float,
                        now: float) -> tuple[float, float]:
    """The project's launched nodes: what the live ones cost per hour, and what all of them
    cost since ``day_start`` (launch to termination, at their price)."""
    rows = (await session.execute(select(
        Launch.price, Launch.requested_at, Launch.launched_at, Launch.terminated_at,
        Launch.state).where(Launch.project_id == project_id,
                            (Launch.terminated_at.is_(None)) | (Launch.terminated_at > day_start),
                            Launch.state != LaunchState.FAILED))).all()
    hourly = sum(r.price for r in rows if r.state in LAUNCH_LIVE)
    spent = 0.0
    for r in rows:
        start = max(day_start, r.launched_at or r.requested_at)
        spent += max(0.0, (r.terminated_at or now) - start) / 3600 * r.price
    return hourly, spent
