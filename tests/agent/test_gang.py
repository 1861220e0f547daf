"""A gang's rendezvous on real sockets (loopback): rank 0 holds a free port until every member
has dialled, then frees it for the training process; who cannot meet says why."""

from __future__ import annotations

import asyncio
import socket

import pytest

from bourse.agent import gang
from bourse.protocol.agent import Gang

pytestmark = pytest.mark.anyio

ADDRESSES = ["127.0.0.1", "127.0.0.1", "127.0.0.1"]


def _member(rank: int, port: int | None = None, gpus: int = 0) -> Gang:
    return Gang(rank=rank, addresses=ADDRESSES, port=port, gpus_per_node=gpus)


async def test_every_member_meets_rank_0_and_the_port_is_free_afterwards() -> None:
    meeting = await gang.host(_member(0))
    assert not isinstance(meeting, str)
    joins = [asyncio.create_task(gang.join(_member(r, meeting.port), 10)) for r in (1, 2)]
    assert await meeting.gather(10) is None
    assert await asyncio.gather(*joins) == [None, None]
    with socket.socket() as sock:  # what torch's TCPStore does next, on the same port
        sock.bind(("127.0.0.1", meeting.port))
        sock.listen()


async def test_a_member_that_starts_before_rank_0_listens_keeps_dialling() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    early = asyncio.create_task(gang.join(Gang(rank=1, addresses=ADDRESSES[:2], port=port), 10))
    await asyncio.sleep(0.5)  # refused meanwhile
    server_gang = Gang(rank=0, addresses=ADDRESSES[:2])
    meeting = gang.Meeting(server_gang, await asyncio.start_server(
        lambda r, w: meeting._dialled(r, w),  # noqa: PLW0108  # meeting is bound later
        "127.0.0.1", port, reuse_address=True), port)
    assert await meeting.gather(10) is None
    assert await early is None


async def test_rank_0_names_the_members_that_never_came() -> None:
    meeting = await gang.host(_member(0))
    assert not isinstance(meeting, str)
    joined = asyncio.create_task(gang.join(_member(2, meeting.port), 5))
    error = await meeting.gather(0.5)
    assert error is not None
    assert f"rank 1 (127.0.0.1) did not reach rank 0 at 127.0.0.1:{meeting.port}" in error
    assert "rank 2" not in error
    await joined


async def test_a_member_that_cannot_reach_rank_0_says_which_pair_and_port() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = await gang.join(_member(1, port), 0.6)
    assert error is not None
    assert f"rank 1 (127.0.0.1) cannot reach rank 0 at 127.0.0.1:{port}" in error
    assert "refused" in error.lower()


async def test_rank_0_cannot_listen_on_an_address_it_does_not_have() -> None:
    error = await gang.host(Gang(rank=0, addresses=["192.0.2.1", "127.0.0.1"]))
    assert isinstance(error, str)
    assert "cannot listen on 192.0.2.1" in error


def test_the_environment_torchrun_and_lightning_read() -> None:
    env = gang.environment(_member(1, 29500, gpus=8), 29500)
    assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "NNODES",
                                "WORLD_SIZE", "GPUS_PER_NODE")} == {
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "NODE_RANK": "1", "NNODES": "3",
        "WORLD_SIZE": "24", "GPUS_PER_NODE": "8"}
    assert env["NODE_IPS"].split("\n") == ADDRESSES
    assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"] == "lo"


def test_a_cpu_gang_has_one_process_per_node_and_an_unknown_address_no_interface() -> None:
    env = gang.environment(Gang(rank=0, addresses=["192.0.2.1", "192.0.2.2"]), 1234)
    assert env["WORLD_SIZE"] == "2"
    assert "GLOO_SOCKET_IFNAME" not in env
    assert gang.interface_of("127.0.0.1") == "lo"


@pytest.mark.parametrize(("body", "message"), [
    ({"rank": 2, "addresses": ["10.0.0.1", "10.0.0.2"]}, "rank 2 of a gang of 2"),
    ({"rank": 1, "addresses": ["10.0.0.1", "10.0.0.2"]}, "needs its gang's port"),
    ({"rank": 0, "addresses": ["10.0.0.1", "node-b"]}, "is not an IP address"),
    ({"rank": 0, "addresses": ["10.0.0.1"]}, "at least 2"),
])
def test_a_bad_gang_is_refused_naming_what_is_wrong(body: dict[str, object],
                                                    message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Gang.model_validate(body)


def test_a_launcher_s_variables_in_the_agent_s_environment_never_reach_a_member() -> None:
    env = {"PATH": "/bin", "RANK": "3", "SLURM_NTASKS": "2", "PET_NNODES": "9",
           "TORCHELASTIC_RUN_ID": "x", "LOCAL_RANK": "1", "HOME": "/root"}
    assert gang.without_leaks(env) == {"PATH": "/bin", "HOME": "/root"}
