"""Capacity, the shell: the nodes placement may use and the room their attempts leave.

``live_capacity`` is what connected, verified nodes have free now; ``Memo.known`` what every
node that may take work again could ever offer (read again only when the nodes change). A
node's offer is worked out once per row (``capacity_of``, cached by the row's text) from what
its verified probe report measured, never from its hello's claims (``measured``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, Text, case, cast, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.compute import Compute
from bourse.core.constraints import container_engines
from bourse.core.devices import node_devices
from bourse.core.offer import Offer
from bourse.core.placement import Need, NodeCapacity, Room
from bourse.core.states import NODE_GONE, NodeState
from bourse.market.pricing import list_price
from bourse.protocol.common import Capabilities, ProbeReport
from bourse.server.access import Scope
from bourse.server.db.schema import Attempt, Node
from bourse.server.services.jobs import active_attempt_states
from bourse.server.services.verification import PLACEABLE

if TYPE_CHECKING:
    from bourse.server.services.placement import Group


def _node_filter(allow_unverified: bool, live: bool) -> list[Any]:
    where: list[Any] = [Node.capabilities.is_not(None), Node.drained_at.is_(None)]
    if live:
        where += [Node.state == NodeState.ONLINE, Node.session.is_not(None)]
        if not allow_unverified:
            where.append(Node.verification_status.in_(PLACEABLE))
    else:  # every node that may take work again: it said hello, is not lost nor failed
        where += [Node.state.not_in(NODE_GONE), Node.verification_status != "fail"]
    return where


_ROW: list[Any] = [Node.id, Node.name, Node.price, Node.verified_at,
                   cast(Node.capabilities, Text).label("capabilities"), Node.project_id,
                   cast(Node.tags, Text).label("tags"), Node.launch_id, Node.reliability]


def _node_rows(allow_unverified: bool, live: bool) -> Select[Any]:
    # the JSON columns as their text: a row is looked up by it (``_rooms``), and decoded only
    # when it is new (decoding and hashing every node's capabilities at every pass cost most
    # of a pass with a thousand nodes connected)
    return select(*_ROW).where(*_node_filter(allow_unverified, live)).order_by(Node.id)


def _held(allow_unverified: bool) -> Select[Any]:
    """What the active attempts of live nodes hold: joined to the nodes in the statement
    (an index probe per node) rather than bound as a list of every live node's id."""
    return select(Attempt.node_id, Attempt.resources).join(Node, Node.id == Attempt.node_id) \
        .where(*_node_filter(allow_unverified, live=True),
               Attempt.state.in_(active_attempt_states()))


# built once (every placement pass runs them; building one costs more than running it)
_LIVE_NODES = {allow: _node_rows(allow, live=True) for allow in (False, True)}
_KNOWN_NODES = _node_rows(True, live=False)
_NODES_VERSION = select(func.count(), func.sum(case((Node.state == NodeState.LOST, 1), else_=0)),
                        func.max(Node.updated_at), func.max(Node.verified_at))
_HELD = {allow: _held(allow) for allow in (False, True)}


async def live_capacity(session: AsyncSession, allow_unverified: bool = False) -> list[Room]:
    """Connected, verified nodes and what their active attempts leave free."""
    rooms = {room.node.id: room for room in
             await _rooms(session, _LIVE_NODES[allow_unverified])}
    held = await session.execute(_HELD[allow_unverified])
    for node_id, resources in held.all():  # columns, not entities: many attempts may run
        room = rooms.get(node_id)
        if room is not None:  # None: the node came up between the two statements
            room.take(Need.of_row(resources))
    return list(rooms.values())


def node_offers(room: Room) -> list[Offer]:
    return room.offers()


@dataclass
class Memo:
    """What placement passes keep between them, for one database: the known nodes (read
    again when any node changes), whether a shape fits them, and why a shape's jobs wait."""

    version: tuple[Any, ...] | None = None
    nodes: list[NodeCapacity] = field(default_factory=list)
    groups: list[Group] | None = None  # what waited at the last pass, by project and shape
    runnable: dict[tuple[object, ...], bool] = field(default_factory=dict)
    reasons: dict[tuple[object, ...], str] = field(default_factory=dict)
    # with clouds enabled (``launcher``): whether some cloud offer fits a Compute, and what
    # the launcher says of a shape's jobs (why none launched)
    launchable: Callable[[Compute], bool] | None = None
    note: Callable[[str], str | None] | None = None

    async def known(self, session: AsyncSession, fresh: bool = False) -> list[Room]:
        """Every node that may take work again, empty: what the exchange could ever offer.
        Read again when the nodes changed, and whenever ``fresh`` (the periodic pass, so that
        a change the version misses — two at one instant — lasts a tick at most)."""
        version = tuple((await session.execute(_NODES_VERSION)).one())
        if fresh or self.version != version:
            self.nodes = [r.node for r in await _rooms(session, _KNOWN_NODES)]
            self.version = version
        return [Room.whole(node) for node in self.nodes]

    @property
    def enrolled(self) -> int:
        """Nodes ever enrolled, lost or not (as of the last ``known``)."""
        return int(self.version[0]) if self.version else 0

    def remember(self, table: dict[tuple[object, ...], Any], key: tuple[object, ...],
                 value: Any) -> None:
        if len(table) > 10_000:
            table.clear()
        table[key] = value


async def _rooms(session: AsyncSession, query: Select[Any]) -> list[Room]:
    rooms = []
    for row in (await session.execute(query)).all():
        if row.capabilities is None:  # enrolled, never said hello
            continue
        key = tuple(row)  # the JSON columns as their text (``_node_rows``)
        whole = _CAPACITY.get(key)
        if whole is None:
            capabilities = json.loads(row.capabilities)
            caps = await measured(session, row.id, row.verified_at, capabilities)
            node = capacity_of(SimpleNamespace(**{**row._asdict(),
                                                  "tags": json.loads(row.tags or "null")}), caps)
            if len(_CAPACITY) > 10_000:
                _CAPACITY.clear()
            whole = _CAPACITY[key] = Room.whole(node)
        rooms.append(whole.copy())
    return rooms


# a node's row -> its room when nothing runs there (its offers made once, not at every pass)
_CAPACITY: dict[tuple[Any, ...], Room] = {}


def capacity_of(node: Any, caps: Capabilities) -> NodeCapacity:
    """``node``: a row (or a Node) with its id, name, price, verification time, project and
    tags; ``caps``: what it offers (``measured``)."""
    gpu = next((g.model for g in caps.gpus if g.model), None)
    return NodeCapacity(
        id=node.id, name=node.name, cpus=float(caps.cpus), memory_gib=caps.memory_gib,
        devices=tuple(node_devices(caps.gpus)), price=node.price,
        list_price=list_price(caps.cpus, gpu, len(caps.gpus)), provider=caps.provider,
        region=caps.region, disk_gib=caps.disk_free_gib, driver=caps.driver,
        engines=frozenset(caps.engines), interruptible=caps.interruptible,
        spot_price=caps.spot_price, verified_at=node.verified_at,
        tags=frozenset(node.tags or ()), project_id=node.project_id,
        reserved_for=node.project_id if node.launch_id else None, network=caps.network,
        address=caps.address, sla=node.reliability)


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


def public_offer(offer: Offer, project_id: str, scope: Scope) -> Offer:
    """The offer as the scope may see it: another project's node under an opaque id."""
    if scope.sees(project_id):
        return offer
    opaque = "o-" + hashlib.sha256(f"offer:{offer.id}".encode()).hexdigest()[:12]
    return replace(offer, id=opaque, instance_type="node", node_id=None)
