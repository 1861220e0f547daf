"""The container runtime: where a Docker or Podman engine runs, a job that names an ``image``
runs in a container — GPUs passed through, the attempt's work dir mounted — started through
the same shim as a process, so logs, exit codes and cancellation work unchanged (``docker
run`` forwards SIGTERM to the container's init and returns its exit code).

Only the command line is built here (pure). No container engine runs on the machines bourse
is developed on: these command lines are tested as text, not against an engine.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

WORKSPACE = "/workspace"


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
                work_dir: Path, cwd: str, env_file: Path,
                gpu_uuids: Sequence[str] = (), user: str | None = None,
                cpus: float | None = None, memory_gib: float | None = None) -> list[str]:
    """``docker run`` (or ``podman run``) for one attempt. Environment values go through an
    env file (mode 0600, written by the caller) so that secrets never appear in ``ps``."""
    args = [engine.path, "run", "--rm", "--init", "--name", name,
            "--volume", f"{work_dir}:{WORKSPACE}", "--workdir", f"{WORKSPACE}/{cwd}".rstrip("/"),
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
