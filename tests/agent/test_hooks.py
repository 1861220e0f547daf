"""The runtime's hooks (what the data plane plugs in): environment from ``prepare``, its
failures and cancellation, ``finish`` data on ``exited`` (also after an agent restart), and
``release`` once the attempt is over."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_harness import Agent

from bourse.agent.attempt import StartError
from bourse.agent.hooks import AttemptHooks, Emit
from bourse.agent.shim import AttemptDir
from bourse.protocol.agent import StartJob

pytestmark = pytest.mark.anyio


class Hooks(AttemptHooks):
    def __init__(self, *, fail: BaseException | None = None, gate: bool = False) -> None:
        self.fail, self.gate = fail, asyncio.Event() if gate else None
        self.released: list[tuple[str, int]] = []
        self.finished: list[dict[str, Any]] = []
        self.prepared = asyncio.Event()

    async def prepare(self, msg: StartJob, adir: AttemptDir, emit: Emit) -> dict[str, str]:
        emit("preparing", {"step": "inputs", "text": "inputs: 1 B / 2 B, 1 B/s"})
        self.prepared.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return {"BOURSE_INPUT_DATA": str(adir.root / "inputs" / "data"), "FROM": "hook"}

    async def finish(self, msg: StartJob, adir: AttemptDir, exit_info: dict[str, Any],
                     emit: Emit) -> dict[str, Any]:
        self.finished.append(exit_info)
        return {"outputs": {"model": "s3://results/m/"}}

    def release(self, job_id: str, attempt: int, root: Path) -> None:
        self.released.append((job_id, attempt))


def kinds(agent: Agent, job_id: str = "j") -> list[str]:
    return [e["kind"] for e in agent.coordinator.events(job_id)]


async def test_prepare_adds_environment_and_finish_adds_exit_data(
        agent_factory: Callable[..., Agent]) -> None:
    hooks = Hooks()
    agent = agent_factory(hooks=hooks)
    await agent.start("j", ["sh", "-c", "echo $FROM $BOURSE_INPUT_DATA"],
                      spec_env={"FROM": "spec"})
    c = agent.coordinator
    await c.until(c.exited("j"))
    assert kinds(agent) == ["accepted", "preparing", "started", "exited"]
    assert c.stream("j", "stdout") == f"hook {agent.dir('j').root}/inputs/data\n".encode()
    exited = c.event("j", "exited")
    assert exited is not None
    assert exited["data"]["outputs"] == {"model": "s3://results/m/"}
    assert hooks.finished[0]["exit_code"] == 0
    assert hooks.released == [("j", 1)]


@pytest.mark.parametrize(("error", "reason"), [
    (StartError("inputs: access denied to s3://x/", hint="ask for access"),
     "inputs: access denied to s3://x/ (ask for access)"),
    (RuntimeError("boom"), "preparing the job failed: boom"),
])
async def test_a_failing_prepare_fails_the_start(agent_factory: Callable[..., Agent],
                                                 error: BaseException, reason: str) -> None:
    hooks = Hooks(fail=error)
    agent = agent_factory(hooks=hooks)
    await agent.start("j", ["touch", "ran"])
    agent.coordinator.poll()
    assert kinds(agent) == ["accepted", "preparing", "start_failed"]
    assert agent.coordinator.event("j", "start_failed")["data"]["reason"] == reason  # type: ignore[index]
    assert hooks.released == [("j", 1)]
    assert not (agent.dir("j").work / "ran").exists()


@pytest.mark.parametrize("stale", [False, True])
async def test_cancel_stops_a_prepare(agent_factory: Callable[..., Agent], stale: bool) -> None:
    hooks = Hooks(gate=True)  # a prefetch that would never end
    agent = agent_factory(hooks=hooks)
    start = asyncio.create_task(agent.start("j", ["touch", "ran"]))
    await hooks.prepared.wait()
    await agent.runtime.cancel("j", 1, reason="changed my mind", stale=stale)
    await asyncio.wait_for(start, 5)
    agent.coordinator.poll()
    assert kinds(agent) == ([] if stale else ["accepted", "preparing", "exited"])
    assert hooks.released == [("j", 1)]
    assert not (agent.dir("j").work / "ran").exists()


async def test_finish_runs_after_a_restart(agent_factory: Callable[..., Agent]) -> None:
    hooks = Hooks()
    agent = agent_factory(hooks=hooks)
    await agent.start("j", ["sh", "-c", "while [ ! -f go ]; do sleep 0.01; done"])
    await agent.stop()
    (agent.dir("j").work / "go").touch()
    await agent.restart()
    c = agent.coordinator
    await c.until(c.exited("j"))
    assert c.event("j", "exited")["data"]["outputs"] == {"model": "s3://results/m/"}  # type: ignore[index]
    assert len(hooks.finished) == 1 and hooks.released == [("j", 1)]
