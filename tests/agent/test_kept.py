"""The node keeps a job's ``lightning_logs/`` in the store however the attempt ended (real
jobs under the runtime with the data plane's hooks, a ``file://`` store): each attempt's below
its own folder, listed in ``exited``'s ``kept``; links in it are not followed; without a
place in the store the timeline says it was not kept."""

from __future__ import annotations

import io
import os
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from agent_harness import Agent

from bourse.agent.data import NodeData
from bourse.agent.kept import NO_PLACE, NO_STORE
from bourse.protocol.agent import DataPlan, StoreAccess

pytestmark = pytest.mark.anyio
MAKE_LOGS = ("mkdir -p lightning_logs/version_0/checkpoints && echo step > "
             "lightning_logs/version_0/checkpoints/epoch=0-step=4.ckpt && echo ev > "
             "lightning_logs/version_0/events.out.tfevents && ")


def plan(store: Path, **fields: object) -> DataPlan:
    access = StoreAccess(access_key_id="AKTEST", secret_access_key="not-a-secret",
                         expires_at=time.time() + 3600)
    return DataPlan(store=access, **{"lightning_logs": store.as_uri() + "/jobs/j/lightning_logs/",
                                     **fields})


@pytest.fixture
def agent(agent_factory: Callable[..., Agent], tmp_path: Path) -> Agent:
    return agent_factory(hooks=NodeData(tmp_path / "cache", 1 << 30))


def files(top: Path) -> list[str]:
    return sorted(str(p.relative_to(top)) for p in top.rglob("*") if p.is_file())


def texts(agent: Agent, attempt: int = 1) -> list[str]:
    return [e["data"].get("text", "") for e in agent.coordinator.events("j", attempt)]


@pytest.mark.parametrize("exit_code", [0, 3])
async def test_lightning_logs_are_kept_however_the_attempt_ends(
        agent: Agent, tmp_path: Path, exit_code: int) -> None:
    store = tmp_path / "store"
    await agent.start("j", ["sh", "-c", MAKE_LOGS + f"exit {exit_code}"], data=plan(store))
    c = agent.coordinator
    await c.until(c.exited("j"))
    exited = c.event("j", "exited")
    assert exited is not None and exited["data"]["exit_code"] == exit_code
    assert exited["data"]["kept"] == {"lightning_logs": store.as_uri() + "/jobs/j/lightning_logs/"}
    assert files(store / "jobs" / "j" / "lightning_logs") == [
        "1/version_0/checkpoints/epoch=0-step=4.ckpt", "1/version_0/events.out.tfevents"]
    assert any("lightning_logs/ kept: 2 file(s)" in t for t in texts(agent)), texts(agent)


async def test_each_attempt_keeps_its_own(agent: Agent, tmp_path: Path) -> None:
    store = tmp_path / "store"
    for attempt in (1, 2):
        await agent.start("j", ["sh", "-c", MAKE_LOGS + "exit 1"], attempt=attempt,
                          data=plan(store))
        await agent.coordinator.until(agent.coordinator.exited("j", attempt))
    kept = store / "jobs" / "j" / "lightning_logs"
    assert sorted(p.name for p in kept.iterdir()) == ["1", "2"]


async def test_a_cancelled_job_s_logs_are_kept(agent: Agent, tmp_path: Path) -> None:
    store = tmp_path / "store"
    await agent.start("j", ["sh", "-c", MAKE_LOGS + "touch ready; sleep 600"],
                      data=plan(store))
    c = agent.coordinator
    await c.until((agent.dir("j").work / "ready").exists)
    await agent.runtime.cancel("j", 1, grace_s=5, reason="preempted: reclaimed")
    await c.until(c.exited("j"))
    assert "1/version_0/checkpoints/epoch=0-step=4.ckpt" in files(
        store / "jobs" / "j" / "lightning_logs")


async def test_links_in_them_are_not_followed(agent: Agent, tmp_path: Path) -> None:
    secret = tmp_path / "agent-credential"
    secret.write_text("node key")
    store = tmp_path / "store"
    await agent.start("j", ["sh", "-c", MAKE_LOGS + f"ln -s {secret} lightning_logs/key"],
                      data=plan(store))
    await agent.coordinator.until(agent.coordinator.exited("j"))
    assert files(store / "jobs" / "j" / "lightning_logs") == [
        "1/version_0/checkpoints/epoch=0-step=4.ckpt", "1/version_0/events.out.tfevents"]


async def test_a_lightning_logs_that_is_a_link_is_not_followed(agent: Agent,
                                                               tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "node.json").write_text("node key")
    store = tmp_path / "store"
    await agent.start("j", ["ln", "-s", str(outside), "lightning_logs"], data=plan(store))
    await agent.coordinator.until(agent.coordinator.exited("j"))
    exited = agent.coordinator.event("j", "exited")
    assert exited is not None and "kept" not in exited["data"]
    assert not (store / "jobs").exists()


async def test_the_job_s_working_directory_is_where_they_are(agent: Agent,
                                                              tmp_path: Path) -> None:
    bundle = tmp_path / "code.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        info = tarfile.TarInfo("train/run.sh")
        script = MAKE_LOGS.encode() + b"mkdir ../lightning_logs\n"
        info.size = len(script)
        tar.addfile(info, io.BytesIO(script))
    store = tmp_path / "store"
    await agent.start("j", ["sh", "run.sh"], bundle=bundle, bundle_sha="0" * 64,
                      workdir="train", data=plan(store))
    await agent.coordinator.until(agent.coordinator.exited("j"))
    assert files(store / "jobs" / "j" / "lightning_logs") == [
        "1/version_0/checkpoints/epoch=0-step=4.ckpt", "1/version_0/events.out.tfevents"]


@pytest.mark.parametrize(("data", "said"), [
    (None, NO_STORE),  # no data plan: no store, or a job that names no data
    ("no place", NO_PLACE),  # an older coordinator's plan
])
async def test_without_a_place_the_timeline_says_they_were_not_kept(
        agent: Agent, tmp_path: Path, data: str | None, said: str) -> None:
    given = None if data is None else plan(tmp_path / "store", lightning_logs=None)
    await agent.start("j", ["sh", "-c", MAKE_LOGS + "exit 0"], data=given)
    await agent.coordinator.until(agent.coordinator.exited("j"))
    assert said in texts(agent)
    exited = agent.coordinator.event("j", "exited")
    assert exited is not None and "kept" not in exited["data"]


async def test_a_job_without_lightning_logs_says_nothing_of_them(agent: Agent,
                                                                 tmp_path: Path) -> None:
    await agent.start("j", ["true"], data=None)
    await agent.start("k", ["true"], data=plan(tmp_path / "store"))
    c = agent.coordinator
    await c.until(lambda: c.exited("j")() and c.exited("k")())
    assert [e["kind"] for e in c.events("j")] == ["accepted", "started", "exited"]
    assert [e["kind"] for e in c.events("k")] == ["accepted", "started", "exited"]
    assert not os.path.exists(tmp_path / "store" / "jobs")
