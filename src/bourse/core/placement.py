"""Placement as a plan: pending jobs onto the free room of live nodes, and why the rest wait.

Pure: the shell (``server.services.placement``) reads the pending jobs and the nodes, calls
:func:`plan`, and writes what it returns. Jobs that require the same Compute share a *shape*
(a digest of it): whether any free offer fits is decided once per shape, so a job that no free
node can take costs nothing to skip, and no job that fits waits behind jobs that cannot run,
however many there are.

Order: FIFO within a project; between projects, the one with the fewest active attempts goes
first (ties: the project whose next job is oldest), so a project with a long queue cannot keep
another project's first job waiting. A job's blocklist only orders the offers it may take
(``core.blocklist``): it never makes a job wait while something fits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bourse.core.blocklist import Block, tiers
from bourse.core.compute import Compute
from bourse.core.devices import Device, choose, groups, held, take, weight
from bourse.core.gang import best_gang, shortfall
from bourse.core.match import Match, explain, match
from bourse.core.offer import Offer

SPOT_SHARE = 0.35  # an interruptible node without a spot price: this share of its list price
LOCAL_REGION = "local"  # a node that does not say where it is


def shape_of(compute: Mapping[str, Any]) -> str:
    """The digest of a Compute as stored (its JSON form): jobs with equal digests fit the same
    offers."""
    text = json.dumps(compute, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class NodeCapacity:
    """A node as placement sees it: what its verified report measured and what it is sold at.
    ``price``: the provider's on-demand $/h, else None; ``list_price``: what its hardware lists
    at (``market.pricing``), used when the provider set none."""

    id: str
    name: str
    cpus: float
    memory_gib: float
    devices: tuple[Device, ...] = ()
    list_price: float = 0.0
    price: float | None = None
    provider: str | None = None
    region: str | None = None
    disk_gib: float | None = None
    driver: str | None = None
    engines: frozenset[str] = frozenset()
    interruptible: bool = False
    spot_price: float | None = None
    verified_at: float | None = None
    tags: frozenset[str] = frozenset()
    project_id: str = "default"  # its provider's project
    reserved_for: str | None = None  # a node the exchange launched serves its project only
    network: str | None = None  # hosts it reaches (``core.gang``); None: it joins no gang
    address: str | None = None  # where its gang peers dial it
    sla: float | None = None  # its measured reliability score (core.reliability)

    @property
    def on_demand(self) -> float:
        return self.price or self.list_price

    def serves(self, project: str) -> bool:
        return self.reserved_for is None or self.reserved_for == project


@dataclass(frozen=True)
class Need:
    """What an attempt reserves on a node: the CPUs it asks for (one when it does not say),
    its memory, and the devices it was given."""

    cpus: float
    memory_gib: float
    gpus: int = 0
    gpu_uuids: tuple[str, ...] = ()

    @classmethod
    def of(cls, compute: Compute) -> Need:
        return cls(compute.cpus.min if compute.cpus.min > 0 else 1.0, compute.memory.min,
                   compute.gpu.count if compute.gpu else 0)

    @classmethod
    def of_row(cls, resources: Mapping[str, Any]) -> Need:
        """What an attempt row's ``resources`` hold (one placed before devices were named
        holds GPUs by count only: the first free ones are taken for it)."""
        addresses, anonymous = held(resources)
        return cls(float(resources.get("cpus") or 0.0),
                   float(resources.get("memory_gib") or 0.0), len(addresses) + anonymous,
                   tuple(addresses))

    def resources(self) -> dict[str, Any]:
        """As an attempt row stores it."""
        out: dict[str, Any] = {"cpus": self.cpus, "memory_gib": self.memory_gib,
                               "gpus": float(self.gpus)}
        if self.gpu_uuids:
            out["gpu_uuids"] = list(self.gpu_uuids)
        return out


@dataclass
class Room:
    """What is left on a node during one plan."""

    node: NodeCapacity
    cpus: float
    memory_gib: float
    devices: list[Device] = field(default_factory=list)
    _offers: list[Offer] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def whole(cls, node: NodeCapacity) -> Room:
        return cls(node, node.cpus, node.memory_gib, list(node.devices))

    def copy(self) -> Room:
        """The same room, to take from on its own (the offers are shared until it changes)."""
        return Room(self.node, self.cpus, self.memory_gib, list(self.devices), self._offers)

    def take(self, need: Need) -> None:
        self._offers = None
        self.cpus -= need.cpus
        self.memory_gib -= need.memory_gib
        self.devices = take(self.devices, need.gpu_uuids, max(0, need.gpus - len(need.gpu_uuids)))

    def offers(self) -> list[Offer]:
        """The free room as offers: one per kind of free device (a model, a MIG slice
        profile), or one without GPUs when none is free. The first keeps the node's id.
        Made again only after the room changed (``take``)."""
        if self._offers is None:
            self._offers = self._make_offers()
        return self._offers

    def _make_offers(self) -> list[Offer]:
        if self.cpus <= 0:
            return []
        kinds = [g for g in groups(self.devices) if g[0].model is not None]
        if not kinds:
            return [self._offer(self.node.id, [])]
        total = weight(self.node.devices)  # the busy ones too: one price per GPU, however busy
        return [self._offer(self.node.id if i == 0 else f"{self.node.id}.{i}", g,
                            share=weight(g) / total)
                for i, g in enumerate(kinds)]

    def _offer(self, offer_id: str, devices: list[Device], share: float = 1.0) -> Offer:
        node = self.node
        first = devices[0] if devices else None
        price: float | None = node.on_demand
        spot_price = None
        if node.interruptible:  # sold only as spot: it can be reclaimed at any time
            spot_price = node.spot_price or round(node.on_demand * SPOT_SHARE, 4)
            price = None
        verified = datetime.fromtimestamp(node.verified_at, UTC) if node.verified_at else None
        return Offer(id=offer_id, provider=node.provider or "node", instance_type=node.name,
                     region=node.region or LOCAL_REGION,
                     gpu=first.model if first else None, gpu_count=len(devices),
                     gpu_memory_mib=min((d.memory_mib for d in devices if d.memory_mib),
                                        default=None),
                     cpus=self.cpus, memory_gib=self.memory_gib, disk_gib=node.disk_gib,
                     driver=node.driver, price=price, spot_price=spot_price, node_id=node.id,
                     available=1, divisible=True, source="node", verified_at=verified,
                     engines=node.engines, tags=node.tags,
                     gpu_slice=first.slice if first else None, gpu_price_share=share,
                     priced_cpus=node.cpus, sla=node.sla)


@dataclass(frozen=True)
class Candidate:
    """A pending job as placement sees it. ``near``: the region of its data, for jobs with
    inputs (same-region offers win ties)."""

    id: str
    project: str
    created_at: float
    compute: Compute
    shape: str
    blocklist: tuple[Block, ...] = ()
    near: str | None = None


@dataclass(frozen=True)
class Placement:
    """An attempt placed on a node; a gang's members are placed together, rank 0 first."""

    job: Candidate
    match: Match
    need: Need
    node: NodeCapacity
    rank: int = 0

    @property
    def node_id(self) -> str:
        return self.node.id


@dataclass
class Plan:
    placements: list[Placement] = field(default_factory=list)
    unfit: set[str] = field(default_factory=set)  # shapes no free offer fits
    # (shape, project): no free offer that serves the project fits (others' launched nodes)
    unfit_for: set[tuple[str, str]] = field(default_factory=set)
    passed: list[Candidate] = field(default_factory=list)  # skipped: their shape is unfit
    exhausted: set[str] = field(default_factory=set)  # projects whose given queue ran out


def plan(queues: Mapping[str, Sequence[Candidate]], rooms: Sequence[Room], *, now: float,
         active: Mapping[str, int] | None = None, limit: int = 200) -> Plan:
    """Place the jobs of ``queues`` (each project's, oldest first) on ``rooms``, which it
    takes from; at most ``limit`` placements. ``active``: each project's running attempts."""
    out = Plan()
    by_node = {room.node.id: room for room in rooms}
    offers = {room.node.id: room.offers() for room in rooms}
    counts = dict(active or {})
    heads = dict.fromkeys(queues, 0)
    while any(offers.values()) and len(out.placements) < limit:
        project = next_project(queues, heads, counts)
        if project is None:
            break
        job = queues[project][heads[project]]
        heads[project] += 1
        if job.shape in out.unfit or (job.shape, job.project) in out.unfit_for:
            out.passed.append(job)
            continue
        serving = [o for node, found in offers.items()
                   if by_node[node].node.serves(project) for o in found]
        chosen = _choose(job, serving, by_node, now)
        if chosen is None:
            if all(room.node.reserved_for is None for room in rooms):
                out.unfit.add(job.shape)
            else:
                out.unfit_for.add((job.shape, job.project))
            out.passed.append(job)
            continue
        for rank, found_match in enumerate(chosen):
            room = by_node[found_match.offer.node_id or found_match.offer.id]
            need = assigned(job.compute, found_match.offer, room)
            room.take(need)
            offers[room.node.id] = room.offers()
            out.placements.append(Placement(job, found_match, need, room.node, rank))
        counts[project] = counts.get(project, 0) + 1
    out.exhausted = {p for p, queue in queues.items() if heads[p] >= len(queue)}
    return out


def _choose(job: Candidate, offers: Sequence[Offer], by_node: Mapping[str, Room],
            now: float) -> list[Match] | None:
    """Where the job's attempt goes: one offer, or a gang's (``core.gang``)."""
    if job.compute.num_nodes == 1:
        one = best_offer(job, offers, now)
        return None if one is None else [one]
    return best_gang(job.compute, _with_cpus(job.compute, offers), networks(by_node.values()),
                     blocklist=job.blocklist, now=now, near=job.near)


def networks(rooms: Iterable[Room]) -> dict[str, str | None]:
    return {room.node.id: room.node.network for room in rooms}


def _with_cpus(compute: Compute, offers: Sequence[Offer]) -> list[Offer]:
    cpus = Need.of(compute).cpus
    return [o for o in offers if (o.cpus or 0) >= cpus - 1e-9]


def by_job(placements: Sequence[Placement]) -> list[list[Placement]]:
    """Placements grouped by job, in order: one for a job, a gang's members by rank."""
    groups: dict[str, list[Placement]] = {}
    for placement in placements:
        groups.setdefault(placement.job.id, []).append(placement)
    return list(groups.values())


def next_project(queues: Mapping[str, Sequence[Candidate]], heads: Mapping[str, int],
                 active: Mapping[str, int]) -> str | None:
    """The project whose next job goes first: fewest active attempts, then oldest job."""
    best: tuple[int, float, str, str] | None = None
    for project, queue in queues.items():
        if heads[project] < len(queue):
            job = queue[heads[project]]
            key = (active.get(project, 0), job.created_at, job.id, project)
            if best is None or key < best:
                best = key
    return None if best is None else best[3]


def best_offer(job: Candidate, offers: Sequence[Offer], now: float) -> Match | None:
    """The best offer with room for the job, clear of its blocklist — its node, then its
    provider and region — unless nothing else fits (``core.blocklist``); near its data when
    prices tie."""
    cpus = Need.of(job.compute).cpus
    fitting = [o for o in offers if (o.cpus or 0) >= cpus - 1e-9]
    for tier in tiers(fitting, list(job.blocklist), now):
        found = match(job.compute, tier, limit=1, data_region=job.near)
        if found:
            return found[0]
    return None


def assigned(compute: Compute, offer: Offer, room: Room) -> Need:
    """The reservation of an attempt placed on ``offer``: ``count`` free devices of the
    offer's kind (the matcher saw that many free, so they are there)."""
    need = Need.of(compute)
    if compute.gpu is None:
        return need
    kind = (offer.gpu, offer.gpu_slice)
    chosen = choose(room.devices, kind, compute.gpu.count)
    if chosen is None:  # the offer and the free devices disagree: a bug, never a guess
        raise AssertionError(f"offer {offer.id} has no {compute.gpu.count} free devices "
                             f"of kind {kind}")
    return Need(need.cpus, need.memory_gib, need.gpus, tuple(d.address for d in chosen))


def fits_any(compute: Compute, rooms: Sequence[Room]) -> bool:
    """Whether the rooms could take the Compute (capacity as given, blocklists aside): some
    room, or for a gang, enough rooms of one network."""
    offers = _with_cpus(compute, [o for room in rooms for o in room.offers()])
    if compute.num_nodes > 1:
        return best_gang(compute, offers, networks(rooms)) is not None
    return bool(match(compute, offers, limit=1))


def member_fits(compute: Compute, rooms: Sequence[Room]) -> bool:
    """Whether some room could take one node's share of the Compute (for a gang: one member;
    more nodes may join its network)."""
    return fits_any(compute.model_copy(update={"num_nodes": 1}), rooms)


def why_waiting(compute: Compute, rooms: Sequence[Room], nearest: int = 3) -> str:
    """The matcher's explanation over the free room, one line per constraint (a gang's first
    line says how many nodes of each network fit a member)."""
    offers = [o for room in rooms for o in room.offers()]
    lines = explain(compute, offers, nearest=nearest).lines()
    if compute.num_nodes > 1:
        lines = [shortfall(compute, _with_cpus(compute, offers), networks(rooms)), *lines]
    return "\n".join(lines)
