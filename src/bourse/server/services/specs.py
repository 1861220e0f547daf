"""A job's spec, parsed once.

A spec never changes after submission, and validating one (its Compute above all) costs more
than the rest of a placement or of a job's view, which every submit, placement, start and
listing needs. Parsed specs are kept by job id, seeded at submission with the spec just
validated; the memo is bounded (cleared when full, then refilled on demand).
"""

from __future__ import annotations

from bourse.protocol.common import JobSpec
from bourse.server.db.schema import Job

KEPT = 20_000
_SPECS: dict[str, JobSpec] = {}


def remember(job_id: str, spec: JobSpec) -> None:
    if len(_SPECS) >= KEPT:
        _SPECS.clear()
    _SPECS[job_id] = spec


def spec_of(job: Job) -> JobSpec:
    """The job's spec as a `JobSpec`, validated once per job."""
    spec = _SPECS.get(job.id)
    if spec is None:
        spec = JobSpec.model_validate(job.spec)
        remember(job.id, spec)
    return spec
