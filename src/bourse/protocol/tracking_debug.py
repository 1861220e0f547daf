"""The debugging views' shapes: a run's gradient flow and its model graph."""

from __future__ import annotations

from typing import Any, Literal

from bourse.core.values import Wire


class GradientView(Wire):
    """Per-layer gradient norms (``grad_norm/<layer>`` metrics) as a layer × step grid: each
    cell the largest norm of its step range (None: no point; NaN points are left out of the
    curves, their layer is flagged ``exploding``), and the layers whose latest norm is outside
    [low, high]."""

    run_id: str
    low: float
    high: float
    layers: list[str]
    steps: list[int]  # each column's first step
    cells: list[list[float | None]]  # [layer][column]
    flags: dict[str, Literal["vanishing", "exploding"]]
    graph: dict[str, Any] | None = None  # the module tree (tag bourse.model_graph), if logged
