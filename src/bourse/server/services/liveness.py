"""Which nodes are alive, and what happens to the attempts of those that are not.

A node silent for its *loss window* is lost, with its attempts; the window is a setting of its
own (``ServerConfig.loss_window_s``), never shorter than three of the node's keep-alives, so a
link that blinks for less never costs a running attempt (docs/exchange.md). A placement is a
lease: a connected node must acknowledge the start before ``start_deadline`` or the attempt is
LOST and the job placed again; a node that is not connected gets its starts again when it says
hello, so its leases run from then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from sqlalchemy import Table, bindparam, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.liveness import LOST_AFTER_KEEP_ALIVES, loss_window
from bourse.core.states import AttemptState, NodeState
from bourse.server.db.schema import Attempt, Job, Node
from bourse.server.services import gangs, reliability
from bourse.server.services.jobs import active_attempt_states
from bourse.server.services.lifecycle import add_event

_NOT_WATCHED = (NodeState.LOST, NodeState.LAUNCHING, NodeState.BOOTING, NodeState.TERMINATED)


_NODES = cast(Table, Node.__table__)
_HEARD = update(_NODES).where(
    _NODES.c.id == bindparam("node"),
    or_(_NODES.c.last_seen.is_(None), _NODES.c.last_seen < bindparam("at")),
).values(last_seen=bindparam("at"))


async def note_heard(session: AsyncSession, heard: Mapping[str, float]) -> None:
    """Nodes heard on their connections (``agents.connections.take_heard``), before their
    messages were applied: each node's ``last_seen`` is at least then."""
    if heard:
        await session.execute(_HEARD, [{"node": node, "at": at} for node, at in heard.items()])


async def detect_lost_nodes(session: AsyncSession, now: float, window_s: float) -> list[str]:
    """Nodes silent for longer than their loss window are lost, with their attempts. A node
    the exchange is launching or booting is the launcher's to time out (its boot timeout), and
    a terminated one is gone already."""
    heard = func.coalesce(Node.last_seen, Node.created_at)
    # only the silent ones are read (the loss window's test, in SQL): a tick with thousands of
    # nodes connected reads none of them
    silent = [Node.state.not_in(_NOT_WATCHED), heard < now - window_s,
              heard < now - LOST_AFTER_KEEP_ALIVES * Node.keep_alive_s]
    # a node that never said hello runs nothing (nothing is placed on a node without its
    # capabilities): one statement for all of them, however many enrolled at once
    never = list((await session.scalars(select(Node.id).where(
        *silent, Node.capabilities.is_(None)))).all())
    if never:
        await session.execute(update(_NODES).where(_NODES.c.id.in_(never)).values(
            state=NodeState.LOST, session=None, updated_at=now))
    lost = never
    for node in (await session.scalars(select(Node).where(
            *silent, Node.capabilities.is_not(None)))).all():
        quiet = now - (node.last_seen or node.created_at)
        if quiet <= loss_window(window_s, node.keep_alive_s):
            continue
        node.state, node.session, node.updated_at = NodeState.LOST, None, now
        reliability.closed(node, node.last_seen)  # it was up until it was last heard
        lost.append(node.id)
        await lose_attempts(session, node, now, f"node {node.name} silent for {quiet:.0f} s")
    return lost


async def lose_attempts(session: AsyncSession, node: Node, now: float, reason: str) -> None:
    """End the node's active attempts LOST (PREEMPTED after a notice); their jobs retry."""
    attempts = (await session.scalars(select(Attempt).where(
        Attempt.node_id == node.id, Attempt.state.in_(active_attempt_states())))).all()
    for attempt in attempts:
        job = await session.get(Job, attempt.job_id, with_for_update=True)
        assert job is not None
        await gangs.end(session, job, attempt, AttemptState.LOST, now=now, reason=reason)
        add_event(session, job.id, attempt.number, "node_lost", now, message=reason,
                  rank=attempt.rank)


async def expire_start_leases(session: AsyncSession, now: float) -> int:
    """Attempts whose connected node never acknowledged the start: LOST, and their jobs
    placed again. A node that is not connected is told again when it says hello (and is lost
    if it never does), so a network blink never costs a placement."""
    expired = (await session.scalars(
        select(Attempt).join(Node, Node.id == Attempt.node_id).where(
            Attempt.state == AttemptState.SCHEDULED.value, Attempt.start_deadline < now,
            Node.session.is_not(None)))).all()
    for attempt in expired:
        job = await session.get(Job, attempt.job_id, with_for_update=True)
        assert job is not None
        await gangs.end(session, job, attempt, AttemptState.LOST, now=now,
                        reason="the node did not acknowledge the start in time")
    return len(expired)


async def grace_after_start(session: AsyncSession, now: float, lease_s: float) -> None:
    """A coordinator that was down heard nobody: once it can accept agents again, restart every
    node's silence clock and every placement lease, so that its own downtime is never taken
    for node silence — each node gets a whole loss window from now."""
    # the connections that were up when it stopped were up until their nodes were last heard
    await session.execute(update(Node).where(Node.up_since.is_not(None)).values(
        **reliability.closed_values(_NODES.c.last_seen)))
    await session.execute(update(Node).where(Node.state != NodeState.LOST).values(last_seen=now))
    await session.execute(update(Node).values(session=None))  # no connection survives it
    await session.execute(update(Attempt).where(
        Attempt.state == AttemptState.SCHEDULED.value, Attempt.start_deadline < now + lease_s,
    ).values(start_deadline=now + lease_s))
