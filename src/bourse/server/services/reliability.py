"""Keeping each node's reliability record (``core.reliability``): its connections' time, as
they open and close, and the attempts that ended there, as they end."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, case, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from bourse.core.reliability import NodeRecord, Reliability, combine, common_declared, measure
from bourse.core.states import AttemptState, NodeState
from bourse.server.access import Scope
from bourse.server.db.database import defer_add
from bourse.server.db.schema import Attempt, Node

NODES = cast(Table, Node.__table__)


def opened(node: Node, now: float) -> None:
    """The node said hello: its connected time runs from now, unless a connection (one that
    replaced another before the old one's goodbye) runs already."""
    if node.up_since is None:
        node.up_since = now


def closed(node: Node, end: float | None) -> None:
    """Its connection ended at ``end`` (when it was last heard, for one that died silent)."""
    if node.up_since is not None:
        node.up_s = (node.up_s or 0.0) + max(0.0, (end or node.up_since) - node.up_since)
        node.up_since = None


def closed_values(end: ColumnElement[Any] | float) -> dict[str, Any]:
    """``closed`` as the values of an UPDATE of many nodes: ``end`` a column (``last_seen``)
    or a time."""
    since = NODES.c.up_since
    gained = case((and_(since.is_not(None), since < end), end - since), else_=0.0)
    return {"up_s": NODES.c.up_s + gained, "up_since": None}


def count_ended(session: AsyncSession, attempt: Attempt, outcome: AttemptState) -> None:
    """An attempt ended on its node: counted there (after the ORM's flush, in one UPDATE per
    node and transaction)."""
    work = run_time(attempt)
    defer_add(session, NODES, "id", attempt.node_id, attempts_ended=1,
              attempts_interrupted=1 if outcome.interrupted else 0, work_s=work)


def run_time(attempt: Attempt) -> float:
    """From its start (the node's clock) to its end (the coordinator's); from its placement
    where the two clocks disagree so far that the start is outside the placement's span."""
    end = attempt.ended_at
    if end is None or attempt.started_at is None:
        return 0.0
    start = attempt.started_at
    if not attempt.placed_at <= start <= end:
        start = attempt.placed_at
    return max(0.0, end - start)


SCORE_EVERY_S = 60.0  # the scheduler works the stored scores out again this often
_SCORED = update(NODES).where(NODES.c.id == bindparam("node")).values(
    reliability=bindparam("score"))


async def refresh_scores(session: AsyncSession, now: float) -> int:
    """Store each node's score as of ``now`` (rounded to 0.001, so that a node whose record
    did not change keeps its row, and placement its cached offers); how many changed."""
    changed = []
    for row in await records(session, Node.reliability):  # in id order: rows locked in one
        score = reliability_of(row, now).score
        score = None if score is None else round(score, 3)
        if score != row.reliability:
            changed.append({"node": row.id, "score": score})
    if changed:
        await session.execute(_SCORED, changed)
    return len(changed)


RECORD = (Node.created_at, Node.up_s, Node.up_since, Node.attempts_ended,
          Node.attempts_interrupted, Node.work_s)  # the columns a record is read from


async def records(session: AsyncSession, *more: Any) -> list[Any]:
    """Every node that may still take work: its id, the ``more`` columns asked and its
    record's (``RECORD``), not the whole row (its JSON columns are large), by id."""
    rows = await session.execute(select(Node.id, *more, *RECORD).where(
        Node.state != NodeState.TERMINATED).order_by(Node.id))
    return list(rows.all())


def record_of(node: Any) -> NodeRecord:
    """A node's record, from the Node or a row with the ``RECORD`` columns."""
    return NodeRecord(enrolled_at=node.created_at, up_s=node.up_s or 0.0,
                      up_since=node.up_since, ended=node.attempts_ended or 0,
                      interrupted=node.attempts_interrupted or 0, work_s=node.work_s or 0.0)


def reliability_of(node: Any, now: float) -> Reliability:
    return measure(record_of(node), now)


WINDOW_S = 30 * 86400.0  # a provider's figures: its nodes seen in the last 30 days
NO_PROVIDER = "node"  # a node whose agent named no provider (placement's name for it)


@dataclass(frozen=True, slots=True)
class ProviderRecord:
    """What the exchange measured of one provider's nodes together."""

    provider: str
    nodes: int
    reliability: Reliability
    declared: float | None  # the SLA its nodes declared, when they agree on one


async def by_provider(session: AsyncSession, scope: Scope, now: float) -> list[ProviderRecord]:
    """Each provider's nodes that the scope sees and that were heard in the last ``WINDOW_S``
    (or enrolled in it and never heard: a launched machine terminated yesterday still counts,
    one silent for longer does not), measured together: a node that ended or was drained is
    measured up to when it was last heard. By provider name."""
    since = now - WINDOW_S
    rows = (await session.execute(scope.filter(select(
        Node.capabilities, Node.declared, Node.state, Node.last_seen, Node.drained_at,
        *RECORD).where(or_(Node.last_seen >= since, and_(
            Node.last_seen.is_(None), Node.created_at >= since))),
        Node.project_id))).all()
    groups: dict[str, list[Any]] = {}
    for row in rows:
        name = (row.capabilities or {}).get("provider") or NO_PROVIDER
        groups.setdefault(str(name), []).append(row)
    return [ProviderRecord(
        provider=name, nodes=len(members),
        reliability=combine([reliability_of(row, _until(row, now)) for row in members]),
        declared=common_declared(declared_sla(row.declared) for row in members))
        for name, members in sorted(groups.items())]


def _until(row: Any, now: float) -> float:
    """A node that ended, or was drained (taken out of the fleet), was watched until it was
    last heard: its provider retired it, its silence since is not downtime."""
    ended = row.state == NodeState.TERMINATED or row.drained_at is not None
    if ended and row.last_seen is not None:
        return min(now, float(row.last_seen))
    return now


def declared_sla(declared: Mapping[str, Any] | None) -> float | None:
    """The availability a node's provider declared, from its stored declaration."""
    value = (declared or {}).get("sla")
    return float(value) if isinstance(value, (int, float)) else None
