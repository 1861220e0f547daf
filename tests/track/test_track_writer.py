"""bourse.track's buffer, pure parts and sinks: records within MLflow's limits, values JSON
can carry, where records go inside and outside a job."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from bourse.protocol.track import TrackRecord
from bourse.track.writer import Buffer, FileSink, MlflowSink, clean, default_sink, records


def test_values_json_can_carry() -> None:
    assert clean(math.nan) is None
    assert clean(math.inf) == sys.float_info.max and clean(-math.inf) == -sys.float_info.max
    assert clean(2) == 2.0


def test_a_big_buffer_is_cut_into_records_within_the_limits() -> None:
    points = [["k", 1.0, i, 0] for i in range(2500)]
    params = {f"p{i}": "v" for i in range(150)}
    out = records(points, params, {"t": "x"})
    assert [len(r["metrics"]) for r in out] == [1000, 1000, 500]
    assert [len(r.get("params", {})) for r in out] == [100, 50, 0]
    assert [r.get("tags") for r in out] == [{"t": "x"}, None, None]
    for r in out:
        TrackRecord.model_validate(r)  # what the agent accepts


def test_where_records_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = default_sink({"BOURSE_TRACK_FILE": str(tmp_path / "t.jsonl"),
                        "MLFLOW_TRACKING_URI": "http://x"})  # in a job: the agent's file
    assert isinstance(job, FileSink) and job.path == tmp_path / "t.jsonl"
    local = default_sink({"BOURSE_TRACK_DIR": str(tmp_path / "runs")})
    assert isinstance(local, FileSink) and local.path.parent.parent == tmp_path / "runs"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # a local store, for the test
    pytest.importorskip("mlflow")
    mlflow_sink = default_sink({"MLFLOW_TRACKING_URI": "set"})
    assert isinstance(mlflow_sink, MlflowSink)
    buffer = Buffer(mlflow_sink, flush_s=0)
    buffer.add({"loss": 0.5}, 2, {"lr": 0.1}, {})
    buffer.flush()
    run = mlflow_sink.client.get_run(mlflow_sink.run_id)
    assert run.data.metrics == {"loss": 0.5} and run.data.params == {"lr": "0.1"}


def test_the_buffer_writes_when_full_and_on_flush(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    buffer = Buffer(FileSink(path), flush_s=0)
    for step in range(1000):
        buffer.add({"loss": 1.0}, step, {}, {})
    assert len(path.read_text().splitlines()) == 1  # 1000 points: written at once
    buffer.add({"loss": float("inf")}, 1000, {}, {"t": 1})
    buffer.flush()
    buffer.flush()  # nothing waits: nothing written
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["metrics"][0][:3] == ["loss", sys.float_info.max, 1000]
    assert last["tags"] == {"t": "1"}
