"""What a job tells its tracking run through the agent (``bourse.track``, ``BourseLogger``).

The job appends :class:`TrackRecord` lines (JSON) to the file ``BOURSE_TRACK_FILE`` names; the
agent validates each line and spools it as a :class:`TrackBatch` (the record, plus the
attempt's ``seq``), sent only to a coordinator whose ``welcome`` lists ``track`` in
``accepts``. Limits are MLflow's per log-batch (``services.tracking_log``); a metric value
``None`` is NaN (JSON has none).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from bourse.core.values import Wire
from bourse.protocol.common import JobId

MAX_SEQ = 2**31 - 1
Key = Annotated[str, Field(min_length=1, max_length=250)]
# [key, value, step, timestamp in ms]: a list, not an object, so a line stays small
Value = Annotated[float, Field(allow_inf_nan=False)]  # the writer clamps infinities
TrackPoint = tuple[Key, Value | None, Annotated[int, Field(ge=-(2**63), lt=2**63)],
                   Annotated[int, Field(ge=0, lt=2**63)]]


class TrackRecord(Wire):
    metrics: list[TrackPoint] = Field(default_factory=list, max_length=1000)
    params: dict[Key, Annotated[str, Field(max_length=6000)]] = Field(
        default_factory=dict, max_length=100)
    tags: dict[Key, Annotated[str, Field(max_length=8000)]] = Field(
        default_factory=dict, max_length=100)


class TrackBatch(TrackRecord):
    job_id: JobId
    attempt: int = Field(ge=1, le=MAX_SEQ)
    seq: int = Field(ge=0, le=MAX_SEQ)
    time: float
