"""The real MLflow client (``mlflow-skinny``) and Lightning's ``MLFlowLogger``, in unchanged
scripts run as subprocesses with the variables a job gets, against a served coordinator with a
store: their params, curves and artifacts land on the job's run, and a second attempt of the
same job continues that run's step axis."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from server_harness import Exchange, Live, memory_store_exchange, serve

from bourse.protocol.agent import StartJob
from bourse.server.services.tracking_tokens import with_tracking
from bourse.storage import MemoryStore

pytest.importorskip("mlflow", reason="mlflow-skinny is in the dev extra")
pytestmark = [pytest.mark.anyio, pytest.mark.slow,
              pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

PLAIN = """
import mlflow
with mlflow.start_run():
    mlflow.log_param("lr", "1e-3")
    for step in range(START, START + 5):
        mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
    with open("notes.txt", "w") as handle:
        handle.write("hello from the job")
    mlflow.log_artifact("notes.txt")
"""

LIGHTNING = """
import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.loggers import MLFlowLogger

class Tiny(LightningModule):
    def __init__(self, lr=0.1):
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
loader = torch.utils.data.DataLoader(data, batch_size=8)
Trainer(max_epochs=2, logger=MLFlowLogger(), log_every_n_steps=2, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False).fit(Tiny(), loader)
"""


@pytest.fixture
async def live(database_url: str, tmp_path: Path) -> AsyncIterator[Live]:
    store = MemoryStore("bourse")
    async with memory_store_exchange(tmp_path, database_url, store) as opened, \
            serve(opened) as served:
        yield served


def _job_env(live: Live, job_id: str) -> dict[str, str]:
    """What the dispatcher adds to the job's start (``with_tracking``), the URL made the
    served port's."""
    start = StartJob.model_validate({"job_id": job_id, "attempt": 1, "spec": {
        "command": ["true"]}})
    tracked = with_tracking(start, live.exchange.state.key, live.http_url)
    return {**tracked.env, **tracked.secret_env}


async def _script(tmp_path: Path, source: str, env: dict[str, str]) -> str:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(source))
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(path), cwd=tmp_path, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, env={**os.environ, **env,
                                               "GIT_PYTHON_REFRESH": "quiet"})
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, out.decode()[-3000:]
    return out.decode()


async def _get(exchange: Exchange, path: str, **params: Any) -> Any:
    response = await exchange.client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_plain_mlflow_script_logs_to_its_jobs_run_across_attempts(
        live: Live, tmp_path: Path) -> None:
    exchange = live.exchange
    job = await exchange.submit(name="plain")
    env = _job_env(live, job["id"])
    await _script(tmp_path, PLAIN.replace("START", "0"), env)
    await _script(tmp_path, PLAIN.replace("START", "5"), env)  # the resumed attempt
    run = await _get(exchange, f"/api/v1/tracking/runs/{job['id']}")
    assert run["params"] == {"lr": "1e-3"} and run["status"] == "FINISHED"
    assert run["metrics"]["loss"]["step"] == 9 and run["metrics"]["loss"]["count"] == 10
    curve = await _get(exchange, f"/api/v1/tracking/runs/{job['id']}/metrics/loss")
    assert [s for s, _ in curve["points"]] == list(range(10))
    path = f"/api/2.0/mlflow-artifacts/artifacts/0/{job['id']}/artifacts/notes.txt"
    got = await exchange.client.get(path)
    assert got.status_code == 200 and got.content == b"hello from the job"
    assert env["MLFLOW_TRACKING_TOKEN"] not in str(run)


async def test_lightnings_mlflow_logger_writes_its_curves(live: Live, tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    exchange = live.exchange
    job = await exchange.submit(name="lit")
    await _script(tmp_path, LIGHTNING, _job_env(live, job["id"]))
    run = await _get(exchange, f"/api/v1/tracking/runs/{job['id']}")
    assert run["params"]["lr"] == "0.1" and run["status"] == "FINISHED"
    assert run["metrics"]["train_loss"]["count"] == 8  # 16 steps, every 2nd logged
    experiments = await _get(exchange, "/api/v1/tracking/experiments")
    named = {e["experiment_id"]: e["name"] for e in experiments["experiments"]}
    assert named[run["experiment_id"]] == "lightning_logs"
