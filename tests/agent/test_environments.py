"""Job environments through the runtime: a job whose Compute names packages and/or torch runs
in a uv virtualenv built from this machine's offline indexes (the pip mirror under /opt/pypi,
the wheels in /opt/wheels), cached by its resolved requirements; progress is reported as
``preparing`` events and a failed resolve is the attempt's start failure in uv's words.

Nothing here reaches beyond the machine: the agent is given file:// indexes only, and uv runs
with UV_OFFLINE=1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_harness import Agent

from bourse.agent.environment import JobEnvironments, requirements, torch_index
from bourse.agent.envs import EnvManager
from bourse.agent.hooks import HookChain
from bourse.agent.indexes import PackageSources
from bourse.core.compute import Compute
from bourse.protocol.common import Capabilities, GpuInfo

pytestmark = pytest.mark.anyio
MIRROR = Path("/opt/pypi/simple")
WHEELS = Path("/opt/wheels")
OFFLINE = PackageSources(index_url=MIRROR.as_uri(), find_links=(str(WHEELS),))
TORCH_WHEEL = next(WHEELS.glob("torch-*.whl"), None)


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if not (MIRROR / "six").is_dir():
        pytest.fail(f"the offline package mirror {MIRROR} lacks 'six': these tests need it")
    monkeypatch.setenv("UV_OFFLINE", "1")
    yield


def torch_mirror(root: Path) -> str:
    """A PyTorch-style index base (``<base>/cpu/torch/``) serving the CPU wheel on disk."""
    assert TORCH_WHEEL is not None, "no torch wheel in /opt/wheels"
    page = root / "cpu" / "torch"
    page.mkdir(parents=True)
    (page / "index.html").write_text(
        f'<a href="{TORCH_WHEEL.as_uri()}">{TORCH_WHEEL.name}</a>\n')
    return (root).as_uri()


def environments(tmp_path: Path, caps: Capabilities | None = None,
                 torch_base: str = "file:///nonexistent") -> JobEnvironments:
    manager = EnvManager(tmp_path / "envs", sources=OFFLINE)
    return JobEnvironments(manager, lambda: caps, path="/usr/bin:/bin", torch_base=torch_base)


def env_events(agent: Agent, job_id: str) -> list[dict[str, Any]]:
    return [e["data"] for e in agent.coordinator.events(job_id)
            if e["kind"] == "preparing" and e["data"].get("step") == "environment"]


REPORT = ("import json, os, sys, six; print(json.dumps({'venv': os.environ.get('VIRTUAL_ENV'),"
          " 'prefix': sys.prefix, 'six': six.__file__, 'path': os.environ['PATH']}))")


async def run(agent: Agent, job_id: str, command: list[str], **compute: Any) -> dict[str, Any]:
    await agent.start(job_id, command, compute=Compute(**compute))
    c = agent.coordinator
    await c.until(lambda: c.event(job_id, "exited") is not None
                  or c.event(job_id, "start_failed") is not None, timeout=120)
    return {e["kind"]: e["data"] for e in c.events(job_id)}


async def test_a_job_runs_in_its_environment_built_once_then_cached(
        tmp_path: Path, agent_factory: Callable[..., Agent]) -> None:
    agent = agent_factory(hooks=environments(tmp_path))
    first = await run(agent, "a", ["python", "-c", REPORT], packages=["six==1.17.0"])
    assert first["exited"]["exit_code"] == 0, agent.coordinator.stream("a", "stderr")
    seen = json.loads(agent.coordinator.stream("a", "stdout"))
    venv = Path(seen["venv"])
    assert venv.parent == tmp_path / "envs" / "envs"
    assert Path(seen["prefix"]) == venv, "the job's python is not the environment's"
    assert Path(seen["six"]).is_relative_to(venv)
    assert seen["path"] == f"{venv / 'bin'}:/usr/bin:/bin"
    states = [e["state"] for e in env_events(agent, "a")]
    assert states == ["resolving", "installing", "ready"]
    ready = env_events(agent, "a")[-1]
    assert (ready["built"], ready["packages"]) == (True, 1)
    assert ready["text"].startswith("environment: ready in ") and "(built, 1 packages)" in \
        ready["text"]

    second = await run(agent, "b", ["python", "-c", REPORT], packages=["SIX==1.17.0"])
    assert second["exited"]["exit_code"] == 0
    assert json.loads(agent.coordinator.stream("b", "stdout"))["venv"] == str(venv)
    assert [e["state"] for e in env_events(agent, "b")] == ["ready"]
    assert env_events(agent, "b")[-1]["built"] is False
    assert "(cached, 1 packages)" in env_events(agent, "b")[-1]["text"]


async def test_an_unresolvable_requirement_is_a_start_failure_with_uvs_words(
        tmp_path: Path, agent_factory: Callable[..., Agent]) -> None:
    agent = agent_factory(hooks=environments(tmp_path))
    events = await run(agent, "x", ["true"], packages=["six==0.0.1"])
    assert "started" not in events
    reason = events["start_failed"]["reason"]
    assert reason.startswith("environment: uv pip compile failed: ")
    assert "No solution found" in reason and "there is no version of six==0.0.1" in reason
    assert not list((tmp_path / "envs" / "envs").glob("*")), "a half-built environment stayed"


async def test_torch_comes_from_the_cpu_index_on_a_node_without_gpus(
        tmp_path: Path, agent_factory: Callable[..., Agent]) -> None:
    base = torch_mirror(tmp_path / "torch-index")
    agent = agent_factory(hooks=HookChain(environments(tmp_path, torch_base=base)))
    assert TORCH_WHEEL is not None
    release = TORCH_WHEEL.name.split("-")[1].split("+")[0].rsplit(".", 1)[0]  # "2.13"
    script = "import torch, sys; print(torch.__version__); print(torch.__file__)"
    events = await run(agent, "t", ["python", "-c", script], torch=release)
    assert events["exited"]["exit_code"] == 0, agent.coordinator.stream("t", "stderr")
    version, where = agent.coordinator.stream("t", "stdout").decode().split()
    assert version.startswith(release) and version.endswith("+cpu")
    assert "/envs/envs/" in where, "torch was not imported from the job's environment"
    assert env_events(agent, "t")[-1]["torch_index"] == f"{base}/cpu"


async def test_a_torch_release_with_no_build_in_the_index_fails_to_start(
        tmp_path: Path, agent_factory: Callable[..., Agent]) -> None:
    base = torch_mirror(tmp_path / "torch-index")
    agent = agent_factory(hooks=environments(tmp_path, torch_base=base))
    events = await run(agent, "old", ["true"], torch="2.1")
    assert "torch==2.1" in events["start_failed"]["reason"]


A5000 = GpuInfo(name="NVIDIA RTX A5000", model="rtx-a5000", uuid="GPU-1")
GT1030 = GpuInfo(name="NVIDIA GeForce GT 1030", model="gt-1030", uuid="GPU-2")


@pytest.mark.parametrize(("driver", "gpus", "torch", "build"), [
    ("590.44.01", [A5000], None, "cu130"),  # the newest torch, its CUDA 13 build
    ("590.44.01", [A5000], "2.1", "cu118"),  # torch 2.1: its first build the driver runs
    # no build of torch 2.1 runs on 515 (cu118 needs 520.61.05): only a job that asked for no
    # GPU can be here (the scheduler sends no GPU job), and it gets the CPU build
    ("515.105.01", [A5000], "2.1", "cpu"),
    ("470.74", [GT1030], None, "cu113"),  # the newest torch the driver runs: 1.12 (cu113)
    (None, [], "2.1", "cpu"),  # no GPU
    ("470.74", [GpuInfo(name="mystery")], "2.1", "cpu"),  # a GPU the catalogue lacks
])
def test_torch_index_follows_the_driver(driver: str | None, gpus: list[GpuInfo],
                                        torch: str | None, build: str) -> None:
    caps = Capabilities(cpus=1, memory_gib=1, disk_free_gib=1, driver=driver, gpus=gpus)
    assert torch_index(caps, torch, "https://mirror/whl/") == f"https://mirror/whl/{build}"


def test_requirements_of_a_compute() -> None:
    assert requirements(Compute(packages="six, attrs>=23", torch="2.1")) == [
        "six", "attrs>=23", "torch==2.1.*"]
    assert requirements(Compute()) == []
    assert requirements(Compute(image="python:3.12", torch="2.1")) == ["torch==2.1.*"]
    assert sys.executable  # the environments above are made for the agent's own Python
