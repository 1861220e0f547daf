"""What a stream to a job may reach: its running attempt's node, and the ports it declared."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import Conflict, NotFound
from bourse.core.states import JobState
from bourse.protocol.common import JobSpec, Port
from bourse.server.access import Scope
from bourse.server.services.jobs import get_job
from bourse.server.services.specs import spec_of


@dataclass(frozen=True)
class Running:
    """A job's running attempt and where it runs."""

    job_id: str
    node_id: str
    attempt: int
    spec: JobSpec


async def running_job(session: AsyncSession, job_id: str, scope: Scope) -> Running:
    """The job's running attempt; NotFound for a job the caller cannot see (another project's
    included), Conflict when it is not running."""
    job = await get_job(session, job_id, scope)
    if job.state != JobState.RUNNING.value or job.node_id is None:
        raise Conflict(f"job {job_id} is {job.state}, not RUNNING",
                       hint="ports and exec reach a running job only; `bourse jobs` shows its "
                            "state")
    return Running(job.id, job.node_id, job.attempt, spec_of(job))


def declared_port(running: Running, number: int) -> Port:
    port = running.spec.port(number)
    if port is None:
        declared = ", ".join(str(p.number) for p in running.spec.ports) or "none"
        raise NotFound(f"job {running.job_id} does not declare port {number} "
                       f"(it declares: {declared})",
                       hint="declare it when submitting: `bourse run --port N`, or ports=[N] "
                            "in the app API")
    return port
