"""Where a burst moves on the run's step axis (``lifecycle.note_checkpoint``): the step of
the newest checkpoint the burst's attempt reported, the highest of a gang's members."""

from __future__ import annotations

from typing import Any

import pytest

from bourse.server.db.schema import Attempt, Job
from bourse.server.services.lifecycle import note_checkpoint

BURST = {"attempt": 2, "from": {}, "to": None, "why": "test", "at": 0.0}


def _ckpt(step: Any) -> dict[str, Any]:
    return {"name": "n", "step": step, "created_at": 1.0}


@pytest.mark.parametrize(("burst", "attempt", "reports", "step"), [
    (BURST, 2, [_ckpt(56)], 56),
    (BURST, 2, [_ckpt(42), _ckpt(56)], 56),  # a member that left before rank 0's upload
    (BURST, 2, [_ckpt(56), _ckpt(42)], 56),
    (BURST, 1, [_ckpt(56)], None),  # an earlier attempt's late report: not this move's
    (BURST, 2, [None, {}, _ckpt(True), _ckpt(-1), _ckpt("56"), _ckpt(4.5)], None),
])
def test_the_move_step_is_the_newest_reported_checkpoint(
        burst: dict[str, Any], attempt: int, reports: list[Any], step: int | None) -> None:
    job, row = Job(id="j-1", burst=dict(burst)), Attempt(job_id="j-1", number=attempt)
    for report in reports:
        note_checkpoint(job, row, report)
    assert (job.burst or {}).get("step") == step


def test_a_job_not_bursting_is_left_alone() -> None:
    job = Job(id="j-1", burst=None)
    note_checkpoint(job, Attempt(job_id="j-1", number=1), _ckpt(5))
    assert job.burst is None
