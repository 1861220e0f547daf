"""Nodes as the API shows them."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import NotFound
from bourse.core.reliability import Reliability
from bourse.protocol.api import (
    DrainResult,
    JobView,
    NodeView,
    ProviderReliabilityView,
    ReliabilityView,
)
from bourse.protocol.common import Capabilities, Declared, ProbeReport, VerificationReport
from bourse.server.access import Scope
from bourse.server.db.schema import Attempt, Job, Node
from bourse.server.services.jobs import active_attempt_states
from bourse.server.services.reliability import by_provider, declared_sla, reliability_of


async def list_nodes(session: AsyncSession, scope: Scope, connected: set[str],
                     now: float | None = None) -> list[NodeView]:
    """The nodes of the scope's project (a provider's machines; every node for an admin);
    ``now``: the time their reliability is measured at (the clock's, by default)."""
    nodes = (await session.scalars(scope.filter(
        select(Node).order_by(Node.created_at, Node.id), Node.project_id))).all()
    return await _views(session, nodes, scope, connected, now)


async def node_names(session: AsyncSession, scope: Scope,
                     ids: Iterable[str | None]) -> dict[str, str]:
    """Names of the nodes the scope sees (another project's node has none: show its id)."""
    wanted = {i for i in ids if i}
    if not wanted:
        return {}
    rows = await session.execute(scope.filter(
        select(Node.id, Node.name).where(Node.id.in_(wanted)), Node.project_id))
    return {node_id: name for node_id, name in rows.all()}


async def named(session: AsyncSession, scope: Scope, views: list[JobView]) -> list[JobView]:
    """Jobs with the name of the node each runs on (``node_name``), where the scope sees it."""
    names = await node_names(session, scope, (v.node_id for v in views))
    return [v.model_copy(update={"node_name": names.get(v.node_id or "")}) for v in views]


async def get_node(session: AsyncSession, node_id: str, scope: Scope,
                   connected: set[str], now: float | None = None) -> NodeView:
    node = await session.get(Node, node_id)
    if node is None or not scope.sees(node.project_id):
        raise NotFound(f"no node {node_id!r}", hint="`bourse nodes` lists nodes")
    return (await _views(session, [node], scope, connected, now))[0]


def reliability_view(node: Node, now: float) -> ReliabilityView:
    return measured_view(reliability_of(node, now), declared_sla(node.declared))


async def provider_views(session: AsyncSession, scope: Scope,
                         now: float) -> list[ProviderReliabilityView]:
    """Each provider's nodes measured together (``services.reliability.by_provider``)."""
    return [ProviderReliabilityView(provider=p.provider, nodes=p.nodes,
                                    reliability=measured_view(p.reliability, p.declared))
            for p in await by_provider(session, scope, now)]


def measured_view(r: Reliability, declared: float | None) -> ReliabilityView:
    return ReliabilityView(observed_s=r.observed_s, availability=r.availability,
                           attempts_ended=r.ended, attempts_interrupted=r.interrupted,
                           work_h=r.work_h, interruptions_per_hour=r.interruptions_per_hour,
                           score=r.score, declared=declared,
                           meets_declared=None if declared is None or r.score is None
                           else r.score >= declared)


async def _views(session: AsyncSession, nodes: Sequence[Node], scope: Scope,
                 connected: set[str], now: float | None = None) -> list[NodeView]:
    """Node views; ``running`` lists only the jobs the scope sees (a provider's node runs
    other projects' jobs, and their ids are theirs)."""
    rows = await session.execute(scope.filter(
        select(Attempt.node_id, Attempt.job_id).join(Job, Job.id == Attempt.job_id).where(
            Attempt.node_id.in_([n.id for n in nodes]),
            Attempt.state.in_(active_attempt_states())), Job.project_id))
    running: dict[str, list[str]] = {}
    for node_id, job_id in rows:
        running.setdefault(node_id, []).append(job_id)
    return [NodeView(
        id=n.id, name=n.name, state=n.state,
        capabilities=Capabilities.model_validate(n.capabilities) if n.capabilities else None,
        keep_alive_s=n.keep_alive_s, last_seen=n.last_seen, connected=n.id in connected,
        price=n.price, running=sorted(running.get(n.id, [])), created_at=n.created_at,
        verification_status=n.verification_status,
        verified_at=n.verified_at,
        verification=VerificationReport.model_validate(n.verification) if n.verification
        else None,
        report=ProbeReport.model_validate(n.report) if n.report else None,
        declared=Declared.model_validate(n.declared) if n.declared else None,
        tags=list(n.tags or []), drained_at=n.drained_at,
        reliability=reliability_view(n, time.time() if now is None else now),
    ) for n in nodes]


async def set_tags(session: AsyncSession, node_id: str, tags: list[str], now: float) -> Node:
    """Give a node its compliance tags (an admin vouches for them: a provider cannot)."""
    node = await session.get(Node, node_id, with_for_update=True)
    if node is None:
        raise NotFound(f"no node {node_id!r}", hint="`bourse nodes` lists nodes")
    node.tags, node.updated_at = sorted(set(tags)), now  # placement sees a changed node
    return node


async def drain_node(session: AsyncSession, node_id: str, scope: Scope,
                     now: float) -> DrainResult:
    """Drain a node: placement gives it no new work from now on (its agent's hellos do not
    undo that); the attempts running there go on and finish. Said again, it only counts them:
    the caller waits for ``running`` to reach 0 before it stops the agent."""
    node = await session.get(Node, node_id, with_for_update=True)
    if node is None or not scope.sees(node.project_id):
        raise NotFound(f"no node {node_id!r}", hint="`bourse nodes` lists nodes")
    if node.drained_at is None:
        node.drained_at, node.updated_at = now, now  # placement sees a changed node
    running = await session.scalar(select(func.count()).select_from(Attempt).where(
        Attempt.node_id == node.id, Attempt.state.in_(active_attempt_states())))
    return DrainResult(node_id=node.id, drained_at=node.drained_at, running=running or 0)
