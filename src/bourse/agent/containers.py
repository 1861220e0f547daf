"""The container runtime: where a Docker or Podman engine runs, a job that names an ``image``
runs in a container — GPUs passed through, the attempt's directory mounted — started through
the same shim as a process, so logs, exit codes and cancellation work unchanged (``docker
run`` forwards SIGTERM to the container's init and returns its exit code).

The attempt's directory is mounted at its own path, so every path the job is given (its
files, ``TMPDIR``, the data plane's inputs and outputs) means the same inside and out; the
container runs as the owner of the job's files (its own job user under a root agent, else
the agent's user: `bourse.agent.isolation`), so it writes there what a process job would.

No container engine runs on the machines bourse is developed on: the command lines are
tested as text, and through the runtime against a recording stand-in for ``docker``, never
against an engine (docs/environments.md says what that leaves unexercised).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bourse.agent.attempt import StartError
from bourse.agent.hooks import AttemptHooks
from bourse.agent.shim import AttemptDir
from bourse.core.names import IMAGE_PATTERN
from bourse.protocol.agent import StartJob
from bourse.protocol.common import Capabilities

ENV_FILE = "container.env"
HOST_ONLY = ("PATH", "HOME", "LANG")  # the engine's CLI needs them; the image has its own


@dataclass(frozen=True)
class Engine:
    name: str  # "docker" | "podman"
    path: str


def find_engine() -> Engine | None:
    """The first engine on PATH (docker before podman)."""
    for name in ("docker", "podman"):
        path = shutil.which(name)
        if path is not None:
            return Engine(name, path)
    return None


def gpu_flags(engine: Engine, gpu_uuids: Sequence[str]) -> list[str]:
    """Pass exactly the attempt's GPUs: docker's NVIDIA runtime takes ``--gpus``; podman uses
    CDI device names (nvidia-container-toolkit's generated spec)."""
    if not gpu_uuids:
        return []
    if engine.name == "podman":
        return [arg for uuid in gpu_uuids for arg in ("--device", f"nvidia.com/gpu={uuid}")]
    return ["--gpus", f'"device={",".join(gpu_uuids)}"']


def run_command(engine: Engine, *, image: str, command: Sequence[str], name: str,
                mount: Path, cwd: Path, env_file: Path,
                gpu_uuids: Sequence[str] = (), user: str | None = None,
                cpus: float | None = None, memory_gib: float | None = None) -> list[str]:
    """``docker run`` (or ``podman run``) for one attempt: ``mount`` (the attempt's
    directory) at the same path inside, ``cwd`` under it. Environment values go through an
    env file (mode 0600, written by the caller) so that secrets never appear in ``ps``."""
    args = [engine.path, "run", "--rm", "--init", "--name", name,
            "--volume", f"{mount}:{mount}", "--workdir", str(cwd),
            "--env-file", str(env_file), "--label", "bourse.job=true"]
    args += gpu_flags(engine, gpu_uuids)
    if user:
        args += ["--user", user]
    if cpus:
        args += ["--cpus", f"{cpus:g}"]
    if memory_gib:
        args += ["--memory", f"{int(memory_gib * 1024)}m"]
    return [*args, image, *command]


def env_file_text(env: Mapping[str, str]) -> str:
    """``KEY=value`` lines; newlines cannot be carried by an env file and are refused."""
    lines = []
    for key, value in sorted(env.items()):
        if "\n" in value or "\r" in value:
            raise ValueError(f"environment variable {key} holds a newline; an env file "
                             "cannot carry it")
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def container_name(job_id: str, attempt: int) -> str:
    """A name the engines accept ([a-zA-Z0-9][a-zA-Z0-9_.-]*), unique per attempt."""
    return f"bourse-{re.sub(r'[^A-Za-z0-9_.-]', '_', job_id)}-{attempt}"


def write_env_file(path: Path, env: Mapping[str, str]) -> None:
    """The env file, created 0600 (it may hold the attempt's store key)."""
    text = env_file_text(env)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def owner(folder: Path) -> str:
    """``uid:gid`` of ``folder``: the job's own user, or the agent's (`bourse.agent.isolation`)."""
    st = os.stat(folder)
    return f"{st.st_uid}:{st.st_gid}"


class ContainerJobs(AttemptHooks):
    """Runs jobs that name an ``image`` in a container of the node's engine."""

    def __init__(self, engine: Engine | None, node: Callable[[], Capabilities | None]) -> None:
        self.engine, self.node = engine, node

    def command(self, msg: StartJob, adir: AttemptDir, cwd: Path,
                env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        compute = msg.spec.compute
        if compute.image is None:
            return list(msg.spec.command), env
        if self.engine is None:
            raise StartError(f"the job names image {compute.image} but this node has no "
                             "container engine", hint="install docker or podman on the node")
        if not IMAGE_PATTERN.match(compute.image):  # trusting no coordinator: "--privileged"
            # would be a flag of the engine's, not an image
            raise StartError(f"image {compute.image[:80]!r} is not an image reference",
                             hint="name an image such as pytorch/pytorch:2.3.0-cuda12.1")
        env_file = adir.root / ENV_FILE
        try:
            write_env_file(env_file, {k: v for k, v in env.items() if k not in HOST_ONLY})
        except ValueError as exc:
            raise StartError(str(exc)) from None
        argv = run_command(
            self.engine, image=compute.image, command=msg.spec.command,
            name=container_name(msg.job_id, msg.attempt), mount=adir.root, cwd=cwd,
            env_file=env_file, gpu_uuids=self._gpus(msg), user=owner(adir.work),
            cpus=compute.cpus.min or None, memory_gib=compute.memory.min or None)
        return argv, {k: env[k] for k in HOST_ONLY if k in env}

    def _gpus(self, msg: StartJob) -> list[str]:
        """The devices the exchange gave the attempt; from an older coordinator that gives
        none, every GPU of the node for a job that asks for any."""
        if msg.gpus is not None:
            return list(msg.gpus)
        caps = self.node()
        if msg.spec.compute.gpu is None or caps is None:
            return []
        return [g.uuid for g in caps.gpus if g.uuid]

    def release(self, job_id: str, attempt: int, root: Path) -> None:
        """Remove the env file (it may hold a key) and the container, if one was started: a
        container outlives a ``docker run`` that was SIGKILLed."""
        env_file = root / ENV_FILE
        if self.engine is None or not env_file.exists():
            return
        env_file.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            subprocess.Popen([self.engine.path, "rm", "--force", container_name(job_id, attempt)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
