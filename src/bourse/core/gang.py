"""Gangs: a job on several nodes at once, placed all or nothing.

A Compute with ``num_nodes=N`` (N > 1) needs N distinct nodes of one *network* — hosts that
reach each other, as each node's agent declares (``bourse agent --network``) — each with room
for the whole Compute. Placement takes the N cheapest such nodes of the cheapest network in
one step, or none: a gang never holds part of what it needs, so two gangs that compete for the
same nodes can never deadlock. Pure: the shell (``server.services.placement``) writes what
this chooses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bourse.core.blocklist import Block, tiers
from bourse.core.compute import Compute
from bourse.core.match import Match, match
from bourse.core.offer import Offer

NO_NETWORK = ("no node declares a network: start the agents of nodes that reach each other "
              "with `bourse agent --network NAME`")


def best_gang(compute: Compute, offers: Sequence[Offer], networks: Mapping[str, str | None],
              *, blocklist: Sequence[Block] = (), now: float = 0.0,
              near: str | None = None) -> list[Match] | None:
    """N matches on N distinct nodes of one network, rank 0 first, or None. ``networks``: each
    node's network (None: it declares none, so no gang uses it). The gang clear of the
    blocklist wins, as for one node (``core.blocklist``); then the cheapest in total."""
    for tier in tiers(list(offers), list(blocklist), now):
        chosen = _cheapest(compute, tier, networks, near)
        if chosen is not None:
            return chosen
    return None


def _cheapest(compute: Compute, offers: Sequence[Offer], networks: Mapping[str, str | None],
              near: str | None) -> list[Match] | None:
    groups = by_network(match(compute, offers, data_region=near), networks,
                        compute.num_nodes)
    full = [g for g in groups.values() if len(g) == compute.num_nodes]
    if not full:
        return None
    return min(full, key=lambda g: (sum(m.price for m in g), g[0].offer.id))


def by_network(found: Sequence[Match], networks: Mapping[str, str | None],
               size: int) -> dict[str, list[Match]]:
    """The best match of each node, grouped by network, at most ``size`` per network."""
    groups: dict[str, list[Match]] = {}
    seen: set[str] = set()
    for m in found:  # best first
        node = m.offer.node_id or m.offer.id
        network = networks.get(node)
        if network is None or node in seen:
            continue
        seen.add(node)
        group = groups.setdefault(network, [])
        if len(group) < size:
            group.append(m)
    return groups


def shortfall(compute: Compute, offers: Sequence[Offer],
              networks: Mapping[str, str | None]) -> str:
    """Why no gang fits, in one line: how many nodes fit a member, network by network."""
    size = compute.num_nodes
    found = match(compute, offers)
    nodes = {m.offer.node_id or m.offer.id for m in found}
    groups = by_network(found, networks, len(nodes) or 1)
    member = compute.model_copy(update={"num_nodes": 1}).describe()
    head = f"needs {size} nodes of one network, each with {member}"
    if not nodes:
        return f"{head}: no free node fits one member"
    if not groups:
        return f"{head}: {len(nodes)} free node(s) fit one member, but {NO_NETWORK}"
    best = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    parts = [f"{network}: {len(g)} ({', '.join(_names(g))})" for network, g in best[:3]]
    loose = len(nodes) - sum(len(g) for g in groups.values())
    if loose:
        parts.append(f"{loose} without a network")
    return f"{head}; free nodes that fit one member: {'; '.join(parts)}"


def _names(group: Sequence[Match], most: int = 4) -> list[str]:
    names = sorted(m.offer.instance_type for m in group)[:most]
    return names + ([f"+{len(group) - most}"] if len(group) > most else [])
