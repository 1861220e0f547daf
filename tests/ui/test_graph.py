"""A run's stages laid out as a graph: columns by dependency, rows by their sources, arrows
between the boxes; tables of cases, no server."""

from __future__ import annotations

import re

from bourse.server.ui import graph
from bourse.server.ui.graph import BOX_H, BOX_W, GAP_X, GAP_Y, PAD
from bourse.server.ui.views import Run, Stage

T0 = 1_700_000_000.0
ROOT = "s3://bourse/runs/r-1"


def stage(name: str, reads: tuple[str, ...] = (), writes: bool = True, *,
          node: str | None = "n-1", state: str = "SUCCEEDED") -> Stage:
    """A stage reading the output of each stage in ``reads``, writing ``out`` (if ``writes``)."""
    inputs = {f"in_{r}".replace("-", "_"): f"{ROOT}/{r}/out/" for r in reads}
    outputs = {"out": f"{ROOT}/{name}/out/"} if writes else {}
    return Stage(name, f"j-{name}", state, T0, node, inputs, outputs)


def draw(*stages: Stage, times: graph.Times | None = None, now: float = T0) -> graph.Graph:
    return graph.draw(Run("r-1", stages), {"n-1": "gpu-box"}, times or {}, now)


def spots(drawn: graph.Graph) -> dict[str, tuple[int, int, int]]:
    """stage -> (layer, x, y)."""
    return {b.stage.name: (b.layer, b.x, b.y) for b in drawn.boxes}


def test_a_fan_out_and_fan_in_is_a_diamond_centred_on_its_widest_column() -> None:
    drawn = draw(stage("prepare"), stage("left", ("prepare",)), stage("right", ("prepare",)),
                 stage("merge", ("left", "right"), writes=False))
    column, row, half = BOX_W + GAP_X, BOX_H + GAP_Y, (BOX_H + GAP_Y) // 2
    assert spots(drawn) == {
        "prepare": (0, PAD, PAD + half), "left": (1, PAD + column, PAD),
        "right": (1, PAD + column, PAD + row), "merge": (2, PAD + 2 * column, PAD + half)}
    assert [(a.source, a.target, a.inputs) for a in drawn.arrows] == [
        ("prepare", "left", ("in_prepare",)), ("prepare", "right", ("in_prepare",)),
        ("left", "merge", ("in_left",)), ("right", "merge", ("in_right",))]
    assert (drawn.width, drawn.height) == (2 * PAD + 3 * BOX_W + 2 * GAP_X,
                                           2 * PAD + 2 * BOX_H + GAP_Y)


def test_an_arrow_runs_from_the_right_of_its_source_to_the_left_of_its_target() -> None:
    drawn = draw(stage("a"), stage("b", ("a",)))
    [arrow] = drawn.arrows
    x1, y, x2 = PAD + BOX_W, PAD + BOX_H // 2, PAD + BOX_W + GAP_X
    bend = GAP_X // 2
    assert arrow.path == f"M{x1},{y} C{x1 + bend},{y} {x2 - bend},{y} {x2},{y}"


def test_independent_stages_stack_in_one_column_in_submission_order() -> None:
    drawn = draw(stage("one", writes=False), stage("two"), stage("three", ("elsewhere",)))
    assert [(b.stage.name, b.layer, b.y) for b in drawn.boxes] == [
        ("one", 0, PAD), ("two", 0, PAD + BOX_H + GAP_Y), ("three", 0, PAD + 2 * (BOX_H + GAP_Y))]
    assert drawn.arrows == []


def test_a_stage_sits_near_its_sources_so_parallel_branches_do_not_cross() -> None:
    # submitted as a, b, then b's successor before a's: drawn on their sources' rows
    drawn = draw(stage("a"), stage("b"), stage("after-b", ("b",)), stage("after-a", ("a",)))
    rows = {b.stage.name: b.y for b in drawn.boxes}
    assert rows["after-a"] == rows["a"] < rows["after-b"] == rows["b"]


def test_a_box_says_where_and_for_how_long_its_stage_ran() -> None:
    drawn = draw(stage("done"), stage("running", node="n-gone", state="RUNNING"),
                 stage("waiting", node=None, state="PENDING"), stage("placed", state="STARTING"),
                 times={"j-done": (T0 + 1, T0 + 13.4), "j-running": (T0 + 2, None)},
                 now=T0 + 62)
    assert {b.stage.name: b.where for b in drawn.boxes} == {
        "done": "gpu-box · 12 s", "running": "n-gone · 1 min 0 s", "waiting": "not placed",
        "placed": "gpu-box"}


def test_a_long_name_is_cut_to_fit_its_box() -> None:
    long = "a-stage-name-that-is-far-too-long"
    [box] = draw(stage(long)).boxes
    assert box.label == long[:graph.NAME_CHARS - 1] + "…" and box.stage.name == long
    assert graph.cut("short") == "short"


def test_an_empty_run_draws_nothing() -> None:
    drawn = draw()
    assert (drawn.boxes, drawn.arrows, drawn.width, drawn.height) == ([], [], 2 * PAD, 2 * PAD)


def points(path: str, steps: int = 50) -> list[tuple[float, float]]:
    """Points along SVG path data made of M, C and L commands (what ``graph.route`` writes)."""
    found: list[tuple[float, float]] = []
    for command, numbers in re.findall(r"([MCL])([^MCL]*)", path):
        xy = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", numbers)]
        ends = list(zip(xy[::2], xy[1::2], strict=True))
        if command == "C":
            (x0, y0), (c1, c2, end) = found[-1], ends
            found += [_bezier((x0, y0), c1, c2, end, i / steps) for i in range(1, steps + 1)]
        elif command == "L":
            (x0, y0), (x1, y1) = found[-1], ends[0]
            found += [(x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps)
                      for i in range(1, steps + 1)]
        else:
            found.append(ends[0])
    return found


def _bezier(p0: tuple[float, float], p1: tuple[float, float], p2: tuple[float, float],
            p3: tuple[float, float], t: float) -> tuple[float, float]:
    weights = ((1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t ** 2, t ** 3)
    return (sum(w * p[0] for w, p in zip(weights, (p0, p1, p2, p3), strict=True)),
            sum(w * p[1] for w, p in zip(weights, (p0, p1, p2, p3), strict=True)))


def inside(point: tuple[float, float], box: graph.Box) -> bool:
    x, y = point
    return box.x < x < box.x + BOX_W and box.y < y < box.y + BOX_H


def crossed(drawn: graph.Graph) -> list[tuple[str, str, str]]:
    """(arrow's source, its target, a box it passes through)."""
    return [(a.source, a.target, b.stage.name) for a in drawn.arrows for b in drawn.boxes
            if any(inside(p, b) for p in points(a.path))]


def test_an_arrow_that_skips_a_layer_goes_around_the_box_between() -> None:
    # the demo app: evaluate reads prepare's test set and train's model
    drawn = draw(stage("prepare"), stage("train", ("prepare",)),
                 stage("evaluate", ("prepare", "train"), writes=False))
    assert [(b.stage.name, b.layer) for b in drawn.boxes] == [
        ("prepare", 0), ("train", 1), ("evaluate", 2)]
    assert {(a.source, a.target) for a in drawn.arrows} == {
        ("prepare", "train"), ("train", "evaluate"), ("prepare", "evaluate")}
    assert crossed(drawn) == []
    skip = next(a for a in drawn.arrows if a.target == "evaluate" and a.source == "prepare")
    assert " L" in skip.path  # it crosses train's column where no box is
    assert drawn.height == 2 * PAD + 2 * BOX_H + GAP_Y  # a row for the arrow's passage


def test_arrows_from_one_source_share_their_way_past_the_columns_between() -> None:
    drawn = draw(stage("a"), stage("b", ("a",)), stage("c", ("b",)),
                 stage("d", ("a", "c"), writes=False), stage("e", ("a", "c"), writes=False))
    assert crossed(drawn) == []
    assert drawn.height == 2 * PAD + 2 * BOX_H + GAP_Y  # one passage for a's two arrows


def test_a_long_chain_with_skips_crosses_no_box() -> None:
    names = [f"s{i}" for i in range(6)]
    stages = [stage(n, tuple(names[max(0, i - 3):i])) for i, n in enumerate(names)]
    drawn = draw(*stages)
    assert len(drawn.arrows) == 12
    assert crossed(drawn) == []


def test_the_old_straight_arrow_would_have_crossed_the_box_between() -> None:
    """The check above can fail: an arrow drawn straight from prepare to evaluate crosses
    train."""
    drawn = draw(stage("prepare"), stage("train", ("prepare",)),
                 stage("evaluate", ("prepare", "train"), writes=False))
    at = {b.stage.name: b for b in drawn.boxes}
    straight = (f"M{at['prepare'].x + BOX_W},{at['train'].y + BOX_H // 2} "
                f"L{at['evaluate'].x},{at['train'].y + BOX_H // 2}")
    assert any(inside(p, at["train"]) for p in points(straight))
