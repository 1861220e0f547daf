"""What a node is told to start: the attempt, the devices it was given, its gang."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bourse.core.devices import held
from bourse.protocol.agent import Gang, StartJob
from bourse.server.commands import Command
from bourse.server.db.schema import Attempt, Job
from bourse.server.services.specs import spec_of

RENDEZVOUS_TIMEOUT_S = 600.0  # a gang's members prepare (environments, inputs) within this


def start_command(job: Job, attempt: Attempt, gang: Gang | None = None) -> Command:
    env = {"BOURSE_JOB_ID": job.id, "BOURSE_ATTEMPT": str(attempt.number),
           "BOURSE_NODE_ID": attempt.node_id}
    if job.resume:
        env["BOURSE_RESUME"] = "1"  # an earlier attempt was interrupted: resume its work
    return Command(attempt.node_id, StartJob(job_id=job.id, attempt=attempt.number,
                                             spec=spec_of(job), env=env,
                                             gpus=given_devices(attempt.resources), gang=gang))


def gang_of(job: Job, members: Sequence[Attempt], member: Attempt) -> Gang:
    """A member's place in its gang (``members``: every member of the attempt)."""
    gpu = spec_of(job).compute.gpu
    ranked = sorted(members, key=lambda m: m.rank)
    return Gang(rank=member.rank, addresses=[m.address or "" for m in ranked],
                port=member.port, gpus_per_node=gpu.count if gpu else 0,
                timeout_s=RENDEZVOUS_TIMEOUT_S)


def given_devices(resources: dict[str, Any] | None) -> list[str] | None:
    """The devices an attempt was given; None for one placed before devices were assigned
    (it holds GPUs by count only: the agent shows it every GPU, as it did then)."""
    addresses, anonymous = held(resources or {})
    return None if anonymous else addresses
