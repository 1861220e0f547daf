"""The seed's story with real processes: a Lightning run started as plain ``python train.py``
is handed over to the exchange (``bourse burst --here``), goes on from its checkpoint and
finishes as an uninterrupted run does (a coordinator with its embedded SeaweedFS and one
agent). A running exchange job burst to a gang: tests/gang/test_burst_netns.py."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from dataplane_harness import DataExchange, start, stop
from spot_harness import HERE

import bourse
from bourse.cli.burst import handover_env
from bourse.cli.main import cli

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]

EPOCHS, STEP_SLEEP = "6", "0.1"  # 14 steps an epoch: 8 s of training
ACC_TOLERANCE = 0.02  # absolute, on the 397 held-out digits


@pytest.fixture(scope="module")
def ground(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataExchange]:
    data = start(tmp_path_factory.mktemp("burst"))
    try:
        yield data
    finally:
        stop(data.exchange)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """The same training, never interrupted."""
    ckpt = tmp_path_factory.mktemp("baseline") / "ckpt"
    env = {**os.environ, "BOURSE_CHECKPOINT_URI": ckpt.as_uri() + "/"}
    out = subprocess.run([sys.executable, str(HERE / "digits_job.py"), EPOCHS, "0"], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return dict(json.loads(line[len("RESULT "):]))


def _matches(result: dict[str, float], baseline: dict[str, float]) -> None:
    assert result["steps"] == baseline["steps"]  # every step once: none again, none skipped
    assert math.isclose(result["val_acc"], baseline["val_acc"], abs_tol=ACC_TOLERANCE)


def _local_run(ground: DataExchange, work: Path) -> tuple[subprocess.Popen[str], str, dict[
        str, str]]:
    """``python digits_job.py`` started in ``work``, saving to a prefix of the project's
    home with the credentials of a grant, as a user would."""
    client = ground.exchange.client
    ckpt = f"{client.data_home().home}burst-{uuid.uuid4().hex[:8]}/ckpt/"
    grant = client.data_credentials(read=[ckpt], write=[ckpt])
    here = str(Path(bourse.__file__).resolve().parents[1])  # this bourse, from any folder
    env = {**os.environ, **handover_env(grant.store.model_dump(), ckpt),
           "BOURSE_BURST_DIR": str(work / ".bourse" / "burst"),
           "PYTHONPATH": os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("BOURSE_RESUME")  # a first run
    shutil.copy(HERE / "digits_job.py", work)
    local = subprocess.Popen([sys.executable, "digits_job.py", EPOCHS, STEP_SLEEP, "track"],
                             cwd=work,
                             env=env, stdout=subprocess.PIPE, text=True)
    return local, ckpt, env


def test_a_local_run_is_handed_over_and_back_and_finishes_as_if_uninterrupted(
        ground: DataExchange, baseline: dict[str, float], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Local → the exchange (``--here``) → local again (``JOB --local``): one training in three
    places, every step once, the job's tracking run continued by the local run."""
    exchange = ground.exchange
    local, ckpt, env = _local_run(ground, tmp_path)
    assert local.stdout is not None
    for line in local.stdout:  # two epochs and some steps locally
        if line.startswith("epoch 2 "):
            break
    runner = CliRunner()
    user = {"BOURSE_URL": exchange.coordinator.url, "BOURSE_TOKEN": exchange.coordinator.token}
    result = runner.invoke(cli, ["burst", "--here", "--cpus", "1", "--wait", "60s",
                                 "--json"], env={
        **user, "BOURSE_BURST_DIR": env["BOURSE_BURST_DIR"]}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert local.wait(30) == 143  # saved, handed over, left as on a notice
    said = json.loads(result.stdout)
    handed, job = said["handed"], said["job"]
    assert handed["checkpoint"] == ckpt and handed["step"] >= 28
    assert job["spec"]["checkpoint"] == ckpt and job["spec"]["command"][1] == "digits_job.py"

    _wait_for_line(ground, job["id"], "epoch 4 ")  # training on the exchange, from step 28+
    monkeypatch.chdir(tmp_path)  # the job's command is relative to its code: this folder
    capfd.readouterr()
    back = runner.invoke(cli, ["burst", job["id"], "--local", "--notice", "30s", "--json"],
                         env={**user, "PYTHONPATH": env["PYTHONPATH"], "PATH": os.pathsep.join(
                             [str(Path(sys.executable).parent), os.environ["PATH"]])},
                         catch_exceptions=False)
    out = capfd.readouterr().out  # the local run's own output (inherited descriptors)
    assert back.exit_code == 0, back.output + out
    went = json.loads(back.stdout)
    assert went["checkpoint"].endswith(f"burst/{job['id']}/checkpoints/")
    assert went["step"] > handed["step"]  # the exchange's steps carried home
    assert "resume=1 from /" in out  # the carried checkpoint, fetched from the home
    done = exchange.client.job(job["id"])
    assert done.state == "CANCELLED" and "local run" in (done.reason or "")
    exchange_out = ground.agent.stdout(job["id"], 1).decode()
    assert "resume=None from /" in exchange_out  # the job resumed from the handed checkpoint
    uninterrupted = baseline
    _matches(json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[7:]),
             uninterrupted)
    _run_continues(ground, job["id"], handed["step"], went["step"], int(uninterrupted["steps"]))


def _wait_for_line(ground: DataExchange, job_id: str, prefix: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if any(x.startswith(prefix) for x in
                   ground.agent.stdout(job_id, 1).decode().splitlines()):
                return
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} printed no {prefix!r} in 120 s")


def _run_continues(ground: DataExchange, job_id: str, first: int, moved_at: int,
                   steps: int) -> None:
    """The job's run: its train_loss at every step from the hand-over on exactly once (the
    exchange's attempt, then the local run), and the move home marked."""
    coordinator = ground.exchange.coordinator
    with httpx.Client(base_url=coordinator.url, headers={
            "Authorization": f"Bearer {coordinator.token}"}) as http:
        run = http.get(f"/api/v1/tracking/runs/{job_id}").json()
        curve = http.get(f"/api/v1/tracking/runs/{job_id}/metrics/train_loss",
                         params={"points": 1000}).json()
    logged = [int(step) for step, _ in curve["points"]]
    assert curve["total"] == len(logged) == len(set(logged)), logged  # none twice
    assert logged == list(range(logged[0], steps)) and logged[0] <= first + 1, logged
    assert logged[0] < moved_at < logged[-1]  # both sides of the move home
    assert [(m["to_compute"], m["attempt"]) for m in run["moves"]] == [("a local run", 1)]
