"""A run's stages drawn as a graph (pure): one column per layer of ``core.dataflow`` (a stage
to the right of every stage it reads from), boxes placed and arrows routed here, so that the
template only writes them out as SVG.

Within a column, a stage sits near the mean height of its sources (the barycentre heuristic,
one sweep from left to right), which keeps parallel branches on their own rows; stages
without sources keep their submission order.

An arrow that skips a layer (prepare -> evaluate past train) passes each column between
through a slot of its own, as a box would take (a *via*; the dummy nodes of Sugiyama's
layered drawing): it crosses that column on a straight line where no box is, and between
columns it is a curve that stays inside the gap. Arrows from one source share their vias.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

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


@dataclass(frozen=True)
class Via:
    """Where the arrows from ``source`` cross the column of ``layer`` (a slot, no box)."""

    source: str
    layer: int


Slot = str | Via  # a stage, by name, or a via
Point = tuple[int, int]


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
    layers = dataflow.layers(list(by_name), links)
    layer_of = {name: i for i, layer in enumerate(layers) for name in layer}
    chains = {(e.source, e.target): chain(e, layer_of) for e in links}
    columns = arrange(with_vias(layers, chains.values()), steps(chains.values()))
    rows = max((len(c) for c in columns), default=0)
    spots = place(columns, rows)
    boxes = [Box(by_name[name], layer_of[name], *spots[name], cut(name),
                 where(by_name[name], nodes, times, now))
             for column in columns for name in column if isinstance(name, str)]
    arrows = [Arrow(e.source, e.target, e.inputs,
                    route([spots[slot] for slot in chains[(e.source, e.target)]]))
              for e in links]
    width = 2 * PAD + len(columns) * BOX_W + max(len(columns) - 1, 0) * GAP_X
    height = 2 * PAD + rows * BOX_H + max(rows - 1, 0) * GAP_Y
    return Graph(width, height, boxes, arrows)


def chain(link: dataflow.Edge, layer_of: Mapping[str, int]) -> list[Slot]:
    """The slots an arrow passes: its source, a via in each layer between, its target."""
    between = range(layer_of[link.source] + 1, layer_of[link.target])
    return [link.source, *(Via(link.source, layer) for layer in between), link.target]


def with_vias(layers: Sequence[Sequence[str]], chains: Iterable[list[Slot]]) -> list[list[Slot]]:
    """Each layer's stages, then the vias that cross it (each once), in the arrows' order."""
    found: list[list[Slot]] = [list(layer) for layer in layers]
    for slots in chains:
        for via in slots[1:-1]:
            assert isinstance(via, Via)
            if via not in found[via.layer]:
                found[via.layer].append(via)
    return found


def steps(chains: Iterable[list[Slot]]) -> list[tuple[Slot, Slot]]:
    """(from, to) between neighbouring slots of every arrow, each once."""
    return list(dict.fromkeys(pair for slots in chains for pair in pairwise(slots)))


def arrange(layers: Sequence[Sequence[Slot]],
            links: Sequence[tuple[Slot, Slot]]) -> list[list[Slot]]:
    """Each layer ordered by the mean row of its slots' sources (rows of the columns as
    drawn: centred on the tallest), in the layer's order when that ties or there is none."""
    sources: dict[Slot, list[Slot]] = {}
    for source, target in links:
        sources.setdefault(target, []).append(source)
    rows = max((len(layer) for layer in layers), default=0)
    row: dict[Slot, float] = {}
    arranged: list[list[Slot]] = []
    for layer in layers:
        ranked = sorted(enumerate(layer), key=lambda p: (_mean_row(p[1], sources, row), p[0]))
        placed = [name for _, name in ranked]
        offset = (rows - len(layer)) / 2
        row.update({name: i + offset for i, name in enumerate(placed)})
        arranged.append(placed)
    return arranged


def _mean_row(name: Slot, sources: Mapping[Slot, list[Slot]],
              row: Mapping[Slot, float]) -> float:
    found = [row[s] for s in sources.get(name, ())]
    return sum(found) / len(found) if found else 0.0


def place(columns: Sequence[Sequence[Slot]], rows: int) -> dict[Slot, Point]:
    """The top left corner of each slot: columns side by side, each centred on the tallest."""
    spots: dict[Slot, Point] = {}
    for layer, column in enumerate(columns):
        top = PAD + (rows - len(column)) * (BOX_H + GAP_Y) // 2
        for row, slot in enumerate(column):
            spots[slot] = (PAD + layer * (BOX_W + GAP_X), top + row * (BOX_H + GAP_Y))
    return spots


def route(corners: Sequence[Point]) -> str:
    """From the middle of the source's right side to the middle of the target's left: a
    curve across each gap between columns (its control points lie in the gap, so it does
    too), a straight line through each via's slot."""
    (x, y), *rest = corners
    path = f"M{x + BOX_W},{y + BOX_H // 2}"
    for number, (x2, y2) in enumerate(rest):
        x1, y1, mid = x + BOX_W, y + BOX_H // 2, y2 + BOX_H // 2
        bend = GAP_X // 2
        path += f" C{x1 + bend},{y1} {x2 - bend},{mid} {x2},{mid}"
        if number < len(rest) - 1:  # a via: straight across its column
            path += f" L{x2 + BOX_W},{mid}"
        x, y = x2, y2
    return path


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
