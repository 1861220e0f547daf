"""Nodes as the API shows them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import NotFound
from bourse.protocol.api import NodeView
from bourse.protocol.common import Capabilities, Declared, ProbeReport, VerificationReport
from bourse.server.db.schema import Attempt, Node
from bourse.server.services.jobs import active_attempt_states


async def list_nodes(session: AsyncSession, connected: set[str]) -> list[NodeView]:
    nodes = (await session.scalars(select(Node).order_by(Node.created_at, Node.id))).all()
    return await _views(session, nodes, connected)


async def get_node(session: AsyncSession, node_id: str, connected: set[str]) -> NodeView:
    node = await session.get(Node, node_id)
    if node is None:
        raise NotFound(f"no node {node_id!r}", hint="`bourse nodes` lists nodes")
    return (await _views(session, [node], connected))[0]


async def _views(session: AsyncSession, nodes: Sequence[Node],
                 connected: set[str]) -> list[NodeView]:
    attempts = (await session.scalars(select(Attempt).where(
        Attempt.node_id.in_([n.id for n in nodes]),
        Attempt.state.in_(active_attempt_states())))).all()
    running: dict[str, list[str]] = {}
    for attempt in attempts:
        running.setdefault(attempt.node_id, []).append(attempt.job_id)
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
    ) for n in nodes]
