"""The container runtime. No Docker or Podman engine runs on these machines, so what is tested
is the exact command line (as text), and that the runtime runs it: a *recording* stand-in
named ``docker`` on PATH writes down the argv and the env file it was given and exits; it runs
no image. Whether a real engine accepts these flags and passes GPUs through is not exercised
here (docs/environments.md)."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from agent_harness import Agent

from bourse.agent.containers import (
    ContainerJobs,
    Engine,
    container_name,
    env_file_text,
    gpu_flags,
    run_command,
)
from bourse.core.compute import Compute
from bourse.protocol.common import Capabilities, GpuInfo

pytestmark = pytest.mark.anyio
DOCKER = Engine("docker", "/usr/bin/docker")
PODMAN = Engine("podman", "/usr/bin/podman")
UUIDS = ["GPU-6d1b0c5e-aaaa", "GPU-0f2e9a77-bbbb"]


def test_docker_run_command_line() -> None:
    argv = run_command(DOCKER, image="pytorch/pytorch:2.1.0-cuda11.8-cudnn8-runtime",
                       command=["python", "train.py", "--epochs", "3"], name="bourse-j-1",
                       mount=Path("/w/jobs/j/1"), cwd=Path("/w/jobs/j/1/work/src"),
                       env_file=Path("/w/jobs/j/1/container.env"), gpu_uuids=UUIDS,
                       user="1000:1000", cpus=4, memory_gib=15.5)
    assert argv == [
        "/usr/bin/docker", "run", "--rm", "--init", "--name", "bourse-j-1",
        "--volume", "/w/jobs/j/1:/w/jobs/j/1", "--workdir", "/w/jobs/j/1/work/src",
        "--env-file", "/w/jobs/j/1/container.env", "--label", "bourse.job=true",
        "--gpus", '"device=GPU-6d1b0c5e-aaaa,GPU-0f2e9a77-bbbb"',
        "--user", "1000:1000", "--cpus", "4", "--memory", "15872m",
        "pytorch/pytorch:2.1.0-cuda11.8-cudnn8-runtime", "python", "train.py", "--epochs", "3"]


def test_podman_passes_gpus_as_cdi_devices_and_nothing_without_gpus() -> None:
    assert gpu_flags(PODMAN, UUIDS) == ["--device", "nvidia.com/gpu=GPU-6d1b0c5e-aaaa",
                                        "--device", "nvidia.com/gpu=GPU-0f2e9a77-bbbb"]
    assert gpu_flags(DOCKER, []) == gpu_flags(PODMAN, []) == []


def test_env_file_refuses_newlines_and_names_are_engine_safe() -> None:
    assert env_file_text({"B": "2", "A": "x=y"}) == "A=x=y\nB=2\n"
    with pytest.raises(ValueError, match="KEY holds a newline"):
        env_file_text({"KEY": "a\nb"})
    assert container_name("job:42.x", 3) == "bourse-job_42.x-3"


RECORDER = """\
import json, os, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("Docker version 27.3.1, build ce12230")
    sys.exit(0)
record = {"argv": sys.argv, "env": dict(os.environ)}
if "--env-file" in args:
    path = args[args.index("--env-file") + 1]
    record["env_file"] = open(path).read()
    record["env_file_mode"] = os.stat(path).st_mode & 0o777
with open(os.path.join(os.path.dirname(sys.argv[0]), "calls.jsonl"), "a") as f:
    f.write(json.dumps(record) + "\\n")
print("recorded", args[0])
sys.exit(7 if args[0] == "run" else 0)
"""


@pytest.fixture
def recorder(tmp_path: Path) -> Path:
    """A ``docker`` that records its calls (``calls.jsonl`` beside it) and runs nothing."""
    bin_dir = tmp_path / "engine-bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(f"#!{sys.executable}\n{RECORDER}")
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    return docker


def calls(docker: Path) -> list[dict[str, object]]:
    path = docker.with_name("calls.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


CAPS = Capabilities(cpus=8, memory_gib=32, disk_free_gib=100, driver="590.44.01",
                    gpus=[GpuInfo(name="NVIDIA RTX A5000", model="rtx-a5000", uuid=u)
                          for u in UUIDS])


async def test_an_image_job_runs_through_the_engine_with_its_env_in_a_private_file(
        recorder: Path, agent_factory: Callable[..., Agent]) -> None:
    hooks = ContainerJobs(Engine("docker", str(recorder)), lambda: CAPS)
    agent = agent_factory(hooks=hooks, environ={"PATH": "/usr/bin:/bin", "HOME": "/home/n"})
    await agent.start("img", ["python", "-c", "print(1)"], spec_env={"SECRET": "s3cr3t"},
                      env={"BOURSE_JOB_ID": "img"},
                      compute=Compute(gpus=1, image="python:3.12-slim", cpus=2))
    c = agent.coordinator
    await c.until(c.exited("img"))
    assert c.event("img", "exited")["data"]["exit_code"] == 7  # the engine's exit status
    assert c.stream("img", "stdout") == b"recorded run\n"
    adir = agent.dir("img")
    run = calls(recorder)[0]
    assert run["argv"] == [
        str(recorder), "run", "--rm", "--init", "--name", "bourse-img-1",
        "--volume", f"{adir.root}:{adir.root}", "--workdir", str(adir.work),
        "--env-file", str(adir.root / "container.env"), "--label", "bourse.job=true",
        "--gpus", f'"device={",".join(UUIDS)}"', "--user", f"{os.getuid()}:{os.getgid()}",
        "--cpus", "2", "python:3.12-slim", "python", "-c", "print(1)"]
    assert run["env_file_mode"] == 0o600
    lines = set(str(run["env_file"]).splitlines())
    assert {"SECRET=s3cr3t", "BOURSE_JOB_ID=img", f"TMPDIR={adir.tmp}"} <= lines
    assert not any(line.startswith(("PATH=", "HOME=")) for line in lines)
    env = run["env"]
    assert isinstance(env, dict) and "SECRET" not in env, "a job secret reached ps/environ"
    assert env["PATH"] == "/usr/bin:/bin"
    await c.until(lambda: len(calls(recorder)) == 2)  # release: the container removed
    assert calls(recorder)[1]["argv"] == [str(recorder), "rm", "--force", "bourse-img-1"]
    assert not (adir.root / "container.env").exists(), "the env file (a secret) stayed"


async def test_a_job_without_image_runs_as_a_process(
        recorder: Path, agent_factory: Callable[..., Agent]) -> None:
    agent = agent_factory(hooks=ContainerJobs(Engine("docker", str(recorder)), lambda: CAPS))
    await agent.start("p", ["sh", "-c", "echo plain"])
    c = agent.coordinator
    await c.until(c.exited("p"))
    assert c.stream("p", "stdout") == b"plain\n"
    assert calls(recorder) == []


async def test_an_image_job_on_a_node_without_engine_fails_to_start(
        agent_factory: Callable[..., Agent]) -> None:
    agent = agent_factory(hooks=ContainerJobs(None, lambda: CAPS))
    await agent.start("n", ["true"], compute=Compute(image="python:3.12"))
    c = agent.coordinator
    await c.until(lambda: c.event("n", "start_failed") is not None)
    reason = c.event("n", "start_failed")["data"]["reason"]
    assert reason == ("the job names image python:3.12 but this node has no container engine "
                      "(install docker or podman on the node)")


async def test_an_image_that_is_an_engine_flag_is_refused_on_the_node(
        recorder: Path, agent_factory: Callable[..., Agent]) -> None:
    """The node trusts no coordinator: an ``image`` that would be a flag of ``docker run``
    (``--privileged``) never reaches the engine, even past the spec's own validation."""
    agent = agent_factory(hooks=ContainerJobs(Engine("docker", str(recorder)), lambda: CAPS))
    await agent.start("x", ["true"], compute=Compute.model_construct(image="--privileged"))
    c = agent.coordinator
    await c.until(lambda: c.event("x", "start_failed") is not None)
    assert "is not an image reference" in c.event("x", "start_failed")["data"]["reason"]
    assert calls(recorder) == []


async def test_an_image_job_gets_exactly_the_devices_it_was_given(
        recorder: Path, agent_factory: Callable[..., Agent]) -> None:
    """The exchange gave the attempt the node's second GPU: the container gets that one (the
    node has two), and a job given none gets none, even from an image that asks for all."""
    agent = agent_factory(hooks=ContainerJobs(Engine("docker", str(recorder)), lambda: CAPS))
    await agent.start("one", ["nvidia-smi"], gpus=[UUIDS[1]],
                      compute=Compute(gpus=1, image="nvidia/cuda:12.4.1-base-ubuntu22.04"))
    await agent.start("none", ["true"], gpus=[],
                      compute=Compute(image="nvidia/cuda:12.4.1-base-ubuntu22.04"))
    c = agent.coordinator
    await c.until(lambda: c.exited("one")() and c.exited("none")())
    runs = {r["argv"][5]: r for r in calls(recorder) if r["argv"][1] == "run"}
    one, none = runs["bourse-one-1"], runs["bourse-none-1"]
    argv = one["argv"]
    assert argv[argv.index("--gpus") + 1] == f'"device={UUIDS[1]}"'
    assert f"CUDA_VISIBLE_DEVICES={UUIDS[1]}" in str(one["env_file"]).splitlines()
    assert "--gpus" not in none["argv"]
    assert {"NVIDIA_VISIBLE_DEVICES=void", "CUDA_VISIBLE_DEVICES="} <= set(
        str(none["env_file"]).splitlines())
