"""What the runtime lets others add to an attempt's life without knowing what it is (the data
plane, in ``bourse.agent.data``):

- ``prepare`` runs after ``accepted`` and the attempt directory are in place, before the job's
  process starts; it returns environment variables for the job. A `StartError` (or any other
  exception) it raises becomes the attempt's ``start_failed`` reason. It runs as a task the
  runtime cancels when the attempt is cancelled.
- ``finish`` runs after the process exited and its logs are drained, before ``exited`` is
  spooled; what it returns is added to the ``exited`` event's data. It must not raise; if it
  does, the event says so in ``outputs_error`` (nothing it should have made durable is known
  to be). It runs again after an agent restart, for an attempt whose exit was not yet spooled.
- ``command`` turns the job's command and environment into what the shim runs (the
  container runtime wraps it in ``docker run``); it runs last, after ``prepare``.
- ``release`` runs once the attempt's final event is spooled, or once it is given up.

``emit(kind, data)`` spools a job event for the attempt (``preparing`` or ``info``); its data
must never hold a secret: it is stored by the exchange and shown to users.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bourse.agent.shim import AttemptDir
from bourse.protocol.agent import StartJob

Emit = Callable[[str, dict[str, Any]], None]


class AttemptHooks:
    """Hooks that do nothing: the runtime without a data plane."""

    async def prepare(self, msg: StartJob, adir: AttemptDir, emit: Emit) -> dict[str, str]:
        return {}

    async def finish(self, msg: StartJob, adir: AttemptDir, exit_info: dict[str, Any],
                     emit: Emit) -> dict[str, Any]:
        return {}

    def command(self, msg: StartJob, adir: AttemptDir, cwd: Path,
                env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        return list(msg.spec.command), env

    def release(self, job_id: str, attempt: int, root: Path) -> None:
        return None


class HookChain(AttemptHooks):
    """Several hooks as one: ``prepare`` in order (later environments win), ``finish`` in
    order, ``command`` folded in order, ``release`` in reverse order, each whatever the
    others did."""

    def __init__(self, *hooks: AttemptHooks) -> None:
        self.hooks = hooks

    async def prepare(self, msg: StartJob, adir: AttemptDir, emit: Emit) -> dict[str, str]:
        env: dict[str, str] = {}
        for hook in self.hooks:
            env |= await hook.prepare(msg, adir, emit)
        return env

    async def finish(self, msg: StartJob, adir: AttemptDir, exit_info: dict[str, Any],
                     emit: Emit) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for hook in self.hooks:
            found |= await hook.finish(msg, adir, exit_info, emit)
        return found

    def command(self, msg: StartJob, adir: AttemptDir, cwd: Path,
                env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        argv = list(msg.spec.command)
        for hook in self.hooks:
            wrapped = msg.model_copy(update={"spec": msg.spec.model_copy(
                update={"command": argv})})
            argv, env = hook.command(wrapped, adir, cwd, env)
        return argv, env

    def release(self, job_id: str, attempt: int, root: Path) -> None:
        for hook in reversed(self.hooks):
            hook.release(job_id, attempt, root)
