"""Gangs in the pure placement plan: N distinct nodes of one network or nothing, the cheapest
network first, the blocklist respected, and two gangs competing for the same nodes never
sharing them (so neither can ever hold part of what it needs)."""

from __future__ import annotations

import random
from dataclasses import replace

from bourse.core.blocklist import Block
from bourse.core.compute import Compute
from bourse.core.placement import (
    Candidate,
    NodeCapacity,
    Room,
    fits_any,
    member_fits,
    plan,
    shape_of,
    why_waiting,
)

NOW = 1000.0


def node(node_id: str, network: str | None = "lab", price: float = 1.0,
         cpus: float = 4) -> NodeCapacity:
    return NodeCapacity(id=node_id, name=node_id, cpus=cpus, memory_gib=64, price=price,
                        network=network, address="10.0.0.1")


def gang(job_id: str, nodes: int, at: float = 0.0, **compute: object) -> Candidate:
    c = Compute(nodes=nodes, **compute)
    return Candidate(job_id, "p", at, c, shape_of(c.model_dump(mode="json")))


def test_a_gang_takes_distinct_nodes_of_the_cheapest_network_rank_0_first() -> None:
    rooms = [Room.whole(n) for n in (node("a1", "a", 3.0), node("a2", "a", 3.0),
                                     node("b1", "b", 1.0), node("b2", "b", 2.0),
                                     node("loose", None, 0.1))]
    found = plan({"p": [gang("g", 2, cpus=4)]}, rooms, now=NOW)
    assert [(p.rank, p.node_id) for p in found.placements] == [(0, "b1"), (1, "b2")]


def test_a_gang_never_doubles_up_on_one_node_with_room_for_two() -> None:
    rooms = [Room.whole(node("big", cpus=64)), Room.whole(node("small", cpus=2))]
    found = plan({"p": [gang("g", 2, cpus=2)]}, rooms, now=NOW)
    assert sorted(p.node_id for p in found.placements) == ["big", "small"]
    assert plan({"p": [gang("g", 3, cpus=2)]}, rooms, now=NOW).placements == []


def test_a_gang_avoids_a_node_that_failed_it_when_others_fit() -> None:
    rooms = [Room.whole(node(n)) for n in ("n1", "n2", "n3")]
    job = replace(gang("g", 2), blocklist=(Block("node", "n1", NOW + 60),))
    found = plan({"p": [job]}, rooms, now=NOW)
    assert sorted(p.node_id for p in found.placements) == ["n2", "n3"]


def test_why_a_gang_waits_and_whether_it_could_ever_run() -> None:
    rooms = [Room.whole(n) for n in (node("n1"), node("o1", "other"), node("x", None))]
    compute = Compute(nodes=3)
    assert not fits_any(compute, rooms) and member_fits(compute, rooms)
    first = why_waiting(compute, rooms).split("\n")[0]
    assert first == ("needs 3 nodes of one network, each with no GPU; free nodes that fit "
                     "one member: lab: 1 (n1); other: 1 (o1); 1 without a network")


def test_competing_gangs_each_get_all_or_nothing_over_many_random_orders() -> None:
    rng = random.Random(19)
    for _ in range(50):
        rooms = [Room.whole(node(f"n{i}", price=rng.choice([1.0, 2.0]), cpus=1))
                 for i in range(3)]
        rng.shuffle(rooms)
        jobs = [gang("g1", 2, at=rng.random(), cpus=1), gang("g2", 2, at=rng.random(), cpus=1)]
        found = plan({"p": sorted(jobs, key=lambda j: j.created_at)}, rooms, now=NOW)
        by_job: dict[str, list[str]] = {}
        for p in found.placements:
            by_job.setdefault(p.job.id, []).append(p.node_id)
        assert len(by_job) == 1 and [len(v) for v in by_job.values()] == [2]
        assert len({n for v in by_job.values() for n in v}) == 2
