"""Reclaiming a node: the preemption notice a provider (or a cloud's spot interruption) gives.

The node leaves placement at once (state ``reclaimed``, until its agent says hello again: a
new instance, or the same machine given back); each of its active attempts is marked with the
notice time, so however it ends — the job exits on SIGTERM, is SIGKILLed at the end of the
notice, or the node goes silent — the attempt ends PREEMPTED and the job is retried
(``services.lifecycle``). The agent is sent a ``preempt`` message after the commit.

A node's own agent may say its cloud is taking it back (``interruption``: a spot interruption
notice read from the instance's metadata): :func:`interrupt_node` reclaims it the same way,
once per notice, and never refuses (an agent message that raised would be replayed forever).
"""

from __future__ import annotations

import logging

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import InvalidInput, NotFound
from bourse.core.states import NodeState
from bourse.protocol.agent import Interruption, Preempt
from bourse.protocol.api import ReclaimRequest, ReclaimResult
from bourse.server.commands import Command
from bourse.server.db.schema import Attempt, Node
from bourse.server.services.jobs import active_attempt_states
from bourse.server.services.lifecycle import add_event

log = logging.getLogger(__name__)
NOTICE_CLOCK_S = 60.0  # how far back an agent's own time of a notice is believed


async def reclaim_node(session: AsyncSession, node_id: str, request: ReclaimRequest,
                       now: float, *, preempted_at: float | None = None
                       ) -> tuple[ReclaimResult, list[Command]]:
    """Reclaim the node: its attempts are preempted at ``preempted_at`` (when its agent
    stopped them on the cloud's notice, bounded by ``notice_time``) or now."""
    node = await session.get(Node, node_id, with_for_update=True)
    if node is None:
        raise NotFound(f"no node {node_id!r}", hint="`bourse nodes` lists nodes")
    if not (node.capabilities or {}).get("interruptible"):
        raise InvalidInput(f"node {node.name} is not interruptible: only spot capacity can be "
                           "reclaimed", field="node",
                           hint="start its agent with --interruptible, or stop its jobs")
    if node.state == NodeState.LOST:
        raise InvalidInput(f"node {node.name} is lost already; its jobs were retried",
                           field="node")
    node.state, node.reclaimed_at, node.updated_at = NodeState.RECLAIMED, now, now
    attempts = (await session.scalars(select(Attempt).where(
        Attempt.node_id == node.id, Attempt.state.in_(active_attempt_states())))).all()
    for attempt in attempts:
        attempt.preempt_at = attempt.preempt_at or max(
            preempted_at or now, attempt.started_at or 0.0)
        add_event(session, attempt.job_id, attempt.number, "preemption", now,
                  message=f"node {node.name} reclaimed: {request.notice_s:g} s notice "
                          f"({request.reason})", data={"notice_s": request.notice_s})
    result = ReclaimResult(node_id=node.id, notice_s=request.notice_s,
                           attempts=[f"{a.job_id}/{a.number}" for a in attempts])
    return result, [Command(node.id, Preempt(notice_s=request.notice_s, reason=request.reason))]


async def interrupt_node(session: AsyncSession, node_id: str, notice: Interruption,
                         now: float) -> list[Command]:
    """Reclaim a node whose agent relayed its cloud's interruption notice; nothing for a node
    already reclaimed (the notice said again on a new connection), lost or terminated, or not
    sold as spot."""
    node = await session.get(Node, node_id, with_for_update=True)
    if node is None or node.state in (NodeState.RECLAIMED, NodeState.LOST,
                                      NodeState.TERMINATED):
        return []
    if not (node.capabilities or {}).get("interruptible"):
        log.warning("node %s relayed an interruption notice but is not interruptible; its "
                    "jobs end as the machine goes", node.name)
        return []
    request = ReclaimRequest(notice_s=notice.notice_s, reason=notice.reason)
    _, commands = await reclaim_node(session, node_id, request, now,
                                     preempted_at=notice_time(notice.stopped_at, now))
    return commands


def notice_time(stopped_at: float | None, now: float) -> float:
    """When the node's attempts were preempted: when its agent stopped them on the notice —
    the jobs save from then on, before the coordinator may hear of it — never later than now
    nor earlier than ``NOTICE_CLOCK_S`` before it (an agent's clock is not trusted further)."""
    if stopped_at is None:
        return now
    return min(now, max(stopped_at, now - NOTICE_CLOCK_S))
