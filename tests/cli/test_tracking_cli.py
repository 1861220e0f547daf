"""``bourse experiments``, ``bourse runs compare`` and ``bourse metrics``: what they ask the
read API (repeated ``run``/``key`` parameters, the points) and how they show the answers:
differing params marked, each metric's latest, min and max (marked ``~`` when the curve was
downsampled), a curve as a table, CSV or JSON."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from bourse.cli import client as seam
from bourse.cli.main import cli
from bourse.protocol.tracking import (
    ChartView,
    ExperimentList,
    ExperimentView,
    LatestMetric,
    SeriesView,
    TrackedRunDetail,
)
from bourse.sdk.client import Client

Answer = Callable[[httpx.Request], httpx.Response]


def _run(run_id: str, lr: str, loss: float) -> TrackedRunDetail:
    return TrackedRunDetail(run_id=run_id, experiment_id="1", name=f"n-{run_id}", status="FINISHED",
                     lifecycle_stage="active", start_time=0,
                     params={"lr": lr, "batch": "64"},
                     metrics={"loss": LatestMetric(value=loss, step=2, timestamp=1, count=3)})


RUNS = {"a": _run("a", "1e-3", 0.2), "b": _run("b", "1e-2", 0.4)}
CURVES = {"a": [(0, 1.0), (1, 0.1), (2, 0.2)], "b": [(0, 0.9), (2, 0.4)]}


def answer(request: httpx.Request) -> httpx.Response:
    path = request.url.path.removeprefix("/api/v1/tracking")
    body: BaseModel
    if path == "/experiments":
        body = ExperimentList(experiments=[ExperimentView(
            experiment_id="0", name="Default", lifecycle_stage="active", created_at=0)])
    elif path.startswith("/runs/"):
        run = RUNS.get(path.removeprefix("/runs/"))
        if run is None:
            return httpx.Response(404, json={"error": f"no run {path[6:]!r} in this project"})
        body = run
    elif path == "/chart":
        runs, keys = request.url.params.get_list("run"), request.url.params.get_list("key")
        points = int(request.url.params["points"])  # 50: the metrics test's, downsampled
        body = ChartView(series=[SeriesView(
            run_id=r, key=k, total=len(CURVES[r]) * (1000 if points < 100 else 1) + (r == "b"),
            points=CURVES[r]) for r in runs for k in keys])
    else:
        return httpx.Response(404, json={"error": "unknown"})
    return httpx.Response(200, json=body.model_dump(mode="json"))


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    requests: list[httpx.Request] = []

    def recorded(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return answer(request)

    monkeypatch.setenv("BOURSE_URL", "http://exchange.test")
    monkeypatch.setenv("BOURSE_TOKEN", "cli-token")
    monkeypatch.setattr(seam, "open_client",
                        lambda: Client(transport=httpx.MockTransport(recorded)))
    return requests


def test_experiments_are_listed(sent: list[httpx.Request]) -> None:
    result = CliRunner().invoke(cli, ["experiments"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].split()[:3] == ["0", "Default", "active"]
    as_json = CliRunner().invoke(cli, ["experiments", "--json"])
    assert json.loads(as_json.stdout)[0]["name"] == "Default"


def test_compare_marks_the_differing_params_and_shows_min_and_max(
        sent: list[httpx.Request]) -> None:
    result = CliRunner().invoke(cli, ["runs", "compare", "a", "b"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["PARAM", "n-a", "n-b"]
    assert lines[1].split() == ["batch", "64", "64"] and lines[2].split() == ["*", "lr",
                                                                             "1e-3", "1e-2"]
    loss = next(line for line in lines if line.startswith("loss"))
    assert loss.split() == ["loss", "0.2", "0.1..1", "0.4", "~0.4..0.9"]  # b's: downsampled
    assert "~: min..max of the curve downsampled" in result.stdout
    chart = next(r for r in sent if r.url.path.endswith("/chart"))
    assert chart.url.params.get_list("run") == ["a", "b"]
    assert chart.url.params.get_list("key") == ["loss"] and chart.url.params["points"] == "10000"


def test_compare_as_json(sent: list[httpx.Request]) -> None:
    result = CliRunner().invoke(cli, ["runs", "compare", "a", "b", "--json"])
    found = json.loads(result.stdout)
    assert found["differing_params"] == ["lr"]
    assert found["metrics"]["a"]["loss"] == {"latest": 0.2, "step": 2, "count": 3, "min": 0.1,
                                             "max": 1.0, "exact": True}
    assert found["metrics"]["b"]["loss"]["exact"] is False


def test_compare_names_a_run_it_cannot_see(sent: list[httpx.Request]) -> None:
    result = CliRunner().invoke(cli, ["runs", "compare", "a", "zzz"])
    assert result.exit_code != 0 and "no run 'zzz' in this project" in result.output


def test_a_metric_as_a_table_csv_and_json(sent: list[httpx.Request]) -> None:
    shown = CliRunner().invoke(cli, ["metrics", "a", "loss", "--points", "50"])
    assert shown.exit_code == 0, shown.output
    assert [line.split() for line in shown.stdout.splitlines()] == [
        ["STEP", "LOSS"], ["0", "1"], ["1", "0.1"], ["2", "0.2"]]
    assert "3 of 3,000 points (downsampled" in shown.stderr
    assert sent[0].url.path == "/api/v1/tracking/chart"  # a key may hold a "/"
    assert dict(sent[0].url.params) == {"run": "a", "key": "loss", "points": "50"}
    as_csv = CliRunner().invoke(cli, ["metrics", "a", "loss", "--csv"])
    assert as_csv.stdout == "step,loss\n0,1.0\n1,0.1\n2,0.2\n"
    as_json = CliRunner().invoke(cli, ["metrics", "a", "loss", "--json"])
    assert json.loads(as_json.stdout)["points"] == [[0, 1.0], [1, 0.1], [2, 0.2]]
    refused = CliRunner().invoke(cli, ["metrics", "a", "loss", "--points", "2"])
    assert refused.exit_code == 2 and "--points" in refused.output
