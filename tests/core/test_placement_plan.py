"""The placement plan, pure: pending jobs in, placements and unfit shapes out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from bourse.core.blocklist import Block
from bourse.core.compute import Compute
from bourse.core.devices import Device
from bourse.core.placement import (
    Candidate,
    Need,
    NodeCapacity,
    Room,
    fits_any,
    plan,
    shape_of,
)

NOW = 1000.0


def node(node_id: str, cpus: float = 4, gpus: int = 0, price: float = 1.0,
         model: str = "a100-80gb") -> NodeCapacity:
    devices = tuple(Device(address=f"GPU-{node_id}-{i}", model=model, memory_mib=81920,
                           gpu_index=i) for i in range(gpus))
    return NodeCapacity(id=node_id, name=node_id, cpus=cpus, memory_gib=64, devices=devices,
                        price=price)


def job(job_id: str, project: str = "p", at: float = 0.0, **compute: object) -> Candidate:
    c = Compute(**compute)
    return Candidate(job_id, project, at, c, shape_of(c.model_dump(mode="json")))


def placed(rooms: Sequence[Room], queues: dict[str, list[Candidate]], **options: object
           ) -> list[tuple[str, str]]:
    found = plan(queues, rooms, now=NOW, **options)  # type: ignore[arg-type]
    return [(p.job.id, p.node_id) for p in found.placements]


def test_jobs_no_free_room_fits_are_passed_and_those_behind_placed() -> None:
    rooms = [Room.whole(node("cpu", cpus=2))]
    queue = [job(f"gpu{i}", at=i, gpu="a100-80gb:8") for i in range(500)]
    queue += [job("small", at=600, cpus=1), job("small2", at=601, cpus=1)]
    found = plan({"p": queue}, rooms, now=NOW)
    assert [(p.job.id, p.node_id) for p in found.placements] == [("small", "cpu"),
                                                                ("small2", "cpu")]
    assert found.unfit == {queue[0].shape}
    assert len(found.passed) == 500


def test_fifo_within_a_project() -> None:
    rooms = [Room.whole(node("n", cpus=2))]
    queue = [job("a", at=1, cpus=1), job("b", at=2, cpus=1), job("c", at=3, cpus=1)]
    assert placed(rooms, {"p": queue}) == [("a", "n"), ("b", "n")]


@pytest.mark.parametrize(("active", "first"), [
    ({}, "old"),  # equal shares: the oldest job
    ({"p": 3}, "new"),  # the project running fewer goes first
    ({"q": 3}, "old"),
])
def test_between_projects_the_fewest_running_go_first(active: dict[str, int],
                                                      first: str) -> None:
    rooms = [Room.whole(node("n", cpus=1))]
    queues = {"p": [job("old", "p", at=1, cpus=1)], "q": [job("new", "q", at=2, cpus=1)]}
    assert placed(rooms, queues, active=active) == [(first, "n")]


def test_a_long_queue_does_not_starve_another_projects_job() -> None:
    rooms = [Room.whole(node("n", cpus=4))]
    queues = {"big": [job(f"b{i}", "big", at=i, cpus=1) for i in range(10)],
              "small": [job("s", "small", at=50, cpus=1)]}
    ids = [j for j, _ in placed(rooms, queues)]
    assert "s" in ids and ids.index("s") <= 1


def test_the_limit_stops_a_plan() -> None:
    rooms = [Room.whole(node("n", cpus=8))]
    queue = [job(f"j{i}", at=i, cpus=1) for i in range(8)]
    found = plan({"p": queue}, rooms, now=NOW, limit=3)
    assert len(found.placements) == 3 and "p" not in found.exhausted


def test_gpus_are_given_and_taken() -> None:
    room = Room.whole(node("g", gpus=2))
    queue = [job("one", at=1, gpu="a100-80gb"), job("two", at=2, gpu="a100-80gb:2")]
    found = plan({"p": queue}, [room], now=NOW)
    [first] = found.placements
    assert first.need == Need(1.0, 0.0, 1, ("GPU-g-0",))
    assert [d.address for d in room.devices] == ["GPU-g-1"]
    assert found.unfit == {queue[1].shape}


def test_a_blocklist_orders_offers_but_never_blocks() -> None:
    rooms = [Room.whole(node("cheap", price=1.0)), Room.whole(node("dear", price=2.0))]
    block = (Block("node", "cheap", NOW + 60),)
    avoid = Candidate("j", "p", 0.0, Compute(cpus=1), "s", blocklist=block)
    assert placed(rooms, {"p": [avoid]}) == [("j", "dear")]
    alone = [Room.whole(node("cheap"))]
    assert placed(alone, {"p": [avoid]}) == [("j", "cheap")]


def test_fits_any_looks_at_what_is_left() -> None:
    room = Room.whole(node("n", cpus=2))
    assert fits_any(Compute(cpus=2), [room])
    room.take(Need(1.0, 0.0))
    assert not fits_any(Compute(cpus=2), [room])
    assert fits_any(Compute(cpus=1), [room])


def test_equal_computes_have_equal_shapes() -> None:
    a = Compute("a100:2", cpus="8+").model_dump(mode="json")
    b = Compute(gpu="a100:2", cpus=8).model_dump(mode="json")
    assert shape_of(a) == shape_of(b)
    assert shape_of(a) != shape_of(Compute("a100:1").model_dump(mode="json"))


def test_a_launched_node_serves_only_its_project() -> None:
    launched = replace(node("launched", gpus=8), reserved_for="a")
    rooms = [Room.whole(launched)]
    queues = {"b": [job("b1", "b", 0.0, gpu="a100-80gb:8")],
              "a": [job("a1", "a", 1.0, gpu="a100-80gb:8")]}
    found = plan(queues, rooms, now=NOW)
    assert [(p.job.id, p.node_id) for p in found.placements] == [("a1", "launched")]
    assert found.unfit == set()  # the shape fits: only b's project lacks a node for it
    assert found.unfit_for == {(queues["b"][0].shape, "b")}
