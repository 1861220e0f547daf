"""A run's stages drawn as a graph (pure): one column per layer of ``core.dataflow`` (a stage
to the right of every stage it reads from), boxes placed and arrows routed here, so that the
template only writes them out as SVG.

Within a column, a stage sits near the mean height of its sources (the barycentre heuristic,
one sweep from left to right), which keeps parallel branches on their own rows; stages
without sources keep their submission order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bourse.core import dataflow
from bourse.server.ui.views import Run, Stage, span

BOX_W, BOX_H = 200, 64  # a stage's box, in px
GAP_X, GAP_Y = 64, 16  # between columns, between boxes of a column
PAD = 4  # around the drawing, for the arrows' heads and the boxes' borders
NAME_CHARS = 26  # a longer stage name is cut (the box's tooltip has it whole)

Times = Mapping[str, tuple[float | None, float | None]]  # job id -> its attempt's start, end


@dataclass(frozen=True)
class Box:
    stage: Stage
    layer: int
    x: int
    y: int
    label: str  # the name, cut to fit
    where: str  # "node · duration"
    width = BOX_W
    height = BOX_H

    @property
    def middle(self) -> int:
        return self.y + BOX_H // 2


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    inputs: tuple[str, ...]
    path: str  # SVG path data, from the source box's right side to the target's left


@dataclass(frozen=True)
class Graph:
    width: int
    height: int
    boxes: list[Box]
    arrows: list[Arrow]


def draw(run: Run, nodes: Mapping[str, str], times: Times, now: float) -> Graph:
    """The run's boxes and arrows; ``nodes`` names nodes by id, ``times`` gives the running
    time of each stage's current attempt."""
    by_name = {s.name: s for s in run.stages}
    links = dataflow.edges([dataflow.StageData(s.name, s.inputs, s.outputs)
                            for s in run.stages])
    columns = arrange(dataflow.layers(list(by_name), links), links)
    rows = max((len(c) for c in columns), default=0)
    boxes: dict[str, Box] = {}
    for layer, column in enumerate(columns):
        top = PAD + (rows - len(column)) * (BOX_H + GAP_Y) // 2
        for row, name in enumerate(column):
            stage = by_name[name]
            boxes[name] = Box(stage, layer, PAD + layer * (BOX_W + GAP_X),
                              top + row * (BOX_H + GAP_Y), cut(name),
                              where(stage, nodes, times, now))
    arrows = [Arrow(e.source, e.target, e.inputs, route(boxes[e.source], boxes[e.target]))
              for e in links]
    width = 2 * PAD + len(columns) * BOX_W + max(len(columns) - 1, 0) * GAP_X
    height = 2 * PAD + rows * BOX_H + max(rows - 1, 0) * GAP_Y
    return Graph(width, height, list(boxes.values()), arrows)


def arrange(layers: Sequence[Sequence[str]],
            links: Sequence[dataflow.Edge]) -> list[list[str]]:
    """Each layer ordered by the mean row of its stages' sources (rows of the columns as
    drawn: centred on the tallest), in submission order when that ties or there is none."""
    sources: dict[str, list[str]] = {}
    for link in links:
        sources.setdefault(link.target, []).append(link.source)
    rows = max((len(layer) for layer in layers), default=0)
    row: dict[str, float] = {}
    arranged: list[list[str]] = []
    for layer in layers:
        ranked = sorted(enumerate(layer), key=lambda p: (_mean_row(p[1], sources, row), p[0]))
        placed = [name for _, name in ranked]
        offset = (rows - len(layer)) / 2
        row.update({name: i + offset for i, name in enumerate(placed)})
        arranged.append(placed)
    return arranged


def _mean_row(name: str, sources: Mapping[str, list[str]], row: Mapping[str, float]) -> float:
    found = [row[s] for s in sources.get(name, ())]
    return sum(found) / len(found) if found else 0.0


def route(source: Box, target: Box) -> str:
    """A curve from the middle of the source's right side to the middle of the target's left."""
    x1, y1, x2, y2 = source.x + BOX_W, source.middle, target.x, target.middle
    bend = GAP_X // 2
    return f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"


def cut(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[:NAME_CHARS - 1] + "…"


def where(stage: Stage, nodes: Mapping[str, str], times: Times, now: float) -> str:
    """``node · 12 s``: the node it runs or ran on (by name) and for how long; ``not placed``
    before it is."""
    if stage.node_id is None:
        return "not placed"
    node = nodes.get(stage.node_id, stage.node_id)
    started, ended = times.get(stage.job_id, (None, None))
    return node if started is None else f"{node} · {span((ended or now) - started)}"
