"""Attempts fence themselves: cut off from the coordinator for nearly its loss window — their
agent alive but unheard, or dead — they stop (SIGTERM, then SIGKILL), with real shims and real
processes; renewed, they run on; without a lease (an older coordinator), nothing changes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from agent_harness import Agent

from bourse.agent import shim
from bourse.agent.fence import FENCED_REASON, Lease

pytestmark = pytest.mark.anyio
WINDOW_S = 3.0  # the fence checks every 0.2 s, TERM grace 0.25 s; the lease lasts 2.4 s


def fenced_agent(agent_factory: Callable[..., Agent], tmp_path: Path) -> tuple[Agent, Lease]:
    lease = Lease(tmp_path / "lease")
    lease.arm(WINDOW_S, time.time())
    return agent_factory(lease=lease), lease


def job_alive(agent: Agent, job_id: str) -> bool:
    record = agent.spool.get_attempt(job_id, 1)
    assert record is not None and record.pid is not None
    return shim.is_alive(record.pid, record.proc_start)


async def test_an_attempt_whose_lease_runs_out_stops_itself(
        agent_factory: Callable[..., Agent], tmp_path: Path) -> None:
    agent, _ = fenced_agent(agent_factory, tmp_path)
    await agent.start("j", ["sleep", "60"])
    c = agent.coordinator
    await c.until(c.exited("j"), timeout=20)
    exited = c.event("j", "exited")
    assert exited is not None
    data = exited["data"]
    assert (data["fenced"], data["reason"]) == (True, FENCED_REASON)
    assert data["exit_code"] == 143  # SIGTERM: the fence's first signal
    assert not job_alive(agent, "j")


async def test_a_job_that_ignores_sigterm_is_killed(agent_factory: Callable[..., Agent],
                                                    tmp_path: Path) -> None:
    agent, _ = fenced_agent(agent_factory, tmp_path)
    await agent.start("j", ["sh", "-c", "trap '' TERM; sleep 60"])
    c = agent.coordinator
    await c.until(c.exited("j"), timeout=20)
    exited = c.event("j", "exited")
    assert exited is not None and exited["data"]["fenced"] is True
    assert not job_alive(agent, "j")


async def test_a_renewed_lease_keeps_the_attempt_running(
        agent_factory: Callable[..., Agent], tmp_path: Path) -> None:
    """Renewed every half second, as acknowledged heartbeats would: the job runs to its end,
    past several whole leases."""
    agent, lease = fenced_agent(agent_factory, tmp_path)
    await agent.start("j", ["sh", "-c", "sleep 6; echo done"])
    c = agent.coordinator
    deadline = time.monotonic() + 30
    while not c.exited("j")() and time.monotonic() < deadline:
        lease.renew(time.time())
        c.poll()
        await asyncio.sleep(0.5)
    exited = c.event("j", "exited")
    assert exited is not None, "the job never ended"
    assert exited["data"]["exit_code"] == 0 and "fenced" not in exited["data"]
    assert c.stream("j", "stdout") == b"done\n"


async def test_the_orphan_of_a_dead_agent_stops_itself(
        agent_factory: Callable[..., Agent], tmp_path: Path) -> None:
    """The agent dies and nobody renews the lease: the job stops by itself within the window,
    and the agent, back later, reports why."""
    agent, _ = fenced_agent(agent_factory, tmp_path)
    await agent.start("j", ["sleep", "60"])
    record = agent.spool.get_attempt("j", 1)
    assert record is not None and record.pid is not None
    await agent.stop()
    deadline = time.monotonic() + 20
    while shim.is_alive(record.pid, record.proc_start) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not shim.is_alive(record.pid, record.proc_start), "the orphan kept running"
    await agent.restart()
    c = agent.coordinator
    await c.until(c.exited("j"))
    exited = c.event("j", "exited")
    assert exited is not None and exited["data"]["fenced"] is True


async def test_without_a_lease_nothing_is_fenced(agent_factory: Callable[..., Agent],
                                                 tmp_path: Path) -> None:
    lease = Lease(tmp_path / "lease")
    lease.arm(WINDOW_S, time.time() - 60)  # long run out...
    lease.arm(None, time.time())  # ...then a coordinator that does not fence
    assert not (tmp_path / "lease").exists()
    agent = agent_factory(lease=lease)
    await agent.start("j", ["sh", "-c", "sleep 3.5; exit 4"])
    c = agent.coordinator
    await c.until(c.exited("j"), timeout=20)
    exited = c.event("j", "exited")
    assert exited is not None
    assert exited["data"]["exit_code"] == 4 and "fenced" not in exited["data"]


async def test_a_stale_cancel_after_the_exit_keeps_the_exit_report(agent: Agent) -> None:
    """The coordinator gave the attempt up, then (reconnected) tells the node to drop it: its
    exit, already spooled, still goes out — that is how a late success is heard."""
    c = agent.coordinator
    c.ack = False
    await agent.start("j", ["true"])
    await c.until(c.exited("j"))
    c.reconnect(agent.spool)  # nothing acknowledged yet: read again after the cancel
    c.bodies.clear()
    await agent.runtime.cancel("j", 1, grace_s=0, reason="stale attempt", stale=True)
    c.poll()
    exited = c.event("j", "exited")
    assert exited is not None and exited["data"]["exit_code"] == 0
