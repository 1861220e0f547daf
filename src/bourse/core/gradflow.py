"""Gradient flow, pure: which layers' gradient norms vanish or explode, and the layer × step
grid the UI draws. Norms come from ``bourse.track.grad_norms`` as metrics ``grad_norm/<layer>``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

PREFIX = "grad_norm/"
LOW, HIGH = 1e-7, 1e3  # the default bounds: below, a layer learns nothing; above, it diverges
Flag = Literal["vanishing", "exploding"]


def flag(norm: float | None, low: float = LOW, high: float = HIGH) -> Flag | None:
    """One norm against the bounds; NaN (None) and infinity explode."""
    if norm is None or math.isnan(norm) or norm > high:
        return "exploding"
    return "vanishing" if norm < low else None


def flag_layers(latest: Mapping[str, float | None], low: float = LOW,
                high: float = HIGH) -> dict[str, Flag]:
    """The layers (``grad_norm/`` keys stripped) whose latest norm is out of bounds."""
    if not low < high:
        raise ValueError(f"the low bound ({low}) must be below the high one ({high})")
    flags = {}
    for key, value in latest.items():
        if key.startswith(PREFIX) and (f := flag(value, low, high)) is not None:
            flags[key.removeprefix(PREFIX)] = f
    return flags


@dataclass(frozen=True)
class Grid:
    layers: list[str]
    steps: list[int]
    cells: list[list[float | None]]  # [layer][step column]; None: no point there


def grid(series: Mapping[str, Sequence[tuple[int, float | None]]], columns: int = 60) -> Grid:
    """Series of ``grad_norm/<layer>`` points ([step, norm]) as a layer × step grid of at most
    ``columns`` step columns: each cell holds the largest norm of its step range (NaN wins),
    so a spike is never averaged away."""
    layers = sorted(k.removeprefix(PREFIX) for k in series if k.startswith(PREFIX))
    steps = sorted({s for k in series if k.startswith(PREFIX) for s, _ in series[k]})
    if not steps:
        return Grid(layers, [], [[] for _ in layers])
    first, last = steps[0], steps[-1]
    width = max(1, math.ceil((last - first + 1) / columns))
    count = (last - first) // width + 1
    cells: list[list[float | None]] = []
    for layer in layers:
        row: list[float | None] = [None] * count
        for step, value in series[PREFIX + layer]:
            i = (step - first) // width
            v = math.nan if value is None else value
            old = row[i]
            row[i] = v if old is None or math.isnan(v) or (not math.isnan(old) and v > old) \
                else old
        cells.append(row)
    return Grid(layers, [first + i * width for i in range(count)], cells)
