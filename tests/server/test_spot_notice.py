"""A spot node's own interruption notice on the coordinator: the optional ``interruption``
message reclaims the node as `bourse nodes reclaim` does, once per notice. First with fake
agents (the protocol), then with a real agent over the in-memory channel watching a local
IMDSv2 (tests/agent/imds_stub.py) while a real job runs: reachable, unreachable when the
notice comes, and a coordinator that does not take the message."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, capabilities, place_job, until

from bourse.agent import credentials
from bourse.agent.daemon import Agent, AgentConfig, Spot
from bourse.channel import MemoryChannel, memory_pair
from bourse.protocol.agent import Interruption

TESTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(TESTS / "agent"), str(TESTS / "e2e")]
from harness import kill_jobs  # noqa: E402
from imds_stub import ImdsStub  # noqa: E402

pytestmark = pytest.mark.anyio
SPOT = {"cpus": 1, "spot": "only"}
# prints, then runs until SIGTERM, which it answers as a checkpointing job does
TRAPPING = ("trap 'echo TERM; exit 143' TERM; echo started; "
            "while :; do sleep 0.05; done")
STUBBORN = "trap 'echo TERM' TERM; echo started; while :; do sleep 0.05; done"  # till SIGKILL


@pytest.fixture
async def node(live: Live) -> AsyncIterator[Callable[..., Any]]:
    made: list[FakeAgent] = []

    async def make(name: str, *, spot: bool = True) -> FakeAgent:
        node_id, credential = await live.exchange.enroll(name)
        caps = capabilities(cpus=2).model_copy(update={
            "interruptible": spot, "spot_price": 0.05 if spot else None})
        agent = FakeAgent(live.ws_url, node_id, credential, caps, name=name)
        made.append(agent)
        welcome = await agent.connect()
        assert "interruption" in welcome["accepts"]
        return agent

    yield make
    for agent in made:
        await agent.close()


async def test_an_interruption_reclaims_the_node_once(live: Live,
                                                      node: Callable[..., Any]) -> None:
    exchange = live.exchange
    a = await node("a")
    job_id, number = await place_job(exchange, a, compute=SPOT)
    await a.event(job_id, number, "started", pid=1)
    notice = Interruption(notice_s=110, action="terminate", reason="spot notice: terminate")
    await a.send(notice)  # acknowledged like any message
    preempt = await a.expect("preempt")
    assert (preempt["notice_s"], preempt["reason"]) == (110, "spot notice: terminate")
    assert (await exchange.node_row(a.node_id)).state == "reclaimed"
    assert (await exchange.attempt_row(job_id, number)).preempt_at is not None

    await a.send(notice)  # said again (a new connection says it again): nothing more
    await a.barrier()
    assert a.received("preempt") == []
    await a.event(job_id, number, "exited", exit_code=143, signalled=True)
    detail = await exchange.job(job_id)
    assert detail["attempts"][0]["state"] == "PREEMPTED" and detail["state"] == "PENDING"
    events = [e for e in await exchange.events(job_id) if e["kind"] == "preemption"]
    assert len(events) == 1 and "110 s notice (spot notice: terminate)" in events[0]["message"]


async def test_the_attempt_is_preempted_when_the_node_stopped_it_not_when_the_coordinator_heard(
        live: Live, node: Callable[..., Any]) -> None:
    """The agent stops its jobs as it reads the notice and tells the coordinator; a job that
    saved in between saved after the preemption (no work lost), however late the message came.
    An agent's time is believed at most NOTICE_CLOCK_S back, and never ahead of the
    coordinator's."""
    from bourse.server.services.reclaim import NOTICE_CLOCK_S, notice_time

    exchange = live.exchange
    a = await node("a")
    job_id, number = await place_job(exchange, a, compute=SPOT)
    await a.event(job_id, number, "started", pid=1)
    exchange.clock.advance(30)
    heard = exchange.clock()
    await a.send(Interruption(notice_s=110, stopped_at=heard - 2.5))
    await a.expect("preempt")
    assert (await exchange.attempt_row(job_id, number)).preempt_at == pytest.approx(heard - 2.5)
    assert notice_time(None, 100.0) == 100.0
    assert notice_time(130.0, 100.0) == 100.0  # never ahead of the coordinator
    assert notice_time(0.0, 100.0) == 100.0 - NOTICE_CLOCK_S  # nor too far back


async def test_a_notice_before_the_jobs_end_in_one_batch_still_preempts(
        live: Live, node: Callable[..., Any]) -> None:
    exchange = live.exchange
    a = await node("a")
    job_id, number = await place_job(exchange, a, compute=SPOT)
    await a.event(job_id, number, "started", pid=1)
    frames = [a.frame(Interruption(notice_s=5)),
              a.frame(a.job_event(job_id, number, "exited", exit_code=143, signalled=True))]
    for text in frames:  # as a reconnected agent sends them: at once, one batch
        await a.send_raw(text)
    await a.wait_acked(*(json.loads(f)["id"] for f in frames))
    assert (await exchange.job(job_id))["attempts"][0]["state"] == "PREEMPTED"


async def test_a_node_not_sold_as_spot_is_not_reclaimed_by_its_agent(
        live: Live, node: Callable[..., Any]) -> None:
    exchange = live.exchange
    a = await node("on-demand", spot=False)
    await a.send(Interruption(notice_s=30))  # acknowledged, not replayed forever
    await a.barrier()
    assert a.received("preempt") == []
    assert (await exchange.node_row(a.node_id)).state == "online"


# --- a real agent, over the in-memory channel -------------------------------------------------

class Link:
    """The agent's way to the coordinator: cut (dialling fails), and what crossed it."""

    def __init__(self, exchange: Exchange, node_id: str, *, accepts_notice: bool = True) -> None:
        self.exchange, self.node_id, self.accepts_notice = exchange, node_id, accepts_notice
        self.cut = False
        self.sent: list[str] = []  # the types the agent sent
        self.received: list[str] = []  # and was sent
        self.ends: list[MemoryChannel] = []  # the coordinator's ends
        self.served: list[asyncio.Task[None]] = []

    @contextlib.asynccontextmanager
    async def dial(self) -> AsyncIterator[Any]:
        if self.cut:
            raise OSError("network unreachable")
        coordinator_end, agent_end = memory_pair()
        self.ends.append(coordinator_end)
        self.served.append(asyncio.create_task(
            self.exchange.state.hub.serve(coordinator_end, self.node_id)))
        try:
            yield Watched(agent_end, self)
        finally:
            await agent_end.close()

    async def drop(self) -> None:
        self.cut = True
        await self.ends[-1].close()


class Watched:
    """The agent's end: records what it sends; hides ``interruption`` from the welcome of a
    coordinator that does not take it (an older one)."""

    def __init__(self, inner: MemoryChannel, link: Link) -> None:
        self.inner, self.link = inner, link

    async def send(self, text: str) -> None:
        self.link.sent.append(json.loads(text)["type"])
        await self.inner.send(text)

    async def receive(self) -> str:
        text = await self.inner.receive()
        frame = json.loads(text)
        self.link.received.append(frame["type"])
        if frame["type"] == "welcome" and not self.link.accepts_notice:
            frame["body"]["accepts"].remove("interruption")
            return json.dumps(frame)
        return text

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self.inner.close(code, reason)


@contextlib.asynccontextmanager
async def spot_agent(exchange: Exchange, tmp_path: Path, stub: ImdsStub,
                     **link_options: Any) -> AsyncIterator[tuple[Agent, Link]]:
    node_id, secret = await exchange.enroll("spot")
    work = tmp_path / "agent"
    credentials.save(work, credentials.NodeCredential("memory://", node_id, secret))
    link = Link(exchange, node_id, **link_options)
    agent = Agent(AgentConfig(
        server="memory://", work_dir=work, name="spot", keep_alive_s=1.0, cpus=2,
        storage_mb=1, metrics_interval_s=0,
        spot=Spot(0.05, notice_url=stub.url, notice_every_s=0.05)), dial=link.dial)
    running = asyncio.create_task(agent.run())
    try:
        await until(lambda: _verified(exchange, node_id), timeout=60)
        yield agent, link
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        kill_jobs(work)  # a job a failed test left running
        for task in link.served:
            await task


@pytest.fixture
def stub() -> Iterator[ImdsStub]:
    made = ImdsStub()
    yield made
    made.close()


async def running_job(exchange: Exchange, agent: Agent) -> str:
    job = await exchange.submit(command=["sh", "-c", TRAPPING], compute=SPOT)
    await exchange.tick()
    await until(lambda: _stdout_has(agent, job["id"], b"started"), timeout=60)
    await until(lambda: _running(exchange, job["id"]), timeout=30)  # and the coordinator knows
    return str(job["id"])


async def test_a_notice_preempts_the_running_job_through_the_coordinator(
        exchange: Exchange, tmp_path: Path, stub: ImdsStub) -> None:
    async with spot_agent(exchange, tmp_path, stub) as (agent, link):
        job_id = await running_job(exchange, agent)
        stub.notice()
        await until(lambda: _attempt_ended(exchange, job_id), timeout=30)
        detail = await exchange.job(job_id)
        first = detail["attempts"][0]
        assert (first["state"], first["exit_code"]) == ("PREEMPTED", 143)
        assert first["preempted_at"] is not None and detail["resume"] is True
        assert (await exchange.node_row(agent.cred.node_id if agent.cred else "")).state \
            == "reclaimed"
        assert link.sent.count("interruption") == 1
        assert _stdout_has_sync(agent, job_id, b"TERM")


async def test_a_notice_while_the_coordinator_is_unreachable(
        exchange: Exchange, tmp_path: Path, stub: ImdsStub) -> None:
    async with spot_agent(exchange, tmp_path, stub) as (agent, link):
        job_id = await running_job(exchange, agent)
        await link.drop()
        stub.notice()  # the machine goes anyway: the agent stops its job by itself
        await until(lambda: _stdout_has(agent, job_id, b"TERM"), timeout=30)
        assert (await exchange.job(job_id))["state"] == "RUNNING"  # not heard yet
        link.cut = False
        await until(lambda: _attempt_ended(exchange, job_id), timeout=30)
        first = (await exchange.job(job_id))["attempts"][0]
        assert first["state"] == "PREEMPTED"  # the notice came before the job's end
        after_hello = link.sent[link.sent.index("hello", 1):]
        assert after_hello.index("interruption") < after_hello.index("job_event")


async def test_a_coordinator_that_does_not_take_notices_is_never_sent_one(
        exchange: Exchange, tmp_path: Path, stub: ImdsStub) -> None:
    async with spot_agent(exchange, tmp_path, stub, accepts_notice=False) as (agent, link):
        job_id = await running_job(exchange, agent)
        stub.notice()
        await until(lambda: _attempt_ended(exchange, job_id), timeout=30)
        assert _stdout_has_sync(agent, job_id, b"TERM")  # stopped within the notice anyway
        assert "interruption" not in link.sent
        assert (await exchange.node_row(agent.cred.node_id if agent.cred else "")).state \
            == "online"


async def test_the_coordinators_preempt_does_not_signal_the_job_again(
        exchange: Exchange, tmp_path: Path, stub: ImdsStub) -> None:
    async with spot_agent(exchange, tmp_path, stub) as (agent, link):
        job = await exchange.submit(command=["sh", "-c", STUBBORN], compute=SPOT)
        await exchange.tick()
        await until(lambda: _stdout_has(agent, job["id"], b"started"), timeout=60)
        await until(lambda: _running(exchange, job["id"]), timeout=30)
        stub.notice(at=time.time() + 3)  # SIGTERM now, SIGKILL in 3 s
        await until(lambda: _attempt_ended(exchange, job["id"]), timeout=30)
        assert "preempt" in link.received  # the coordinator's came back, within the notice
        stdout = agent.work_dir / "jobs" / job["id"] / "1" / "logs" / "stdout"
        assert stdout.read_bytes().count(b"TERM") == 1  # the agent's own, not a second one
        assert (await exchange.job(job["id"]))["attempts"][0]["state"] == "PREEMPTED"


async def _verified(exchange: Exchange, node_id: str) -> bool:
    return exchange.state.hub.connected(node_id) and (
        await exchange.node_row(node_id)).verification_status in ("pass", "warn")


async def _running(exchange: Exchange, job_id: str) -> bool:
    return bool((await exchange.job(job_id))["state"] == "RUNNING")


async def _attempt_ended(exchange: Exchange, job_id: str) -> bool:
    attempts = (await exchange.job(job_id))["attempts"]
    return bool(attempts) and attempts[0]["ended_at"] is not None


async def _stdout_has(agent: Agent, job_id: str, text: bytes) -> bool:
    return _stdout_has_sync(agent, job_id, text)


def _stdout_has_sync(agent: Agent, job_id: str, text: bytes) -> bool:
    path = agent.work_dir / "jobs" / job_id / "1" / "logs" / "stdout"
    return path.exists() and text in path.read_bytes()
