"""The examples in local mode: the seed documents' single-script app and LLM pipeline, run the
way their docstrings say — `bourse run --local examples/<app>.py` from the project root."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from app_harness import Project, final_value, local_path, started_order, summary_rows

from bourse.app.loader import load_app, preflight

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def copy_example(project: Project, name: str) -> str:
    (project.root / "examples").mkdir(exist_ok=True)
    shutil.copy(EXAMPLES / name, project.root / "examples" / name)
    return f"examples/{name}"


@pytest.mark.parametrize(("name", "stages"), [
    ("digits_app.py", ["Prepare", "Train", "Evaluate"]),
    ("train_single.py", ["train_single"]),
    ("llm_pipeline.py", ["Tokenize", "Train", "Evaluate"]),
])
def test_every_example_is_an_app_that_passes_preflight(project: Project, name: str,
                                                       stages: list[str]) -> None:
    app = load_app(EXAMPLES / name)  # (the project fixture undoes the import)

    assert [stage.name for stage in preflight(app)] == stages


def import_pipeline(monkeypatch: pytest.MonkeyPatch, compute: str | None) -> ModuleType:
    if compute is None:
        monkeypatch.delenv("LLM_PIPELINE_COMPUTE", raising=False)
    else:
        monkeypatch.setenv("LLM_PIPELINE_COMPUTE", compute)
    spec = importlib.util.spec_from_file_location("llm_pipeline_under_test",
                                                  EXAMPLES / "llm_pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_llm_pipeline_asks_for_a_cpu_a_big_gpu_and_a_cheap_gpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    flow = import_pipeline(monkeypatch, None).app.root

    assert flow.tokenize.compute.gpu is None
    assert flow.tokenize.compute.cpus.min == 4
    assert flow.train.compute.gpu.models == ("a100-80gb",)
    assert (flow.train.compute.spot, flow.train.compute.max_price) == ("prefer", 2.0)
    assert flow.train.retries == 2
    assert flow.evaluate.compute.gpu.models == ("t4", "l4")


def test_the_llm_pipeline_runs_on_cpus_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    flow = import_pipeline(monkeypatch, "cpu").app.root

    stages = (flow.tokenize, flow.train, flow.evaluate)
    assert [stage.compute.gpu for stage in stages] == [None, None, None]


@pytest.mark.slow
def test_the_llm_pipeline_learns_the_language(project: Project) -> None:
    app = copy_example(project, "llm_pipeline.py")

    done = project.cli("--local", app, "120")  # training steps (200 by default)

    assert done.returncode == 0, done.stdout + done.stderr
    stages = ["Tokenize", "Train", "Evaluate"]
    assert started_order(done.stdout) == stages
    assert summary_rows(done.stderr) == [(stage, "SUCCEEDED") for stage in stages]
    report = final_value(done.stdout)
    assert report["uniform_perplexity"] == 22
    # far better than knowing only how frequent each word is
    assert report["perplexity"] < report["unigram_perplexity"] / 3
    assert report["sample"].startswith("the ")
    assert set(report["sample"].split()) <= set(json.loads(
        (project.runs()[0] / "Tokenize/outputs/tokens/vocab.json").read_text()))
    [run] = project.runs()
    assert json.loads((run / "Evaluate/outputs/report/report.json").read_text()) == report
    assert (run / "Train/outputs/model/model.pt").stat().st_size > 0
    assert list((run / "Train/checkpoints/.complete").glob("*.json"))


@pytest.mark.slow
def test_the_single_script_app_trains_on_generated_data(project: Project) -> None:
    app = copy_example(project, "train_single.py")

    done = project.cli("--local", app, "3")

    assert done.returncode == 0, done.stdout + done.stderr
    assert summary_rows(done.stderr) == [("train_single", "SUCCEEDED")]
    assert "[train_single] trained 3 epochs on 800 points" in done.stdout
    out = final_value(done.stdout)
    metrics = json.loads((local_path(out["model"]) / "metrics.json").read_text())
    assert metrics["val_acc"] > 0.9
    assert (local_path(out["model"]) / "model.ckpt").stat().st_size > 0
    assert len(list((local_path(out["checkpoints"]) / ".complete").glob("*.json"))) == 3
