"""A job's environment as a runtime hook (`bourse.agent.hooks`): before a job whose Compute
names ``packages`` and/or ``torch`` starts, its virtualenv is made ready
(`bourse.agent.envs.EnvManager`: built once per resolved requirement set, then a file check)
and the job runs with it first on ``PATH`` (``VIRTUAL_ENV`` set).

``torch`` comes from the PyTorch index of the newest CUDA build the node's driver and GPU run
(``core.cuda.torch_wheel_index``; the CPU build on a node without GPUs). Progress is told as
``preparing`` events (``step: environment``): resolving, installing N packages, ready in
x s (cached or built). A resolve or install that fails is the attempt's start failure, with
uv's own words. A job that names an ``image`` brings its environment in the image: nothing
is installed on the node for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bourse.agent.attempt import StartError
from bourse.agent.envs import EnvironmentError_, EnvManager, names_torch
from bourse.agent.hooks import AttemptHooks, Emit
from bourse.agent.shim import AttemptDir
from bourse.core.compute import Compute
from bourse.core.cuda import PYTORCH_INDEX, torch_wheel_index
from bourse.core.errors import BourseError
from bourse.protocol.agent import StartJob
from bourse.protocol.common import Capabilities

NodeFacts = Callable[[], Capabilities | None]  # what the agent last probed


def requirements(compute: Compute) -> list[str]:
    """What the job's environment holds: its packages, and torch at the release it names."""
    found = list(compute.packages)
    if compute.torch is not None:
        found.append(f"torch=={compute.torch}.*")
    return found


def torch_index(caps: Capabilities | None, torch: str | None, base: str) -> str:
    """The PyTorch index for this node: the CUDA build its driver runs, or the CPU build."""
    if caps is None or not caps.gpus:
        return torch_wheel_index(None, None, base=base)
    model = next((g.model for g in caps.gpus if g.model), None)
    try:
        return torch_wheel_index(caps.driver, model, torch, base=base)
    except BourseError:  # a driver string the rules cannot read: the CPU build still runs
        return torch_wheel_index(None, None, base=base)


def step_event(name: str, count: int) -> dict[str, Any]:
    noun = "package" if count == 1 else "packages"
    verb = "resolving" if name == "resolving" else "installing"
    return {"step": "environment", "state": name, "packages": count,
            "text": f"environment: {verb} {count} {noun}"}


def ready_event(packages: int, built: bool, seconds: float, index: str | None) -> dict[str, Any]:
    how = "built" if built else "cached"
    text = f"environment: ready in {seconds:.1f} s ({how}, {packages} packages)"
    data: dict[str, Any] = {"step": "environment", "state": "ready", "packages": packages,
                            "built": built, "seconds": round(seconds, 3), "text": text}
    if index is not None:
        data["torch_index"] = index
    return data


class JobEnvironments(AttemptHooks):
    def __init__(self, manager: EnvManager, node: NodeFacts, *, path: str,
                 torch_base: str = PYTORCH_INDEX) -> None:
        """``path``: the PATH jobs get, after the environment's own ``bin``."""
        self.manager, self.node, self.path, self.torch_base = manager, node, path, torch_base

    async def prepare(self, msg: StartJob, adir: AttemptDir, emit: Emit) -> dict[str, str]:
        compute = msg.spec.compute
        wanted = requirements(compute)
        if not wanted or compute.image is not None:
            return {}
        index = torch_index(self.node(), compute.torch, self.torch_base)
        started = time.monotonic()
        try:
            env = await self.manager.ensure(
                wanted, index, on_step=lambda name, n: emit("preparing", step_event(name, n)))
        except EnvironmentError_ as exc:
            raise StartError(f"environment: {exc.message}", hint=exc.hint) from None
        emit("preparing", ready_event(env.packages, env.built, time.monotonic() - started,
                                      index if names_torch(wanted) else None))
        return env.env(self.path)
