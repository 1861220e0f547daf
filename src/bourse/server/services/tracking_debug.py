"""A run's debugging views: its gradient flow (``core.gradflow`` over its ``grad_norm/``
curves) and the model graph its writer logged (the ``bourse.model_graph`` tag)."""

from __future__ import annotations

import json
import math
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core import gradflow
from bourse.protocol.tracking_debug import GradientView
from bourse.server.db.schema import TrackingLatest, TrackingTag
from bourse.server.services.tracking_charts import series

GRAPH_TAG = "bourse.model_graph"  # = bourse.track.GRAPH_TAG
MAX_LAYERS = 500


async def gradients(session: AsyncSession, run_id: str, *, low: float, high: float,
                    columns: int) -> GradientView:
    latest = {key: value for key, value in (await session.execute(
        select(TrackingLatest.key, TrackingLatest.value).where(
            TrackingLatest.run_id == run_id,
            TrackingLatest.key.startswith(gradflow.PREFIX, autoescape=True))
        .order_by(TrackingLatest.key).limit(MAX_LAYERS))).all()}
    curves = {key: [(int(s), v) for s, v in (await series(session, run_id, key,
                                                          columns * 4)).points]
              for key in latest}
    grid = gradflow.grid(curves, columns)
    return GradientView(run_id=run_id, low=low, high=high, layers=grid.layers,
                        steps=grid.steps, cells=[[_finite(v) for v in row]
                                                 for row in grid.cells],
                        flags=gradflow.flag_layers(latest, low, high),
                        graph=await model_graph(session, run_id))


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


async def model_graph(session: AsyncSession, run_id: str) -> dict[str, Any] | None:
    tag = await session.get(TrackingTag, (run_id, GRAPH_TAG))
    if tag is None:
        return None
    try:
        doc = json.loads(tag.value)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
