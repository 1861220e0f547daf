"""The preemption proofs, with real processes: a coordinator with its embedded SeaweedFS, two
interruptible agents in different regions, jobs that follow the checkpoint contract, and
reclaims sent the way a provider (or a cloud's interruption notice) sends them."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from dataplane_harness import start, stop
from harness import Agent, Exchange
from spot_harness import (
    HERE,
    node_state,
    renew,
    result_line,
    running_on,
    spot_agent,
    stdout_has,
    submit,
)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]

EPOCHS, STEP_SLEEP = 8, "0.02"


class Spot:
    def __init__(self, exchange: Exchange, a: Agent, b: Agent) -> None:
        self.exchange, self.a, self.b = exchange, a, b

    def ensure_online(self) -> None:
        for agent in (self.a, self.b):
            if node_state(self.exchange, agent) != "online":
                renew(self.exchange, agent)

    def other(self, node_id: str | None) -> tuple[Agent, Agent]:
        """(the agent with this node id, the other one)."""
        return (self.a, self.b) if node_id == self.a.node_id else (self.b, self.a)


@pytest.fixture(scope="module")
def spot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Spot]:
    data = start(tmp_path_factory.mktemp("spot"))
    exchange = data.exchange
    data.agent.kill9()  # the harness's on-demand agent is not part of these proofs
    try:
        yield Spot(exchange, spot_agent(exchange, "spot-a", "eu-west"),
                   spot_agent(exchange, "spot-b", "us-east"))
    finally:
        stop(exchange)


@pytest.fixture
def ready(spot: Spot) -> Spot:
    spot.ensure_online()
    return spot


def uninterrupted(tmp_path: Path) -> dict[str, float]:
    env = {**os.environ, "BOURSE_CHECKPOINT_URI": (tmp_path / "ckpt").as_uri() + "/"}
    out = subprocess.run([sys.executable, str(HERE / "digits_job.py"), str(EPOCHS), "0"],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return dict(json.loads(line[len("RESULT "):]))


def test_lightning_run_reclaimed_resumes_elsewhere_and_matches(ready: Spot,
                                                               tmp_path: Path) -> None:
    exchange = ready.exchange
    job = submit(exchange, "digits_job.py", str(EPOCHS), STEP_SLEEP)
    first = exchange.wait_job(job.id, lambda j: j.state == "RUNNING", 60, "to run")
    a, b = ready.other(first.node_id)
    exchange.wait_for(lambda: stdout_has(a, job.id, 1, "epoch 3 "), 60, "three epochs")

    exchange.client.reclaim(a.node_id or "", notice_s=20)
    running_on(exchange, job.id, b, 2)
    done = exchange.wait_ended(job.id, timeout=90)

    assert done.state == "SUCCEEDED", done.reason
    first_attempt, second = done.attempts
    assert (first_attempt.state, first_attempt.node_id) == ("PREEMPTED", a.node_id)
    assert first_attempt.exit_code == 143  # Lightning stopped on SIGTERM, after saving
    assert second.node_id == b.node_id and second.state == "SUCCEEDED"
    assert "resume=1 from /" in b.stdout(job.id, 2).decode()  # resumed from a checkpoint
    assert first_attempt.checkpoint_at is not None and first_attempt.ended_at is not None
    assert first_attempt.preempted_at is not None  # saved on the notice: nothing was lost
    assert first_attempt.checkpoint_at >= first_attempt.preempted_at
    assert first_attempt.lost_work_s == 0.0
    resumed = json.loads(result_line(b, job.id, 2, "RESULT "))
    baseline = uninterrupted(tmp_path)
    assert resumed["steps"] == baseline["steps"]
    assert math.isclose(resumed["val_acc"], baseline["val_acc"], abs_tol=0.02)
    assert math.isclose(resumed["val_loss"], baseline["val_loss"], rel_tol=0.05)


def test_four_reclaims_still_finish_and_costs_add_up(ready: Spot) -> None:
    exchange = ready.exchange
    job = submit(exchange, "counter_job.py", "count", "250", "5")
    for number in range(1, 5):
        detail = exchange.wait_job(job.id, lambda j, n=number: j.state == "RUNNING"
                                   and j.attempt == n, 60, f"attempt {number} to run")
        current, other = ready.other(detail.node_id)
        exchange.wait_for(lambda c=current, n=number: stdout_has(c, job.id, n, "RESUMED"),
                          30, "the job to start counting")
        if node_state(exchange, other) != "online":
            renew(exchange, other)
        exchange.client.reclaim(current.node_id or "", notice_s=5)
    done = exchange.wait_ended(job.id, timeout=60)

    assert done.state == "SUCCEEDED", done.reason
    assert [a.state for a in done.attempts] == ["PREEMPTED"] * 4 + ["SUCCEEDED"]
    assert all(a.lost_work_s is not None and a.lost_work_s < 1.0 for a in done.attempts[:4])
    costs = [a.cost for a in done.attempts]
    assert all(c is not None and c > 0 for c in costs)
    assert done.cost == pytest.approx(sum(c for c in costs if c is not None))
    assert done.lost_work_s == pytest.approx(sum(a.lost_work_s or 0 for a in done.attempts))
    assert done.on_demand_cost is not None and done.cost is not None
    assert done.cost < done.on_demand_cost  # spot at $0.04/h against the list price ($0.08/h)
    summary = exchange.client.cost(by="job")
    row = next(r for r in summary.rows if r.key == job.id)
    assert row.attempts == 5 and row.preempted == 4
    assert row.cost == pytest.approx(done.cost, rel=1e-3)


def test_reclaim_during_upload_and_a_job_ignoring_sigterm(ready: Spot) -> None:
    exchange = ready.exchange
    job = submit(exchange, "counter_job.py", "stubborn")
    first = exchange.wait_job(job.id, lambda j: j.state == "RUNNING", 60, "to run")
    a, b = ready.other(first.node_id)
    exchange.wait_for(lambda: stdout_has(a, job.id, 1, "UPLOADING"), 30, "the upload")

    exchange.client.reclaim(a.node_id or "", notice_s=1.5)
    done = exchange.wait_ended(job.id, timeout=60)

    assert done.state == "SUCCEEDED", done.reason
    killed = done.attempts[0]
    assert killed.state == "PREEMPTED" and killed.exit_code is None  # SIGKILLed at the end
    assert killed.ended_at is not None and killed.preempted_at is not None
    assert killed.ended_at - killed.preempted_at >= 1.5
    assert killed.cost is not None and killed.lost_work_s is not None
    assert result_line(b, job.id, 2, "RESUMED FROM") == "1"  # not the half-uploaded step 2


COUNT_TO = 200  # 20 s of counting: still at it once the Lightning run was moved


def test_mlflow_curves_continue_across_reclaims(ready: Spot) -> None:
    """Issue 23's promise: a Lightning script with MLFlowLogger and a plain script with
    ``mlflow.log_metric``, both unchanged, reclaimed mid-run: each run's curve goes on from
    where the checkpoint left it, every step once, in the UI's curves and `bourse runs
    compare`."""
    exchange = ready.exchange
    lightning = submit(exchange, "digits_job.py", str(EPOCHS), STEP_SLEEP, "track")
    plain = submit(exchange, "counter_job.py", "count", str(COUNT_TO), "5", "mlflow")
    _reclaim_once(ready, lightning.id, "epoch 3 ")  # then the plain one, moved or not yet
    _reclaim_once(ready, plain.id, "COUNTED 10")
    for job in (lightning, plain):
        done = exchange.wait_ended(job.id, timeout=180)
        assert done.state == "SUCCEEDED", done.reason
        assert [a.state for a in done.attempts[:-1]] == ["PREEMPTED"] * (len(done.attempts) - 1)
        assert len(done.attempts) >= 2
    steps = EPOCHS * 14  # 1,400 samples in batches of 100 (digits_job.loaders)
    assert _drawn(exchange, lightning.id, "train_loss") == list(range(steps))
    assert _drawn(exchange, plain.id, "count") == list(range(1, COUNT_TO + 1))
    history = _history(exchange, plain.id, "count")
    assert [(h["step"], h["value"]) for h in history] == [
        (n, float(n)) for n in range(1, COUNT_TO + 1)]  # stored once each, as logged
    said = subprocess.run(
        [sys.executable, "-m", "bourse", "runs", "compare", lightning.id, plain.id, "--json"],
        env={**os.environ, "BOURSE_URL": exchange.coordinator.url,
             "BOURSE_TOKEN": exchange.coordinator.token},
        capture_output=True, text=True, timeout=60, check=False)
    assert said.returncode == 0, said.stderr
    compared = json.loads(said.stdout)
    assert "count" in json.dumps(compared) and "train_loss" in json.dumps(compared)
    assert said.stdout.count(lightning.id) >= 1 and said.stdout.count(plain.id) >= 1


def _reclaim_once(ready: Spot, job_id: str, progress: str) -> None:
    """Reclaim the node running ``job_id``'s first attempt once it printed ``progress`` (unless
    a reclaim of the other job's node already moved it), the other node made ready for it."""
    exchange = ready.exchange
    job = exchange.wait_job(job_id, lambda j: j.state == "RUNNING", 60, "to run")
    if job.attempt > 1:
        return
    current, other = ready.other(job.node_id)
    exchange.wait_for(lambda: stdout_has(current, job_id, 1, progress) or
                      exchange.client.job(job_id).attempt > 1, 60, progress.strip())
    if exchange.client.job(job_id).attempt > 1:
        return
    if node_state(exchange, other) != "online":
        renew(exchange, other)
    exchange.client.reclaim(current.node_id or "", notice_s=5)
    exchange.wait_job(job_id, lambda j: j.state == "RUNNING" and j.attempt > 1, 90,
                      "to run again")


def _drawn(exchange: Exchange, job_id: str, key: str) -> list[int]:
    """The steps the run's page charts of ``key`` (``/ui/tracking/runs/ID/curves``)."""
    url = exchange.coordinator.url
    with httpx.Client(base_url=url, headers={"Origin": url}) as ui:
        signed = ui.post("/ui/login", data={"token": exchange.coordinator.token})
        assert signed.status_code == 303, signed.text
        assert ui.get(f"/ui/tracking/runs/{job_id}").status_code == 200
        curves = ui.get(f"/ui/tracking/runs/{job_id}/curves").json()
    [chart] = [c for c in curves["charts"] if c["key"] == key]
    return [int(x) for x in chart["x"]]


def _history(exchange: Exchange, job_id: str, key: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=exchange.coordinator.url, headers={
            "Authorization": f"Bearer {exchange.coordinator.token}"}) as http:
        answer = http.get("/api/2.0/mlflow/metrics/get-history",
                          params={"run_id": job_id, "metric_key": key})
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["metrics"]
    return sorted(found, key=lambda m: int(m["step"]))
