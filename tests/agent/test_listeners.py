"""A job's port is the job's own (issue 20): ``/proc`` parsed on captured text, the ownership
check on real processes listening on real ports, and the agent refusing a start whose port is
taken and a stream to a port some other process holds."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import Agent

from bourse.agent import listeners
from bourse.agent.listeners import (
    Listener,
    PortGuard,
    Proc,
    busy,
    family,
    foreign,
    parse_stat,
    parse_tcp,
    socket_inode,
)
from bourse.agent.spool import AttemptRecord, AttemptStatus
from bourse.agent.tunnel import NodeTunnel
from bourse.core.compute import Compute
from bourse.protocol.agent import RETRY_ELSEWHERE, StartJob
from bourse.protocol.common import JobSpec, Port, Wire
from bourse.protocol.stream import PortTarget, StreamClose, StreamData, StreamOpen, StreamOpened

pytestmark = pytest.mark.anyio

# /proc/net/tcp as captured on an x86-64 (little-endian) machine, lines 1-3 edited to port
# 8000 (one established, one on 10.0.0.5) and a garbage line added; tcp6 in the same format
# (this machine has no IPv6 listener to capture)
PROC_NET = Path(__file__).parents[1] / "fixtures" / "proc"
TCP = (PROC_NET / "net_tcp").read_text()
TCP6 = (PROC_NET / "net_tcp6").read_text()


def test_listening_sockets_are_read_from_proc_net_tcp() -> None:
    assert parse_tcp(TCP, byteorder="little") == [
        Listener(ipaddress.ip_address("127.0.0.1"), 35689, 135490),
        Listener(ipaddress.ip_address("0.0.0.0"), 8000, 82908),
        Listener(ipaddress.ip_address("10.0.0.5"), 8000, 82905),  # established line skipped
    ]
    found = parse_tcp(TCP6, v6=True, byteorder="little")
    assert [(s.address, s.port, s.inode) for s in found] == [
        (ipaddress.ip_address(a), p, i)
        for a, p, i in [("::", 8000, 4242), ("::1", 8001, 4243), ("::ffff:127.0.0.1", 8002, 4244)]]
    assert [s.reaches_loopback for s in found] == [True, False, True]
    big = "h\n 0: 7F000001:1F40 00000000:0000 0A 0:0 0:0 0 0 0 77\n"
    assert parse_tcp(big, byteorder="big")[0].address == ipaddress.ip_address("127.0.0.1")


def test_only_what_a_loopback_connection_reaches_counts() -> None:
    mine = [s for s in parse_tcp(TCP, byteorder="little") if s.port == 8000]
    assert [s.reaches_loopback for s in mine] == [True, False]  # 0.0.0.0 yes, 10.0.0.5 no


def test_a_stat_line_with_an_awkward_name() -> None:
    line = "4242 (my (odd) server) S 17 4242 4240 0 -1 4194560 1 0 0 0"
    assert parse_stat(4242, line) == Proc(4242, "my (odd) server", ppid=17, session=4240)
    with pytest.raises(ValueError):
        parse_stat(1, "nonsense")


@pytest.mark.parametrize(("link", "inode"), [
    ("socket:[135490]", 135490), ("pipe:[12]", None), ("/dev/null", None),
    ("socket:[x]", None)])
def test_socket_links(link: str, inode: int | None) -> None:
    assert socket_inode(link) == inode


def test_an_attempts_family_is_its_session_and_descendants() -> None:
    procs = [Proc(10, "sh", 1, 10), Proc(11, "python", 10, 10),
             Proc(12, "daemon", 1, 10),         # reparented, still in the session
             Proc(13, "worker", 12, 13),        # its own session, a descendant
             Proc(20, "other", 1, 20), Proc(21, "child", 20, 20)]
    assert family(procs, 10) == {10, 11, 12, 13}
    assert family(procs, 20) == {20, 21}
    assert family(procs, 99) == {99}


# --- real processes on real ports -----------------------------------------------------------

SERVE = ("import socket, sys, time\n"
         "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
         "print(s.getsockname()[1], flush=True)\n"
         "while True:\n"
         "    c, _ = s.accept(); c.sendall(b'mine'); c.close()\n")


class Server:
    """A listening python under ``sh`` (not exec'd: the listener is the session leader's
    child), in a session of its own like a job under its shim."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["sh", "-c", f'{sys.executable} -c "$0"; :', SERVE],
                                     stdout=subprocess.PIPE, start_new_session=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    @property
    def listener_pid(self) -> int:
        kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        return int(kids.split()[0])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def server() -> Iterator[Server]:
    served = Server()
    yield served
    served.stop()


@pytest.fixture
def stranger() -> Iterator[int]:
    """Another attempt's shim: a process in a session of its own, holding no socket."""
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_port_is_its_owners_and_nobody_elses(server: Server, stranger: int) -> None:
    assert foreign(server.port, server.proc.pid)[0] is None
    why, held = foreign(server.port, stranger)
    assert why is not None and held == ()
    mine = foreign(server.port, server.proc.pid)[1]
    assert [pid for pid, _fd, _inode in mine] == [server.listener_pid]
    assert f"port {server.port}" in why
    assert f"pid {server.listener_pid} (python" in why


def test_a_taken_port_is_busy_and_a_free_one_is_not(server: Server) -> None:
    with socket.socket() as s:  # bound, never listened: nothing answers there
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
        assert busy([free]) is None
        why = busy([free, server.port])
    assert why is not None and f"port {server.port} is already in use" in why
    assert f"pid {server.listener_pid}" in why and "another node" in why


async def test_the_guard_checks_in_full_once_while_the_socket_lives(
        server: Server, stranger: int, monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[int] = []
    real = listeners.foreign

    def counted(port: int, root: int,
                proc: Path = listeners.PROC) -> tuple[str | None, listeners.Held]:
        walks.append(root)
        return real(port, root, proc)

    monkeypatch.setattr(listeners, "foreign", counted)
    now = [0.0]
    guard = PortGuard(recheck_s=10, clock=lambda: now[0])
    mine = server.proc.pid
    for _ in range(3):
        assert await guard.refusal("j", 1, server.port, mine) is None
    assert walks == [mine]  # then a readlink of the socket's descriptor
    now[0] = 10.0
    assert await guard.refusal("j", 1, server.port, mine) is None
    assert walks == [mine, mine]  # in full again, every recheck_s
    for _ in range(2):  # a refusal is never remembered
        assert await guard.refusal("k", 1, server.port, stranger) is not None
    assert walks == [mine, mine, stranger, stranger]
    server.stop()  # its socket closed: checked in full (nothing listens now)
    for _ in range(500):  # SIGKILL is not instant
        if not listeners.listeners([server.port]):
            break
        await asyncio.sleep(0.01)
    assert await guard.refusal("j", 1, server.port, mine) is None
    assert walks[-1] == mine and len(walks) == 5


# --- the agent --------------------------------------------------------------------------------

async def test_a_start_whose_port_is_taken_fails_before_its_command_runs(
        agent: Agent, server: Server) -> None:
    await agent.start("j", ["touch", "ran"], ports=[server.port])
    agent.coordinator.poll()
    assert [e["kind"] for e in agent.coordinator.events("j")] == ["accepted", "start_failed"]
    data = agent.coordinator.event("j", "start_failed")["data"]  # type: ignore[index]
    assert data[RETRY_ELSEWHERE] is True
    assert f"port {server.port} is already in use" in data["reason"]
    assert f"pid {server.listener_pid}" in data["reason"]
    assert not (agent.dir("j").work / "ran").exists()


async def test_a_start_whose_port_is_free_runs(agent: Agent) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    await agent.start("j", ["true"], ports=[port])
    await agent.coordinator.until(agent.coordinator.exited("j"))
    assert agent.coordinator.event("j", "start_failed") is None


def _record(port: int, pid: int, image: str | None = None) -> AttemptRecord:
    spec = JobSpec(command=["x"], ports=[Port(number=port)], compute=Compute(image=image))
    start = StartJob(job_id="j", attempt=1, spec=spec)
    return AttemptRecord(job_id="j", attempt=1, spec=start.model_dump_json(), dir="/nowhere",
                         state=AttemptStatus.RUNNING, created=time.time(), pid=pid)


async def _open(record: AttemptRecord, port: int) -> list[Wire]:
    sent: list[Wire] = []
    tunnel = NodeTunnel(sent.append, lambda job, attempt: record)
    tunnel.handle(StreamOpen(stream=1, job_id="j", attempt=1, target=PortTarget(port=port)))
    for _ in range(500):
        if any(isinstance(m, (StreamClose, StreamData)) for m in sent):
            break
        await asyncio.sleep(0.01)
    await tunnel.close()
    return sent


async def test_a_stream_reaches_the_attempts_own_server(server: Server) -> None:
    sent = await _open(_record(server.port, server.proc.pid), server.port)
    assert isinstance(sent[0], StreamOpened)
    assert any(isinstance(m, StreamData) for m in sent)


async def test_a_stream_to_a_port_another_process_holds_is_refused(
        server: Server, stranger: int) -> None:
    sent = await _open(_record(server.port, stranger), server.port)
    assert not any(isinstance(m, (StreamOpened, StreamData)) for m in sent)
    closed = next(m for m in sent if isinstance(m, StreamClose))
    assert closed.error is not None and "not by the job" in closed.error
    assert f"pid {server.listener_pid}" in closed.error


async def test_a_stream_to_a_containers_port_is_refused(server: Server) -> None:
    sent = await _open(_record(server.port, server.proc.pid, image="python:3.12"),
                       server.port)
    assert len(sent) == 1 and isinstance(sent[0], StreamClose)
    assert "container" in (sent[0].error or "")
