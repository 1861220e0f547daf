"""``bourse cost``: SAVED only where spot attempts ran, against their on-demand price."""

from __future__ import annotations

import httpx
import pytest
from click.testing import CliRunner

from bourse.cli import client as seam
from bourse.cli.main import cli
from bourse.protocol.api import CostRow, CostSummary
from bourse.sdk.client import Client


def _answering(monkeypatch: pytest.MonkeyPatch, summary: CostSummary) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/cost"
        return httpx.Response(200, json=summary.model_dump(mode="json"))

    monkeypatch.setenv("BOURSE_URL", "http://exchange.test")
    monkeypatch.setenv("BOURSE_TOKEN", "cli-token")
    monkeypatch.setattr(seam, "open_client",
                        lambda: Client(transport=httpx.MockTransport(answer)))


def test_saved_is_shown_for_spot_work_only(monkeypatch: pytest.MonkeyPatch) -> None:
    on_demand = CostRow(key="cpu-box", attempts=2, cost=0.08, on_demand_cost=0.08)
    spot = CostRow(key="spot-box", attempts=1, cost=0.01, on_demand_cost=0.04, spot_cost=0.01,
                   spot_on_demand_cost=0.04, preempted=1)
    total = CostRow(key="total", attempts=3, cost=0.09, on_demand_cost=0.12, spot_cost=0.01,
                    spot_on_demand_cost=0.04, preempted=1)
    _answering(monkeypatch, CostSummary(by="node", rows=[on_demand, spot], total=total))
    result = CliRunner().invoke(cli, ["cost", "--by", "node"])
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["NODE", "ATTEMPTS", "PREEMPTED", "COST", "ON", "DEMAND", "SAVED",
                              "LOST", "WORK"]
    saved = {row.split()[0]: row.split()[5:7] for row in rows}
    assert saved["cpu-box"][0] == "-"  # an on-demand node saves nothing, though it is split
    assert saved["spot-box"] == ["75", "%"]
    assert saved["total"] == ["75", "%"]  # of the spot work, not of everything
