"""``bourse runs show``: a run's jobs, each with the stages its stage reads from;
``bourse runs --app``: runs found by their app's name."""

from __future__ import annotations

import httpx
import pytest
from click.testing import CliRunner

from bourse.cli import client as seam
from bourse.cli.main import cli
from bourse.cli.runs import describe_run
from bourse.protocol.api import JobView, RunDetail, RunEdge, RunList, RunView
from bourse.protocol.common import JobSpec
from bourse.sdk.client import Client

T0 = 1_700_000_000.0


def job(job_id: str, stage: str | None) -> JobView:
    return JobView(id=job_id, state="SUCCEEDED", created_at=T0, updated_at=T0 + 3, attempt=1,
                   spec=JobSpec(command=["x"], run="r-1", stage=stage))


def test_each_job_names_the_stages_it_runs_after() -> None:
    run = RunDetail(id="r-1", state="SUCCEEDED", stages=4, started_at=T0, driver="j-0",
                    jobs=[job("j-0", None), job("j-1", "prepare"), job("j-2", "left"),
                          job("j-3", "right"), job("j-4", "merge")],
                    edges=[RunEdge(source="prepare", target="left", inputs=["data"]),
                           RunEdge(source="prepare", target="right", inputs=["data"]),
                           RunEdge(source="left", target="merge", inputs=["a"]),
                           RunEdge(source="right", target="merge", inputs=["b"])])

    lines = "\n".join(describe_run(run, T0 + 10)).splitlines()

    header = next(line for line in lines if line.startswith("STAGE"))
    assert header.split() == ["STAGE", "JOB", "STATE", "NODE", "DURATION", "COST", "AFTER"]
    rows = {line.split()[1]: line.rstrip() for line in lines if line.split()[1:2]
            and line.split()[1].startswith("j-")}
    assert rows["j-0"].endswith(" -") and rows["j-1"].endswith(" -")
    assert rows["j-2"].endswith(" prepare") and rows["j-3"].endswith(" prepare")
    assert rows["j-4"].endswith(" left, right")


def _listing(monkeypatch: pytest.MonkeyPatch, runs: list[RunView]) -> list[httpx.Request]:
    """The CLI's client on a transport that answers ``GET /runs`` with ``runs``; the requests
    it was sent."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=RunList(runs=runs).model_dump(mode="json"))

    monkeypatch.setenv("BOURSE_URL", "http://exchange.test")
    monkeypatch.setenv("BOURSE_TOKEN", "cli-token")
    monkeypatch.setattr(seam, "open_client",
                        lambda: Client(transport=httpx.MockTransport(answer)))
    return sent


def test_runs_are_listed_by_app_name(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = _listing(monkeypatch, [RunView(id="r-9", app="digits.py", state="RUNNING", stages=2,
                                          started_at=T0)])
    result = CliRunner().invoke(cli, ["runs", "--app", "digits"])
    assert result.exit_code == 0, result.output
    assert sent[0].url.path == "/api/v1/runs"
    assert dict(sent[0].url.params) == {"limit": "50", "app": "digits"}
    assert result.stdout.splitlines()[1].split()[:3] == ["r-9", "digits.py", "RUNNING"]


def test_no_run_of_that_app_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = _listing(monkeypatch, [])
    result = CliRunner().invoke(cli, ["runs", "--app", "whisper", "--limit", "5"])
    assert result.exit_code == 0
    assert dict(sent[0].url.params) == {"limit": "5", "app": "whisper"}
    assert result.stderr == "no runs of an app named like 'whisper'\n"
    CliRunner().invoke(cli, ["runs"])
    assert dict(sent[1].url.params) == {"limit": "50"}  # no filter without --app


def test_a_stage_names_its_node() -> None:
    named = job("j-1", "train").model_copy(update={"node_id": "n-7f", "node_name": "gpu-box"})
    unnamed = job("j-2", "eval").model_copy(update={"node_id": "n-8a"})
    run = RunDetail(id="r-1", state="RUNNING", stages=2, started_at=T0,
                    jobs=[named, unnamed], edges=[])
    lines = "\n".join(describe_run(run, T0 + 10)).splitlines()
    rows = {line.split()[1]: line.split()[3] for line in lines
            if line.startswith(("train", "eval"))}
    assert rows == {"j-1": "gpu-box", "j-2": "n-8a"}
