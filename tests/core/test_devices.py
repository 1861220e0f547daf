"""A node's devices, what attempts hold, and which devices a new attempt gets (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bourse.agent.probe import parse_csv, parse_table
from bourse.agent.probe.gpus import merge_table
from bourse.core.devices import (
    Device,
    choose,
    free_devices,
    groups,
    held,
    node_devices,
)
from bourse.protocol.common import GpuInfo, MigInstance

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
U = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"


def a100(index: int, uuid: str | None = None, **fields: object) -> GpuInfo:
    return GpuInfo(model="a100-40gb", name="NVIDIA A100-SXM4-40GB", memory_mib=40960,
                   index=index, uuid=uuid, **fields)


def mig(gi: int, ci: int, memory: int, uuid: str | None = None,
        profile: str | None = None) -> MigInstance:
    return MigInstance(gpu_instance_id=gi, compute_instance_id=ci, memory_mib=memory,
                       uuid=uuid, profile=profile)


def test_whole_gpus_are_addressed_by_uuid_else_by_index() -> None:
    devices = node_devices([a100(0, U), a100(1), GpuInfo(name="x", memory_mib=1)])
    assert [d.address for d in devices] == [U, "1", "2"]  # no index: its place in the list
    assert [d.kind for d in devices] == [("a100-40gb", None)] * 2 + [(None, None)]


def test_a_mig_gpu_is_its_slices_and_never_the_whole_board() -> None:
    gpu = a100(0, U, mig_enabled=True, mig_instances=[
        mig(1, 0, 20096, uuid="MIG-11111111-2222-3333-4444-555555555555", profile="3g.20gb"),
        mig(2, 0, 9856), mig(2, 1, 9856)])
    devices = node_devices([gpu])
    assert [(d.address, d.slice, d.memory_mib) for d in devices] == [
        ("MIG-11111111-2222-3333-4444-555555555555", "3g.20gb", 20096),
        (f"MIG-{U}/2/0", "5GB", 4928),  # two compute instances share their GI's memory
        (f"MIG-{U}/2/1", "5GB", 4928)]
    assert devices[0].weight == pytest.approx(20096 / 40960, abs=1e-4)


def test_a_mig_device_that_cannot_be_named_is_not_a_device() -> None:
    gpu = a100(0, None, mig_enabled=True, mig_instances=[mig(1, 0, 20096)])
    assert node_devices([gpu]) == []  # no MIG UUID and no GPU UUID: CUDA cannot address it


def test_a_mig_gpu_without_instances_stays_a_gpu() -> None:
    assert [d.slice for d in node_devices([a100(0, U, mig_enabled=True)])] == [None]


def test_the_real_h200_mig_capture_gives_five_slices() -> None:
    """csv-h200-drv590.csv (the board's UUID, masked by the capture script) completed by
    table-h200-mig-drv590.txt (its MIG devices, no UUIDs): the two captures of the same H200
    and driver the probe combines."""
    reading = merge_table(parse_csv((FIXTURES / "csv-h200-drv590.csv").read_text()),
                          parse_table((FIXTURES / "table-h200-mig-drv590.txt").read_text()))
    devices = node_devices(reading.gpus)
    zero = "GPU-00000000-0000-0000-0000-000000000000"
    assert [(d.address, d.memory_mib) for d in devices] == [
        (f"MIG-{zero}/2/0", 35712), (f"MIG-{zero}/2/1", 35712), (f"MIG-{zero}/3/0", 33280),
        (f"MIG-{zero}/9/0", 16384), (f"MIG-{zero}/10/0", 16384)]
    assert [len(g) for g in groups(devices)] == [2, 1, 2]
    assert {d.model for d in devices} == {"h200"}


def dev(address: str, index: int, sliced: str | None = None) -> Device:
    return Device(address, "a100-40gb", 40960, slice=sliced, gpu_index=index)


@pytest.mark.parametrize(("reservations", "left"), [
    ([], ["a", "b", "c", "d"]),
    ([{"gpus": 1, "gpu_uuids": ["b"]}], ["a", "c", "d"]),
    ([{"gpus": 2, "gpu_uuids": ["b", "d"]}, {"gpus": 0}], ["a", "c"]),
    ([{"gpus": 1.0}], ["b", "c", "d"]),  # placed before devices were named: the first free
    ([{"gpus": 1, "gpu_uuids": ["c"]}, {"gpus": 2}], ["d"]),
    ([{"gpus": 1, "gpu_uuids": ["gone"]}], ["a", "b", "c", "d"]),  # a device the node lost
])
def test_free_devices_are_those_no_reservation_holds(
        reservations: list[dict[str, object]], left: list[str]) -> None:
    devices = [dev(a, i) for i, a in enumerate("abcd")]
    assert [d.address for d in free_devices(devices, reservations)] == left


def test_held_reads_addresses_and_unnamed_counts() -> None:
    assert held({"gpus": 2.0, "gpu_uuids": ["x", "y"]}) == (["x", "y"], 0)
    assert held({"gpus": 2.0}) == ([], 2)
    assert held({"cpus": 1.0}) == ([], 0)


@pytest.mark.parametrize(("free", "count", "chosen"), [
    ("abcd", 2, "ab"),
    ("bd", 2, "bd"),  # fragmented: what is free, lowest first
    ("bd", 3, None),  # more than is free: nothing (the matcher explains why)
    ("", 1, None),
])
def test_whole_gpus_are_taken_lowest_index_first(free: str, count: int,
                                                 chosen: str | None) -> None:
    devices = [dev(a, "abcd".index(a)) for a in free]
    got = choose(devices, ("a100-40gb", None), count)
    assert (None if got is None else "".join(d.address for d in got)) == chosen


def test_slices_are_taken_from_the_gpu_already_most_used() -> None:
    # GPU 0 has three free slices, GPU 1 one (its others are held): take GPU 1's, so GPU 0
    # stays whole enough for a later layout
    free = [dev("s0a", 0, "1g.5gb"), dev("s0b", 0, "1g.5gb"), dev("s0c", 0, "1g.5gb"),
            dev("s1a", 1, "1g.5gb")]
    got = choose(free, ("a100-40gb", "1g.5gb"), 1)
    assert got is not None and [d.address for d in got] == ["s1a"]
    assert choose(free, ("a100-40gb", "2g.10gb"), 1) is None  # another kind is not taken
