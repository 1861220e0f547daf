"""The seed's story end to end, with real processes and a two-node gang across network
namespaces: a Lightning run started as plain ``python digits_elastic.py`` on this machine is
handed over to the exchange (``bourse burst --here``, one node), burst to a two-node DDP gang
(``bourse burst JOB --nodes 2``), brought home (``bourse burst JOB --local``) and finishes
there. Every step is taken once (the uninterrupted run's count), the validation accuracy is
within ``ACC_TOLERANCE`` of that run's, and the job's tracking run, as the run's page charts
it (the JSON its page draws from), holds one point per step from the hand-over on, across
both moves, each move marked at its step, and stores each step once. The coordinator and its
embedded store listen on the bridge, so the namespaces and this machine reach both
(docs/burst.md)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bridge import Bridge, require_tools
from click.testing import CliRunner
from harness import Agent, Cluster, Exchange

import bourse
from bourse.cli.burst import handover_env
from bourse.cli.main import cli

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]
SCRIPT = Path(__file__).resolve().parent / "scripts" / "digits_elastic.py"
EPOCHS, STEP_SLEEP = "8", "0.1"  # 14 steps an epoch, whatever the world size
ACC_TOLERANCE = 0.03  # absolute, on 397 held-out digits: the gang draws the data in another order
TRAIN_LOSS = "train_loss"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "burst"


@pytest.fixture(scope="module")
def lan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Exchange, list[Agent]]]:
    require_tools()
    bridge = Bridge(2)
    bridge.create()
    cluster = Cluster(tmp_path_factory.mktemp("burst-lan"))
    try:
        exchange = Exchange(cluster, 1.0, host=bridge.host_address,
                            store=("--store-host", bridge.host_address)).start()
        agents = [exchange.agent(f"ns{i}", cpus=1, prefix=bridge.prefix(i),
                                 args=["--network", "lan"]) for i in range(2)]
        yield exchange, agents
    finally:
        cluster.close()
        bridge.delete()


def _result(text: str) -> dict[str, Any]:
    line = next(x for x in text.splitlines() if x.startswith("RESULT "))
    found: dict[str, Any] = json.loads(line[len("RESULT "):])
    return found


def _uninterrupted(tmp_path: Path) -> subprocess.Popen[str]:
    """The same training, never interrupted, started beside the story (it mostly waits)."""
    env = {**os.environ, "BOURSE_CHECKPOINT_URI": (tmp_path / "baseline").as_uri() + "/"}
    env.pop("NNODES", None)
    return subprocess.Popen([sys.executable, str(SCRIPT), EPOCHS, "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _lines(agents: list[Agent], job_id: str, attempt: int, prefix: str) -> list[str]:
    return [line for a in agents for line in a.stdout(job_id, attempt).decode().splitlines()
            if line.startswith(prefix)]


def _local_run(exchange: Exchange, work: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """``python digits_elastic.py`` started in ``work``, saving to a prefix of the project's
    home with the credentials of a grant, as a user would."""
    client = exchange.client
    ckpt = f"{client.data_home().home}burst-{uuid.uuid4().hex[:8]}/ckpt/"
    grant = client.data_credentials(read=[ckpt], write=[ckpt])
    here = str(Path(bourse.__file__).resolve().parents[1])  # this bourse, from any folder
    env = {**os.environ, **handover_env(grant.store.model_dump(), ckpt),
           "BOURSE_BURST_DIR": str(work / ".bourse" / "burst"),
           "PYTHONPATH": os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("BOURSE_RESUME")  # a first run
    shutil.copy(SCRIPT, work)
    local = subprocess.Popen([sys.executable, SCRIPT.name, EPOCHS, STEP_SLEEP, "track"],
                             cwd=work, env=env, stdout=subprocess.PIPE, text=True)
    return local, env


def _cli(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    said = CliRunner().invoke(cli, [*args, "--json"], env=env, catch_exceptions=False)
    assert said.exit_code == 0, said.output
    found: dict[str, Any] = json.loads(said.stdout)
    return found


@pytest.mark.timeout(540)  # five training processes start in turn: 4-5 min on 2 loaded cores
def test_a_local_run_bursts_to_a_two_node_gang_comes_home_and_finishes_as_if_uninterrupted(
        lan: tuple[Exchange, list[Agent]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    exchange, agents = lan
    baseline = _uninterrupted(tmp_path)
    local, env = _local_run(exchange, tmp_path)
    assert local.stdout is not None
    for line in local.stdout:  # two epochs and some steps here
        if line.startswith("epoch 2 "):
            break
    user = {"BOURSE_URL": exchange.coordinator.url, "BOURSE_TOKEN": exchange.coordinator.token}
    said = _cli(["burst", "--here", "--cpus", "1", "--wait", "60s"],
                {**user, "BOURSE_BURST_DIR": env["BOURSE_BURST_DIR"]})
    assert local.wait(120) == 143  # saved, handed over, left as on a notice
    handed, job_id = said["handed"], said["job"]["id"]
    assert handed["step"] >= 28 and said["job"]["spec"]["checkpoint"] == handed["checkpoint"]

    exchange.wait_for(lambda: _lines(agents, job_id, 1, "epoch 4 "), 180, "epoch 4, one node")
    _cli(["burst", job_id, "--cpus", "1", "--nodes", "2", "--notice", "30s"], user)
    exchange.wait_for(lambda: _lines(agents, job_id, 2, "epoch 5 "), 240, "epoch 5, the gang")
    monkeypatch.chdir(tmp_path)  # the job's command is relative to its code: this folder
    capfd.readouterr()
    went = _cli(["burst", job_id, "--local", "--notice", "30s"], {
        **user, "PYTHONPATH": env["PYTHONPATH"],
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])})
    home = capfd.readouterr().out  # the local run's own output (inherited descriptors)
    done = exchange.client.job(job_id)
    assert done.state == "CANCELLED" and "local run" in (done.reason or ""), done.reason
    ended = {(a.number, a.rank): a.state for a in done.attempts}
    assert set(ended) == {(1, 0), (2, 0), (2, 1)} and ended[1, 0] == "PREEMPTED", ended
    # the gang's first member to leave on the notice ends it; the other is stopped with it
    assert sorted([ended[2, 0], ended[2, 1]]) in (["CANCELLED", "PREEMPTED"],
                                                  ["PREEMPTED", "PREEMPTED"]), ended
    gang = [line.split() for line in _lines(agents, job_id, 2, "epoch ")]
    assert gang and all(words[5] == "2" for words in gang)  # world size 2 there
    uninterrupted = _result(baseline.communicate(timeout=120)[0])
    result = _result(home)
    assert result["world"] == 1 and result["steps"] == uninterrupted["steps"]  # each step once
    assert math.isclose(result["val_acc"], uninterrupted["val_acc"], abs_tol=ACC_TOLERANCE)
    moves = _charted_continuously(exchange, job_id, handed["step"], went["step"],
                                  int(uninterrupted["steps"]))
    _record(exchange, job_id, handed, moves, result=result, uninterrupted=uninterrupted)


def _charted_continuously(exchange: Exchange, job_id: str, handed: int, home: int,
                          steps: int) -> list[int]:
    """The run's page and the curves it draws (``/ui/tracking/runs/ID/curves``, what
    tracking.js charts): ``train_loss`` at every step from the hand-over on exactly once,
    steps rising, through the exchange's attempt, the gang and the run at home; the two moves
    marked at the steps their next runs resumed from. Stored, each step once too: a step the
    stopped attempt logged past its checkpoint is replaced by the next run's point
    (docs/tracking.md, "One point per step across attempts")."""
    url = exchange.coordinator.url
    with httpx.Client(base_url=url, headers={"Origin": url}) as ui:
        signed = ui.post("/ui/login", data={"token": exchange.coordinator.token})
        assert signed.status_code == 303, signed.text
        page = ui.get(f"/ui/tracking/runs/{job_id}")
        curves = ui.get(f"/ui/tracking/runs/{job_id}/curves").json()
    assert page.status_code == 200 and f"/ui/tracking/runs/{job_id}/curves" in page.text
    [chart] = [c for c in curves["charts"] if c["key"] == TRAIN_LOSS]
    steps_drawn = [int(x) for x in chart["x"]]
    assert steps_drawn == list(range(handed, steps)), steps_drawn  # none missing, none twice
    assert all(v is not None for v in chart["y"][0])
    moves = [(m["attempt"], m["label"].endswith("→ a local run"), m["step"])
             for m in curves["moves"]]
    assert [(a, local) for a, local, _ in moves] == [(1, False), (2, True)], curves["moves"]
    gang_from, home_from = moves[0][2], moves[1][2]
    assert handed < gang_from < home_from == home < steps  # both moves inside the curve
    for step in (gang_from, home_from):
        assert f'<tr class="move" data-step="{step}">' in page.text
    if chart["total"] != len(steps_drawn):  # the count is past the points: which, if any?
        assert _twice(exchange, job_id) == [], moves
    return [gang_from, home_from]


def _history(exchange: Exchange, job_id: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=exchange.coordinator.url, headers={
            "Authorization": f"Bearer {exchange.coordinator.token}"}) as http:
        found: list[dict[str, Any]] = http.get("/api/2.0/mlflow/metrics/get-history", params={
            "run_id": job_id, "metric_key": TRAIN_LOSS}).json()["metrics"]
    return found


def _twice(exchange: Exchange, job_id: str) -> list[dict[str, Any]]:
    """The points of the steps stored more than once. Seen once in five runs before a later
    attempt's point replaced an earlier one's at its step: a stopped attempt that logged a
    step past its checkpoint, which the next run trained again (docs/burst.md, "Limits")."""
    history = _history(exchange, job_id)
    steps = [m["step"] for m in history]
    return [m for m in history if steps.count(m["step"]) > 1]


def _record(exchange: Exchange, job_id: str, handed: dict[str, Any], moves: list[int], *,
            result: dict[str, Any], uninterrupted: dict[str, Any]) -> None:
    """The story's figures (docs/burst.md), from the run's own point times: each move's gap
    (the last step before it logged → the first after it), which includes placement, the
    new process's imports and model setup; the local hand-over's from ``handed.json``."""
    history = _history(exchange, job_id)
    at = {int(m["step"]): int(m["timestamp"]) / 1000 for m in history}
    stored = [m["step"] for m in history]
    figures = {"steps": result["steps"], "uninterrupted_steps": uninterrupted["steps"],
               "steps_stored_twice": len(stored) - len(set(stored)),
               "val_acc": result["val_acc"], "uninterrupted_val_acc": uninterrupted["val_acc"],
               "gap_local_to_1_node_s": at[handed["step"]] - handed["at"],
               **{f"gap_{name}_s": at[step] - at[step - 1]
                  for name, step in zip(("1_node_to_gang", "gang_to_local"), moves,
                                        strict=True)}}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "story.json").write_text(json.dumps(figures, indent=2))
    print("burst story:", json.dumps(figures))
