"""``bourse clouds``, ``bourse launches``, ``bourse projects limits`` and the launched nodes of
``bourse cost``: what they send, and what they print from real answer shapes."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from bourse.cli import client as seam
from bourse.cli.main import cli
from bourse.core.states import LaunchState
from bourse.protocol.api import CostRow, CostSummary, OfferList, OfferView
from bourse.protocol.clouds import (
    CloudList,
    CloudView,
    LaunchFiguresView,
    LaunchView,
    ProjectLimitsView,
)
from bourse.sdk.client import Client

SPOT = LaunchView(id="l-1", node_id="n-1", node_name="aws-p4d", job_id="j-1", project="default",
                  provider="aws", region="us-east-1", zone="use1-az1",
                  instance_type="p4d.24xlarge", spot=True, price=12.0, on_demand=32.0,
                  instance_id="i-1", state=LaunchState.TERMINATED, requested_at=0.0,
                  launched_at=0.0, enrolled_at=60.0, terminated_at=3600.0, reason="idle",
                  cost=12.0, up_s=3600.0, boot_s=60.0, busy_s=2940.0, idle_s=600.0)


def _answering(monkeypatch: pytest.MonkeyPatch, routes: dict[tuple[str, str], Any],
               seen: list[httpx.Request]) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = routes[(request.method, request.url.path)]
        return httpx.Response(200, json=body.model_dump(mode="json"))

    monkeypatch.setenv("BOURSE_URL", "http://exchange.test")
    monkeypatch.setenv("BOURSE_TOKEN", "cli-token")
    monkeypatch.setattr(seam, "open_client",
                        lambda: Client(transport=httpx.MockTransport(answer)))


def test_clouds_says_which_are_enabled_and_why_not(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = CloudList(clouds=[CloudView(name="aws", enabled=False,
                                         reason="no AWS credentials found", offers=0)],
                       idle_timeout_s=600.0, boot_timeout_s=900.0)
    _answering(monkeypatch, {("GET", "/api/v1/clouds"): listed}, [])
    result = CliRunner().invoke(cli, ["clouds"])
    assert result.exit_code == 0, result.output
    header, row, *notes = result.stdout.splitlines()
    assert header.split() == ["CLOUD", "ENABLED", "REGIONS", "OFFERS", "NOTE"]
    assert row.split()[:2] == ["aws", "no"] and "no AWS credentials found" in row
    assert "10.0 min idle" in notes[0]
    as_json = CliRunner().invoke(cli, ["clouds", "--json"])
    assert json.loads(as_json.stdout)["clouds"][0]["reason"] == "no AWS credentials found"


def test_clouds_says_how_each_enabled_cloud_delivered(monkeypatch: pytest.MonkeyPatch) -> None:
    figures = LaunchFiguresView(window_s=30 * 86400.0, launches=12, enrolled=10, failed=2,
                                success_rate=10 / 12, ready_median_s=190.0, ready_p90_s=360.0)
    listed = CloudList(clouds=[
        CloudView(name="aws", enabled=True, regions=["us-east-1"], offers=40,
                  launch_figures=figures),
        CloudView(name="lambda", enabled=True, offers=3,
                  launch_figures=LaunchFiguresView(window_s=30 * 86400.0)),
        CloudView(name="gcp", enabled=False, reason="no credentials",
                  launch_figures=figures)])
    _answering(monkeypatch, {("GET", "/api/v1/clouds"): listed}, [])
    result = CliRunner().invoke(cli, ["clouds"])
    assert result.exit_code == 0, result.output
    launched = [line for line in result.stdout.splitlines() if " launched: " in line]
    assert launched == ["aws launched: 12 launches in 30 days: 10 ready (83%), 2 failed, "
                        "median 3 min 10 s to enrol (p90 6 min)",
                        "lambda launched: no launch in 30 days"]
    as_json = json.loads(CliRunner().invoke(cli, ["clouds", "--json"]).stdout)
    assert as_json["clouds"][0]["launch_figures"]["success_rate"] == pytest.approx(10 / 12)


def test_launches_lists_boot_idle_and_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    _answering(monkeypatch, {("GET", "/api/v1/launches"): _Launches([SPOT])}, seen)
    result = CliRunner().invoke(cli, ["launches", "--live"])
    assert result.exit_code == 0, result.output
    assert seen[0].url.params["live"] == "true"
    row = result.stdout.splitlines()[1].split()
    assert row[:6] == ["l-1", "aws-p4d", "terminated", "use1-az1", "p4d.24xlarge", "spot"]
    assert "$12.0000" in row


def test_limits_sends_only_what_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    view = ProjectLimitsView(name="ml", clouds=["aws"], cap_hour=20.0, cap_day=None,
                             running_per_hour=12.0, spent_today=30.5)
    _answering(monkeypatch, {("PATCH", "/api/v1/projects/ml/limits"): view,
                             ("GET", "/api/v1/projects/ml/limits"): view}, seen)
    result = CliRunner().invoke(cli, ["projects", "limits", "ml", "--clouds", "aws",
                                      "--cap-hour", "20"])
    assert result.exit_code == 0, result.output
    assert json.loads(seen[0].content) == {"clouds": ["aws"], "cap_hour": 20.0}
    assert "launches on aws; $20.00/h, no cap; launched nodes now $12.00/h" in result.stdout
    shown = CliRunner().invoke(cli, ["projects", "limits", "ml"])
    assert shown.exit_code == 0 and seen[-1].method == "GET"
    lifted = CliRunner().invoke(cli, ["projects", "limits", "ml", "--no-cap", "--clouds", "all"])
    assert json.loads(seen[-1].content) == {"clouds": None, "cap_hour": None, "cap_day": None}
    assert lifted.exit_code == 0
    both = CliRunner().invoke(cli, ["projects", "limits", "ml", "--no-cap", "--cap-day", "5"])
    assert both.exit_code == 2 and "--no-cap" in both.output
    negative = CliRunner().invoke(cli, ["projects", "limits", "ml", "--cap-hour", "-1"])
    assert negative.exit_code == 2


def test_cost_shows_launched_nodes_with_boot_idle_and_spot_saving(
        monkeypatch: pytest.MonkeyPatch) -> None:
    total = CostRow(key="total", attempts=1, cost=9.8)
    summary = CostSummary(by="day", rows=[], total=total, launched=[SPOT])
    _answering(monkeypatch, {("GET", "/api/v1/cost"): summary}, [])
    result = CliRunner().invoke(cli, ["cost"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = lines.index("launched nodes (launch to termination, at their price):")
    header, row, last = lines[at + 1], lines[at + 2].split(), lines[at + 3].split()
    assert header.split()[:4] == ["NODE", "JOB", "TYPE", "MARKET"]
    assert row[-2:] == ["62", "%"]  # $12 against 1 h at $32 on demand
    assert "$32.0000" in row and last[:2] == ["total", "$12.0000"]


class _Launches:
    def __init__(self, views: list[LaunchView]) -> None:
        self.views = views

    def model_dump(self, mode: str) -> dict[str, Any]:
        return {"launches": [v.model_dump(mode=mode) for v in self.views]}


def test_offers_launchable_asks_the_exchange_and_shows_zones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    view = OfferView(id="aws/us-east-1/use1-az4/p4d.24xlarge", provider="aws",
                     instance_type="p4d.24xlarge", region="us-east-1", zone="use1-az4",
                     gpu="a100-40gb", gpu_count=8, cpus=96, memory_gib=1152,
                     price_per_hour=32.77, spot=False)
    answer = OfferList(offers=[view], explanation=["cloud lambda: disabled (no API key)"])
    _answering(monkeypatch, {("POST", "/api/v1/offers"): answer}, seen)
    result = CliRunner().invoke(cli, ["offers", "--launchable", "--gpu", "a100:8"])
    assert result.exit_code == 0, result.output
    sent = json.loads(seen[0].content)
    assert sent["launchable"] is True and sent["compute"]["gpu"]["count"] == 8
    header, row, *rest = result.stdout.splitlines()
    assert header.split()[:3] == ["OFFER", "CLOUD", "INSTANCE"] and header.split()[-1] == "ZONE"
    assert row.split()[-1] == "use1-az4" and "32.7700" in row
    assert rest == ["cloud lambda: disabled (no API key)"]  # the exchange's notes
    as_json = CliRunner().invoke(cli, ["offers", "--launchable", "--gpu", "a100:8", "--json"])
    assert json.loads(as_json.stdout)["offers"][0]["zone"] == "use1-az4"


def test_offers_launchable_with_nothing_says_why_and_exits_1(
        monkeypatch: pytest.MonkeyPatch) -> None:
    answer = OfferList(offers=[], explanation=["this project may launch only on no cloud"])
    _answering(monkeypatch, {("POST", "/api/v1/offers"): answer}, [])
    result = CliRunner().invoke(cli, ["offers", "--launchable", "--gpu", "a100:8"])
    assert result.exit_code == 1
    assert "no offer the exchange's clouds could launch matches" in result.stderr
    assert "may launch only on no cloud" in result.stderr


@pytest.mark.parametrize(("args", "said"), [
    (["--launchable", "--exchange"], "--exchange and --launchable ask different questions"),
    (["--launchable", "--data-region", "us-east-1"], "--data-region ranks the shipped"),
])
def test_offers_refuses_flags_that_do_not_go_together(args: list[str], said: str) -> None:
    result = CliRunner().invoke(cli, ["offers", *args])
    assert result.exit_code == 2, result.output
    assert said in result.stderr
