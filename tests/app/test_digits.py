"""The demo app end to end in local mode: `bourse run --local digits_app.py` prepares the data,
trains a Lightning model with checkpoints, evaluates it — a real accuracy from a real model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from app_harness import Project, final_value, started_order, summary_rows

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STAGES = ["Prepare", "Train", "Evaluate"]
EPOCHS = 3  # fewer than DigitsFlow.run's default (8): the suite's time


@pytest.mark.slow
def test_the_digits_app_trains_and_evaluates_a_real_model(project: Project) -> None:
    for name in ("digits_app.py", "digits_model.py"):
        shutil.copy(EXAMPLES / name, project.root / name)

    done = project.cli("--local", "digits_app.py", "--", str(EPOCHS))

    assert done.returncode == 0, done.stdout + done.stderr
    assert started_order(done.stdout) == STAGES
    assert summary_rows(done.stderr) == [(stage, "SUCCEEDED") for stage in STAGES]
    report = final_value(done.stdout)
    assert report["test_accuracy"] > 0.8  # chance is 0.1
    assert report["samples"] == 360
    [run] = project.runs()
    written = json.loads((run / "Evaluate/outputs/report/report.json").read_text())
    assert {**written, "shards_sha256": report["shards_sha256"]} == report
    assert len(report["shards_sha256"]) == 64  # what Prepare wrote, to compare runs by
    assert (run / "Train/outputs/model/model.ckpt").stat().st_size > 0
    assert sorted(p.name for p in (run / "Prepare/outputs/shards").iterdir()) == [
        "test.npz", "train.npz", "val.npz"]
    assert_complete_checkpoints(run / "Train/checkpoints")


def assert_complete_checkpoints(prefix: Path) -> None:
    """One complete checkpoint per epoch: a marker naming files that are all there."""
    markers = sorted((prefix / ".complete").glob("*.json"))
    assert len(markers) == EPOCHS
    steps = []
    for marker in markers:
        doc = json.loads(marker.read_text())
        assert marker.stem == doc["name"]
        steps.append(doc["step"])
        [entry] = doc["files"]
        saved = Path("/" + entry["key"])
        assert saved == prefix / doc["name"] / "last.ckpt"
        assert saved.stat().st_size == entry["size"] > 0
    assert steps == sorted(steps) and len(set(steps)) == EPOCHS
