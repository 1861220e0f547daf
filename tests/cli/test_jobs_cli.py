"""``bourse jobs``, ``bourse jobs show`` and ``bourse stop`` against a fake exchange."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_exchange import NOW, FakeExchange, job_view
from click.testing import CliRunner, Result

from bourse.cli.jobs import age
from bourse.cli.main import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def seed(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "SUCCEEDED", ["python", "train.py", "--lr", "3e-4"],
                              name="first", node_id="n1", exit_code=0))
    exchange.add_job(job_view("j2", "RUNNING", ["bash", "-c", "echo 'hi there'"],
                              node_id="n2", attempt=2))
    exchange.add_job(job_view("j3", "PENDING", pending_reason="no node has an h100"))


def test_list_table_newest_first(exchange: FakeExchange,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # the ages are counted from the fake's NOW (set at import), not from a clock that moved
    # on while a long test session ran
    monkeypatch.setattr("bourse.cli.jobs.time", SimpleNamespace(time=lambda: NOW))
    seed(exchange)
    result = run("jobs")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATE", "NODE", "AGE", "COMMAND"]
    assert [line.split()[0] for line in lines[1:]] == ["j3", "j2", "j1"]
    assert lines[2].split()[:5] == ["j2", "-", "RUNNING", "n2", "5m"]
    assert "bash -c 'echo '\"'\"'hi there'\"'\"''" in lines[2]
    assert "python train.py --lr 3e-4" in lines[3]


def test_list_filters_and_limits(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("jobs", "--state", "running", "--limit", "5")
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.stdout.splitlines()[1:]] == ["j2"]
    params = exchange.requests[-1].url.params
    assert (params["state"], params["limit"]) == ("RUNNING", "5")


def test_list_json(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("jobs", "--json")
    data = json.loads(result.stdout)
    assert [j["id"] for j in data] == ["j3", "j2", "j1"]
    assert data[0]["pending_reason"] == "no node has an h100"


def test_list_empty(exchange: FakeExchange) -> None:
    result = run("jobs", "--state", "FAILED")
    assert (result.exit_code, result.stdout) == (0, "")
    assert "no jobs in state FAILED" in result.stderr


def test_unknown_state_is_bad_input(exchange: FakeExchange) -> None:
    assert run("jobs", "--state", "DONE").exit_code == 2


def test_show(exchange: FakeExchange) -> None:
    seed(exchange)
    exchange.jobs["j2"]["spec"] = {"command": ["python", "t.py"], "env": {"API_KEY": "s3cret"},
                                   "compute": {"gpu": "a100:2", "cpus": "8+"},
                                   "ports": [6006]}
    exchange.attempts["j2"] = [
        {"number": 1, "node_id": "n1", "node_name": "old-box", "state": "LOST",
         "placed_at": NOW - 290, "started_at": NOW - 280, "ended_at": NOW - 200,
         "reason": "node stopped answering", "placement": "cheapest: $0.00/h",
         "price_per_hour": 1.8, "cost": 0.04},
        {"number": 2, "node_id": "n2", "node_name": "gpu-box", "state": "RUNNING",
         "placed_at": NOW - 100, "started_at": NOW - 90, "placement": "only node left"},
    ]
    exchange.events["j2"] = [
        {"id": 1, "job_id": "j2", "attempt": 0, "time": NOW - 300, "kind": "submitted",
         "state": "PENDING"},
        {"id": 2, "job_id": "j2", "attempt": 1, "time": NOW - 290, "kind": "placed",
         "state": "SCHEDULED", "message": "on old-box"},
    ]
    result = run("jobs", "show", "j2")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "state      RUNNING" in out
    assert "compute    a100:2, cpus 8+" in out
    assert "env        API_KEY" in out and "s3cret" not in out
    assert "ports      6006 (/jobs/j2/ports/6006/)" in out
    assert "submitted  PENDING" in out and "placed  SCHEDULED  on old-box" in out
    attempts = out.split("attempts\n")[1].splitlines()
    assert attempts[0].split() == ["#", "NODE", "STATE", "PLACED", "STARTED", "ENDED", "EXIT",
                                   "$/H", "COST", "LOST", "REASON"]
    assert attempts[1].split()[:3] == ["1", "old-box", "LOST"]
    assert "$1.8000" in attempts[1] and "$0.0400" in attempts[1]
    assert "node stopped answering" in attempts[1]
    assert "placement #2: only node left" in out


def test_show_lists_each_member_of_a_gang(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("g", "RUNNING", node_id="n1", attempt=1))
    exchange.jobs["g"]["spec"] = {"command": ["python", "t.py"],
                                  "compute": {"num_nodes": 2}}
    exchange.attempts["g"] = [
        {"number": 1, "rank": r, "node_id": f"n{r}", "node_name": f"box-{r}",
         "state": "RUNNING", "placed_at": NOW - 100, "placement": f"member {r}"}
        for r in (0, 1)]
    out = run("jobs", "show", "g").stdout
    assert "compute    2 nodes, each no GPU" in out
    rows = out.split("attempts\n")[1].splitlines()
    assert [row.split()[:2] for row in rows[1:3]] == [["1.0", "box-0"], ["1.1", "box-1"]]
    assert "placement #1.1: member 1" in out


def test_show_json(exchange: FakeExchange) -> None:
    seed(exchange)
    data = json.loads(run("jobs", "show", "j1", "--json").stdout)
    assert (data["id"], data["state"], data["attempts"], data["events"]) == (
        "j1", "SUCCEEDED", [], [])


EXPLAINED = ("2 offers considered for h100:1\n  gpu          removed       2  (0 left)\n"
             "0 matched\nnearest rejected offers:\n  n-a: has no GPU")


def test_show_lays_out_a_pending_reason_of_several_lines_under_its_key(
        exchange: FakeExchange) -> None:
    """The matcher's explanation, as placement stores it, keeps its lines and columns."""
    exchange.add_job(job_view("j4", "PENDING", pending_reason=EXPLAINED))
    out = run("jobs", "show", "j4").stdout.splitlines()
    start = out.index("pending    2 offers considered for h100:1")
    assert out[start + 1:start + 5] == [
        "             gpu          removed       2  (0 left)",
        "           0 matched",
        "           nearest rejected offers:",
        "             n-a: has no GPU"]
    assert json.loads(run("jobs", "show", "j4", "--json").stdout)["pending_reason"] == EXPLAINED


def test_show_unknown_job(exchange: FakeExchange) -> None:
    result = run("jobs", "show", "nope")
    assert result.exit_code == 1
    assert result.stderr == "error: no job nope — list jobs with `bourse jobs`\n"


def test_stop(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("stop", "j2")
    assert (result.exit_code, result.stdout) == (0, "j2: stopping\n")
    request = exchange.requests[-1]
    assert (request.method, request.url.path) == ("POST", "/api/v1/jobs/j2/cancel")


def test_stop_an_ended_job_is_a_conflict(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("stop", "j1")
    assert result.exit_code == 1
    assert "already ended" in result.stderr


def test_bad_token_exits_2(exchange: FakeExchange, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOURSE_TOKEN", "wrong")
    result = run("jobs")
    assert result.exit_code == 2
    assert "bad token" in result.stderr and "bourse login" in result.stderr


def test_not_configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("BOURSE_URL", raising=False)
    monkeypatch.delenv("BOURSE_TOKEN", raising=False)
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path))
    result = run("jobs")
    assert result.exit_code == 2
    assert "bourse up" in result.stderr


def test_age() -> None:
    assert [age(s) for s in (-1, 5, 61, 7200, 3 * 86400)] == ["0s", "5s", "1m", "2h", "3d"]


def test_show_data(exchange: FakeExchange) -> None:
    seed(exchange)
    exchange.jobs["j1"]["spec"] = {
        "command": ["python", "t.py"], "inputs": {"data": "s3://datasets/digits/"},
        "outputs": {"model": "s3://res/m/", "logs": "s3://res/l/"},
        "checkpoint": "s3://bourse/jobs/j1/checkpoints/"}
    exchange.jobs["j1"]["outputs"] = {"model": "s3://res/m/"}
    exchange.events["j1"] = [
        {"id": 1, "job_id": "j1", "attempt": 1, "time": NOW - 100, "kind": "preparing",
         "message": "inputs: 1.2 GB / 2.0 GB, 310 MB/s", "data": {"step": "inputs"}}]
    out = run("jobs", "show", "j1").stdout
    assert "inputs     data=s3://datasets/digits/" in out
    assert "outputs    model=s3://res/m/ (uploaded), logs=s3://res/l/" in out
    assert "checkpoint s3://bourse/jobs/j1/checkpoints/" in out
    assert "#1  preparing  inputs: 1.2 GB / 2.0 GB, 310 MB/s" in out


def test_show_lists_what_the_node_kept(exchange: FakeExchange) -> None:
    seed(exchange)
    exchange.jobs["j1"]["spec"] = {"command": ["python", "train.py"]}
    exchange.jobs["j1"]["outputs"] = {"lightning_logs": "s3://bourse/jobs/j1/lightning_logs/"}
    out = run("jobs", "show", "j1").stdout
    assert "outputs    lightning_logs=s3://bourse/jobs/j1/lightning_logs/ (kept by the node)" \
        in out
