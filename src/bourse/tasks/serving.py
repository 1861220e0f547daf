"""The version of a service a task becomes: a :class:`~bourse.protocol.services.ServiceApply`
from a Task with a ``service:`` section — the replica's job and the policy in the
coordinator's units. ``bourse serve FILE`` and the app API's ``Service`` both build theirs
here. Pure but for the submitting shell's environment (for ``env`` values written as null)."""

from __future__ import annotations

import os
from pathlib import Path

from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.core.units import parse_duration
from bourse.protocol.common import JobSpec
from bourse.protocol.services import ServiceApply, ServicePolicy
from bourse.sdk.core import job_spec
from bourse.tasks.model import Task
from bourse.tasks.service import Service
from bourse.tasks.spec import job_fields


def policy_of(service: Service) -> ServicePolicy:
    """The ``service:`` section in the coordinator's units."""
    readiness, rollout, replicas = service.readiness, service.rollout, service.replicas
    return ServicePolicy(
        port=service.port,
        readiness_path=readiness.path if readiness else "/",
        readiness_timeout_s=parse_duration(readiness.timeout, field="readiness.timeout")
        if readiness else 5.0,
        initial_delay_s=parse_duration(readiness.initial_delay, field="readiness.initial_delay")
        if readiness else 0.0,
        min_replicas=replicas.min, max_replicas=replicas.max, target_rps=replicas.target_rps,
        target_p99_ms=None if replicas.target_p99 is None else parse_duration(
            replicas.target_p99, field="replicas.target_p99") * 1000,
        steps=list(rollout.steps), pause_s=parse_duration(rollout.pause, field="rollout.pause"),
        error_margin=rollout.max_error_increase / 100,
        p99_margin_ms=parse_duration(rollout.max_p99_increase,
                                     field="rollout.max_p99_increase") * 1000,
        min_requests=rollout.min_requests,
        ready_timeout_s=parse_duration(rollout.ready_timeout, field="rollout.ready_timeout"))


def replica_job(task: Task, bundle: str | None, compute: Compute | None = None) -> JobSpec:
    """What each replica runs: the task as a job, with ``compute`` if given, else the
    service's resources if given, else the task's."""
    fields = job_fields(task, os.environ)
    command = fields.pop("command")
    service = task.service
    assert service is not None
    if compute is not None:
        fields["compute"] = compute
    elif service.resources is not None:
        fields["compute"] = service.resources.compute()
    fields["ports"] = None  # the coordinator gives each replica its port ($PORT)
    return job_spec(command, bundle=bundle, **fields)


def apply_body(path: Path | str, task: Task, bundle: str | None,
               compute: Compute | None = None) -> ServiceApply:
    """The version to apply; ``path`` names where the task came from, for errors."""
    if task.service is None:
        raise InvalidInput(f"{path} has no service: section", field="service",
                           hint="add service: {port: 8000, readiness: /health}, or use "
                                "`bourse run` to run it once as a job")
    if not task.name:
        raise InvalidInput(f"{path}: a service needs a name", field="name",
                           hint="add name: my-service (lower case, digits and -)")
    return ServiceApply(name=task.name, job=replica_job(task, bundle, compute),
                        policy=policy_of(task.service))
