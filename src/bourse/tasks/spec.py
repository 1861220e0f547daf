"""The job a task becomes: a :class:`~bourse.protocol.common.JobSpec`'s fields from a Task.

Pure: the submitting shell's environment (for ``env`` values written as null) is passed in;
the code bundle, packed from ``workdir``, is the caller's to upload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bourse.core.errors import InvalidInput
from bourse.tasks import wrap
from bourse.tasks.model import Task

SERVICES_REFUSED = "a service is run by `bourse serve FILE`, not `bourse run` (docs/serving.md)"


def job_fields(task: Task, environ: Mapping[str, str],
               args: Sequence[str] = ()) -> dict[str, Any]:
    """Every JobSpec field the task sets (None where it leaves the exchange's default)."""
    return {"command": wrap.command(task, args), "name": task.name,
            "env": env_values(task.variables(), environ), "compute": task.resources.compute(),
            "max_retries": task.max_retries, "ports": task.port_list(),
            "project_secrets": list(task.secrets) or None,
            "pending_timeout_s": task.pending_timeout_s(),
            "inputs": dict(task.inputs) or None, "outputs": dict(task.outputs) or None,
            "checkpoint": task.checkpoint}


def env_values(env: Mapping[str, str | None], environ: Mapping[str, str]) -> dict[str, str]:
    """The task's variables, a null one copied from ``environ`` (an error if it is not set)."""
    missing = [name for name, value in env.items() if value is None and name not in environ]
    if missing:
        raise InvalidInput(f"{missing[0]} is null (copy it from here) but not set here",
                           field=f"env.{missing[0]}",
                           hint=f"export {missing[0]}=... before bourse run, or write its "
                                "value in the file")
    return {name: environ[name] if value is None else value for name, value in env.items()}


def code_root(task: Task, task_file: Path) -> Path:
    """The directory packed as the job's code: ``workdir`` from the task file's folder."""
    root = (task_file.resolve().parent / task.workdir).resolve()
    if not root.is_dir():
        raise InvalidInput(f"{task.workdir!r} is not a directory (from {task_file})",
                           field="workdir",
                           hint="write a directory relative to the task file, e.g. '.'")
    return root


def refuse_service(task: Task) -> None:
    if task.service is not None:
        raise InvalidInput(SERVICES_REFUSED, field="service",
                           hint="`bourse serve FILE` starts it; drop service: to run the task "
                                "once as a job")
