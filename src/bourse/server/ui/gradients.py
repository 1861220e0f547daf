"""A run's gradient flow page: its per-layer gradient norms as a layer × step heat map (SVG),
the layers flagged vanishing or exploding, and the model graph it logged."""

from __future__ import annotations

import math
from dataclasses import dataclass

from starlette.responses import Response

from bourse.core import gradflow
from bourse.protocol.tracking_debug import GradientView
from bourse.server.services import tracking, tracking_debug
from bourse.server.ui.guard import Ctx, path_id
from bourse.server.ui.render import page

COLUMNS, CELL_W, CELL_H = 60, 10, 14
EMPTY = "#eeeeee"


@dataclass(frozen=True)
class Cell:
    x: int
    y: int
    fill: str
    title: str


def colour(value: float, low: float, high: float) -> str:
    """Blue (small) to red (large) on a log scale between ``low`` and ``high``."""
    span = math.log10(high) - math.log10(low)
    where = 0.0 if span <= 0 else (math.log10(max(value, 1e-300)) - math.log10(low)) / span
    hue = round(240 * (1 - min(1.0, max(0.0, where))))
    return f"hsl({hue}, 70%, 50%)"


def heat(view: GradientView) -> list[Cell]:
    """The map's cells, coloured between the smallest and the largest norm shown."""
    values = [v for row in view.cells for v in row if v is not None and v > 0]
    low, high = (min(values), max(values)) if values else (1.0, 1.0)
    return [Cell(x * CELL_W, y * CELL_H,
                 EMPTY if v is None else colour(v, low, high),
                 f"{layer} @ step {view.steps[x]}: " + ("-" if v is None else f"{v:.3g}"))
            for y, (layer, row) in enumerate(zip(view.layers, view.cells, strict=True))
            for x, v in enumerate(row)]


async def gradients_page(ctx: Ctx) -> Response:
    run_id = path_id(ctx, "job_id")
    writer = tracking.writer_of(ctx.scope.project_id, ctx.scope)
    async with ctx.state.db.write() as session:  # a job's run is made when first asked for
        await tracking.job_run(session, writer, run_id, ctx.state.clock())
        view = await tracking_debug.gradients(session, run_id, low=gradflow.LOW,
                                              high=gradflow.HIGH, columns=COLUMNS)
    return page("gradients.html", **ctx.context(
        view=view, cells=heat(view), cell_w=CELL_W, cell_h=CELL_H,
        width=CELL_W * len(view.steps), height=CELL_H * len(view.layers)))
