"""bourse.track inside a real job, through a real agent's spool: the coordinator is killed
while the job logs, and the run's curve still holds every step once when it is back; and an
old script that logs only to TensorBoard has its scalars in its run, imported by the agent."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import Exchange

import bourse
from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec

pytestmark = pytest.mark.slow
SRC = str(Path(bourse.__file__).parent.parent)  # the job imports the bourse under test

SCRIPT = f"""\
import sys, time
sys.path.insert(0, {SRC!r})
from bourse import track
track.log(params={{"lr": "1e-3"}})
for step in range(40):
    track.log({{"loss": 1.0 / (step + 1)}}, step)
    track.flush()
    time.sleep(0.1)
"""


def run_json(exchange: Exchange, path: str) -> Any:
    coordinator = exchange.coordinator
    response = httpx.get(f"{coordinator.url}/api/v1/tracking/runs/{path}", timeout=10,
                         headers={"Authorization": f"Bearer {coordinator.token}"})
    return response.json() if response.status_code == 200 else None


def logged(exchange: Exchange, job_id: str) -> int:
    run = run_json(exchange, job_id)
    return int(run["metrics"]["loss"]["count"]) if run and "loss" in run["metrics"] else 0


def test_track_records_survive_a_coordinator_restart(
        exchange_factory: Callable[..., Exchange]) -> None:
    exchange = exchange_factory(keep_alive=10.0)  # a restart fits in three keep-alives
    agent = exchange.agent("a")
    job = exchange.client.submit(JobSpec(command=[sys.executable, "-c", SCRIPT],
                                         compute=Compute(cpus=0.5))).id
    exchange.wait_for(lambda: logged(exchange, job) >= 3, 30, "the first points")

    exchange.coordinator.kill9()
    track_file = agent.attempt_dir(job, 1) / "tmp" / "bourse-track.jsonl"
    size = track_file.stat().st_size
    exchange.wait_for(lambda: track_file.stat().st_size > size + 200, 10,
                      "the job to log while no coordinator listens")
    exchange.coordinator.start()

    assert exchange.wait_ended(job).state == "SUCCEEDED"
    exchange.wait_for(lambda: logged(exchange, job) >= 40, 30, "every point")
    run = run_json(exchange, job)
    assert run["params"] == {"lr": "1e-3"} and run["metrics"]["loss"]["count"] == 40
    curve = run_json(exchange, f"{job}/metrics/loss")
    assert [s for s, _ in curve["points"]] == list(range(40))


TENSORBOARD_ONLY = """\
from torch.utils.tensorboard import SummaryWriter
writer = SummaryWriter()  # ./runs/<time>_<host>/, as old scripts leave it
for step in range(30):
    writer.add_scalar("train/loss", 1.0 / (step + 1), step)
writer.close()
"""


def test_an_old_scripts_tensorboard_scalars_reach_its_run(
        exchange_factory: Callable[..., Exchange]) -> None:
    exchange = exchange_factory()
    exchange.agent("a")
    job = exchange.client.submit(JobSpec(command=[sys.executable, "-c", TENSORBOARD_ONLY],
                                         compute=Compute(cpus=0.5))).id
    assert exchange.wait_ended(job).state == "SUCCEEDED"
    exchange.wait_for(lambda: (run_json(exchange, job) or {}).get("metrics", {}).get(
        "train/loss", {}).get("count") == 30, 30, "the imported scalars")
    curve = run_json(exchange, f"{job}/metrics/train/loss")
    assert [s for s, _ in curve["points"]] == list(range(30))
    assert curve["points"][1][1] == pytest.approx(0.5)
    events = exchange.client.events(job)
    said = [e.message + str(e.data.get("text", "")) for e in events]
    assert any("imported 30 TensorBoard scalar(s) from 1 event file(s)" in m for m in said), said
