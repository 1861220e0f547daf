"""``bourse jobs metrics`` and the stall line of ``bourse jobs show``, against a fake exchange."""

from __future__ import annotations

import json
from datetime import datetime

from cli_exchange import NOW, FakeExchange, job_view
from click.testing import CliRunner, Result

from bourse.cli.main import cli

GPU = {"index": 0, "utilization_percent": 97.0, "memory_used_mib": 30720.0,
       "memory_total_mib": 81920.0, "power_w": 412.4, "temperature_c": 71.0}
STALL = {"kind": "no_progress", "since": NOW - 400, "attempt": 1,
         "message": "it printed nothing and used at most 0.2 % CPU for 5 min",
         "evidence": {"max_cpu_percent": 0.2}}


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def seed(exchange: FakeExchange) -> None:
    samples = [{"time": NOW - 120, "period_s": 60.0, "attempt": 1, "cpu_percent": 180.0,
                "memory_bytes": 3 << 30, "processes": 4, "work_bytes": 5 << 20, "gpus": [GPU]},
               {"time": NOW - 5, "period_s": 0.0, "attempt": 1, "cpu_percent": 0.2,
                "memory_bytes": 512 << 20, "processes": 4, "gpus": [], "disks": []}]
    exchange.metrics["j1"] = {"job_id": "j1", "samples": samples, "stalled": STALL}


def test_metrics_table(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("jobs", "metrics", "j1")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"STALLED: {STALL['message']}"
    assert lines[2].split() == ["TIME", "#", "CPU", "%", "MEMORY", "PROCS", "GPU", "%", "GPU",
                                "MEM", "POWER", "TEMP", "WORK"]
    stamp = datetime.fromtimestamp(NOW - 120).strftime("%H:%M:%S")
    assert lines[3].split() == [stamp, "~1m", "1", "180", "3.0", "GiB", "4", "97", "30.0", "GiB",
                                "412", "W", "71", "C", "5.0", "MiB"]
    assert lines[4].split()[2:] == ["0", "512.0", "MiB", "4", "-", "-", "-", "-", "-"]


def test_metrics_last_and_json(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("jobs", "metrics", "j1", "--last", "1", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [s["cpu_percent"] for s in data["samples"]] == [0.2]
    assert data["stalled"]["kind"] == "no_progress"
    assert exchange.requests[-1].url.params["limit"] == "1"


def test_metrics_of_an_unknown_job(exchange: FakeExchange) -> None:
    result = run("jobs", "metrics", "j404")
    assert result.exit_code != 0 and "no job j404" in result.output


def test_show_says_a_job_is_stalled(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "RUNNING", attempt=1, stalled=STALL))
    result = run("jobs", "show", "j1")
    assert result.exit_code == 0, result.output
    assert f"stalled    {STALL['message']}" in result.stdout.splitlines()
