"""``bourse nodes`` and ``bourse nodes show`` against a fake exchange."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_exchange import NOW, FakeExchange
from click.testing import CliRunner, Result

from bourse.cli.main import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def node(node_id: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"id": node_id, "name": name, "state": "online", "keep_alive_s": 30,
            "created_at": NOW - 86400, **extra}


GPU = {"model": "h100-80gb", "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}
CAPS = {"hostname": "box1", "cpus": 32, "memory_gib": 251.4, "disk_free_gib": 900,
        "gpus": [GPU, GPU], "driver": "550.54", "cpu_model": "EPYC"}


def seed(exchange: FakeExchange) -> None:
    exchange.nodes = [
        node("n1", "gpu-box", capabilities=CAPS, connected=True, last_seen=NOW,
             running=["j1", "j2"], price=1.5),
        node("n2", "laptop", state="offline", last_seen=NOW - 7200),
    ]


def test_table(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("nodes")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATE", "VERIFIED", "CPUS", "MEMORY", "GPUS",
                                "LAST", "SEEN", "RUNNING"]
    assert lines[1].split() == ["n1", "gpu-box", "online", "unverified", "32", "251GiB", "2x",
                                "h100-80gb", "now", "2"]
    assert lines[2].split() == ["n2", "laptop", "offline", "unverified", "-", "-", "-", "2h",
                                "ago", "0"]


def test_json(exchange: FakeExchange) -> None:
    seed(exchange)
    data = json.loads(run("nodes", "--json").stdout)
    assert [n["id"] for n in data] == ["n1", "n2"]
    assert data[0]["capabilities"]["gpus"][0]["model"] == "h100-80gb"


def test_empty(exchange: FakeExchange) -> None:
    result = run("nodes")
    assert (result.exit_code, result.stdout) == (0, "")
    assert "no nodes" in result.stderr


def test_show(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("nodes", "show", "n1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "running      j1, j2" in out
    assert "gpus         2x h100-80gb" in out
    assert "gpu 1: NVIDIA H100 80GB HBM3 (81559 MiB)" in out
    assert "price        1.50/h" in out
    assert json.loads(run("nodes", "show", "n1", "--json").stdout)["name"] == "gpu-box"


def test_show_says_which_python_jobs_run_with(exchange: FakeExchange) -> None:
    python = {"name": "python", "version": "3.12.3", "path": "/opt/venv/bin/python"}
    exchange.nodes = [node("n1", "gpu-box", capabilities={**CAPS, "job_python": python})]
    assert "job python   /opt/venv/bin/python (3.12.3)" in run("nodes", "show", "n1").stdout
    shown = json.loads(run("nodes", "show", "n1", "--json").stdout)
    assert shown["capabilities"]["job_python"] == python
    seed(exchange)  # an agent from before: nothing said
    assert "job python" not in run("nodes", "show", "n1").stdout


def test_show_unknown(exchange: FakeExchange) -> None:
    result = run("nodes", "show", "n9")
    assert result.exit_code == 1
    assert "no node n9" in result.stderr


def test_show_by_name(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("nodes", "show", "gpu-box")
    assert result.exit_code == 0, result.output
    assert "id           n1" in result.stdout
    exchange.nodes.append(node("n3", "gpu-box"))
    twice = run("nodes", "show", "gpu-box")
    assert twice.exit_code == 2
    assert "2 nodes are named 'gpu-box'" in twice.stderr and "n1, n3" in twice.stderr
    assert run("nodes", "show", "nobody").exit_code == 1


def test_show_says_what_the_exchange_measured(exchange: FakeExchange) -> None:
    measured = {"observed_s": 3 * 86400, "availability": 0.992, "attempts_ended": 40,
                "attempts_interrupted": 1, "work_h": 50.0, "interruptions_per_hour": 0.02,
                "score": 0.967}
    exchange.nodes = [node("n1", "gpu-box", capabilities=CAPS, reliability=measured),
                      node("n2", "laptop", reliability={
                          "observed_s": 600, "availability": 1.0, "attempts_ended": 0,
                          "attempts_interrupted": 0, "work_h": 0.0})]
    shown = run("nodes", "show", "n1")
    assert shown.exit_code == 0, shown.output
    assert ("reliability  99.2% available over 3.0 d; 1 of 40 attempts interrupted (0.02/h of "
            "work); score 0.967") in shown.stdout
    young = run("nodes", "show", "n2")
    assert "reliability  not measured yet: watched 10 min of the 1.0 h it takes" in young.stdout
    as_json = run("nodes", "show", "n1", "--json")
    assert json.loads(as_json.stdout)["reliability"]["score"] == 0.967
    exchange.nodes = [node("n1", "gpu-box", capabilities=CAPS, reliability={
        **measured, "declared": 0.995, "meets_declared": False})]
    promised = run("nodes", "show", "n1")
    assert "score 0.967; declared 99.5%, measured 96.7%: below it" in promised.stdout


@pytest.mark.parametrize("value", ["lots", "150%", "0", "-0.5"])
def test_a_bad_declared_sla_is_refused_before_the_agent_starts(tmp_path: Path,
                                                                value: str) -> None:
    result = CliRunner().invoke(cli, ["agent", "--server", "http://127.0.0.1:1",
                                      "--work-dir", str(tmp_path / "w"), "--declare-sla", value])
    assert result.exit_code != 0 and "--declare-sla" in result.output, result.output
    assert not (tmp_path / "w").exists()
