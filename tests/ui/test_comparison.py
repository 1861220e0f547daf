"""The tracking pages' view models (``server.ui.comparison``): which params differ, how a
table orders and shows its columns, and how curves of several runs share one x axis."""

from __future__ import annotations

import math

import pytest

from bourse.protocol.tracking import LatestMetric, RunMove, RunView, SeriesView
from bourse.server.ui.comparison import (
    differs,
    metric_text,
    move_marks,
    overlay,
    overlays,
    table,
    visible_tags,
)


def _run(run_id: str, params: dict[str, str], **metrics: float | None) -> RunView:
    return RunView(run_id=run_id, experiment_id="1", name=run_id, status="FINISHED",
                   lifecycle_stage="active", start_time=0, params=params,
                   metrics={k: LatestMetric(value=v, step=1, timestamp=1, count=2)
                            for k, v in metrics.items()})


@pytest.mark.parametrize(("values", "expected"), [
    (["1e-3", "1e-3"], False), (["1e-3", "1e-2"], True),
    (["1e-3", None], True),  # a run without the param differs from one with it
    ([None, None], False), (["x"], False), ([], False),
])
def test_a_param_differs_when_its_runs_do_not_all_hold_one_value(
        values: list[str | None], expected: bool) -> None:
    assert differs(values) is expected


@pytest.mark.parametrize(("value", "text"), [
    (0.123456789, "0.123457"), (1e-9, "1e-09"), (12345678.0, "1.23457e+07"), (2.0, "2"),
    (None, "NaN"), (math.nan, "NaN"),
])
def test_metric_text(value: float | None, text: str) -> None:
    assert metric_text(value) == text


def test_a_table_puts_the_differing_params_first_then_the_metrics() -> None:
    runs = [_run("a", {"batch": "64", "lr": "1e-3", "seed": "1"}, loss=0.5),
            _run("b", {"batch": "64", "lr": "1e-2"}, loss=None, acc=0.9)]
    found = table(runs)
    assert [(c.kind, c.key, c.differs) for c in found.columns] == [
        ("param", "lr", True), ("param", "seed", True), ("param", "batch", False),
        ("metric", "acc", False), ("metric", "loss", False)]
    assert found.differing == ("lr", "seed")
    assert [[c.text for c in row.cells] for row in found.rows] == [
        ["1e-3", "1", "64", "-", "0.5"], ["1e-2", "-", "64", "0.9", "NaN"]]
    assert [c.sort for c in found.rows[1].cells] == ["1e-2", "", "64", "0.9", ""]


def test_an_empty_table() -> None:
    assert table([]).columns == () and table([]).rows == ()


def test_curves_of_several_runs_share_the_union_of_their_steps() -> None:
    a = SeriesView(run_id="a", key="loss", total=3, points=[(0, 1.0), (2, 0.5), (4, 0.25)])
    b = SeriesView(run_id="b", key="loss", total=10, points=[(1, 0.9), (2, 0.6)])
    found = overlay("loss", [a, b], {"a": "first"})
    assert found.x == [0, 1, 2, 4] and found.runs == ("first", "b") and found.total == 13
    assert found.y == [[1.0, None, 0.5, 0.25], [None, 0.9, 0.6, None]]


def test_overlays_leave_out_the_runs_without_points_for_a_key() -> None:
    series = [SeriesView(run_id="a", key="loss", total=1, points=[(0, 1.0)]),
              SeriesView(run_id="b", key="loss", total=0, points=[]),
              SeriesView(run_id="b", key="acc", total=1, points=[(3, 0.5)])]
    charts = overlays(series, ["acc", "loss", "nothing"], {})
    assert [(c.key, c.runs) for c in charts] == [("acc", ("b",)), ("loss", ("a",)),
                                                  ("nothing", ())]


def test_mlflows_own_tags_come_after_the_users() -> None:
    tags = {"mlflow.runName": "r", "team": "a", "bourse.job_id": "j"}
    assert [k for k, _ in visible_tags(tags)] == ["bourse.job_id", "team", "mlflow.runName"]


def test_a_runs_moves_are_marked_at_their_steps_and_one_without_a_step_is_not() -> None:
    moves = [RunMove(time=1.0, attempt=1, from_compute="1 cpu", to_compute="2 nodes",
                     why="eta > 6h", step=28),
             RunMove(time=2.0, attempt=2, from_compute="2 nodes", to_compute="a local run"),
             RunMove(time=3.0, attempt=3, from_compute="2 nodes", to_compute="4 nodes",
                     step=0)]
    assert move_marks(moves) == [
        {"step": 28, "attempt": 1, "label": "1 cpu → 2 nodes", "why": "eta > 6h"},
        {"step": 0, "attempt": 3, "label": "2 nodes → 4 nodes", "why": None}]
