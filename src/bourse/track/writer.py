"""The native writer's buffer and where it writes.

Points, params and tags are buffered in memory and written as JSON lines
(:class:`~bourse.protocol.track.TrackRecord`, within MLflow's per-batch limits) when 1000 points
are waiting, every ``flush_s`` (a daemon thread), at :func:`flush` and at exit:

- inside a bourse job (``BOURSE_TRACK_FILE`` is set, by the agent): to that file, which the
  agent tails into its spool — what is written survives disconnects and coordinator restarts;
- elsewhere with ``MLFLOW_TRACKING_URI`` set: to that MLflow server (``mlflow`` needed), one
  run per process (``MLFLOW_RUN_ID`` continues one);
- elsewhere: to ``$BOURSE_TRACK_DIR`` (default ``./bourse-runs``)``/<time>-<pid>/track.jsonl``,
  the same lines a job writes.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

TRACK_FILE_ENV = "BOURSE_TRACK_FILE"  # = bourse.agent.track.TRACK_FILE_ENV
TRACK_DIR_ENV = "BOURSE_TRACK_DIR"
MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100
FLUSH_S = 2.0


def clean(value: float) -> float | None:
    """A value JSON can carry: NaN becomes None, infinities the largest floats (as MLflow)."""
    value = float(value)
    if math.isnan(value):
        return None
    if math.isinf(value):
        return math.copysign(sys.float_info.max, value)
    return value


def records(points: list[list[Any]], params: dict[str, str],
            tags: dict[str, str]) -> list[dict[str, Any]]:
    """What is buffered, cut into records within the limits."""
    out: list[dict[str, Any]] = []
    p_items, t_items = list(params.items()), list(tags.items())
    i = j = k = 0
    while i < len(points) or j < len(p_items) or k < len(t_items):
        record: dict[str, Any] = {"metrics": points[i:i + MAX_METRICS]}
        if j < len(p_items):
            record["params"] = dict(p_items[j:j + MAX_PARAMS])
        if k < len(t_items):
            record["tags"] = dict(t_items[k:k + MAX_TAGS])
        out.append(record)
        i, j, k = i + MAX_METRICS, j + MAX_PARAMS, k + MAX_TAGS
    return out


class Sink(Protocol):
    def write(self, records: list[dict[str, Any]]) -> None: ...


class FileSink:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, records: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, separators=(",", ":"), allow_nan=False) + "\n"
                       for r in records)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:  # whole lines: the agent reads those
            f.write(text)


class MlflowSink:
    def __init__(self) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise ImportError("MLFLOW_TRACKING_URI is set: bourse.track writes there through "
                              "mlflow (pip install mlflow-skinny), or unset it to write to "
                              f"./{os.environ.get(TRACK_DIR_ENV, 'bourse-runs')}") from exc
        self.client = MlflowClient()
        self.run_id = os.environ.get("MLFLOW_RUN_ID") or self.client.create_run(
            os.environ.get("MLFLOW_EXPERIMENT_ID", "0")).info.run_id

    def write(self, records: list[dict[str, Any]]) -> None:
        from mlflow.entities import Metric, Param, RunTag

        for r in records:
            self.client.log_batch(
                self.run_id,
                metrics=[Metric(k, math.nan if v is None else v, ts, s)
                         for k, v, s, ts in r["metrics"]],
                params=[Param(k, v) for k, v in r.get("params", {}).items()],
                tags=[RunTag(k, v) for k, v in r.get("tags", {}).items()])


def default_sink(environ: Mapping[str, str] = os.environ) -> Sink:
    if environ.get(TRACK_FILE_ENV):
        return FileSink(Path(environ[TRACK_FILE_ENV]))
    if environ.get("MLFLOW_TRACKING_URI"):
        return MlflowSink()
    root = Path(environ.get(TRACK_DIR_ENV) or "bourse-runs")
    return FileSink(root / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}" / "track.jsonl")


class Buffer:
    """Thread-safe; writes through ``sink`` (made on first write)."""

    def __init__(self, sink: Sink | None = None, flush_s: float = FLUSH_S) -> None:
        self._sink, self._flush_s = sink, flush_s
        self._lock = threading.Lock()
        self._points: list[list[Any]] = []
        self._params: dict[str, str] = {}
        self._tags: dict[str, str] = {}
        self._thread: threading.Thread | None = None

    @property
    def sink(self) -> Sink:
        if self._sink is None:
            self._sink = default_sink()
        return self._sink

    def add(self, metrics: Mapping[str, float], step: int, params: Mapping[str, Any],
            tags: Mapping[str, Any], timestamp: int | None = None) -> None:
        ts = int(time.time() * 1000) if timestamp is None else timestamp
        with self._lock:
            self._points += [[str(k), clean(v), int(step), ts] for k, v in metrics.items()]
            self._params.update({str(k): str(v) for k, v in params.items()})
            self._tags.update({str(k): str(v) for k, v in tags.items()})
            full = len(self._points) >= MAX_METRICS
        self._start()
        if full:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            points, params, tags = self._points, self._params, self._tags
            self._points, self._params, self._tags = [], {}, {}
            if points or params or tags:
                self.sink.write(records(points, params, tags))

    def _start(self) -> None:
        if self._thread is None and self._flush_s > 0:
            self._thread = threading.Thread(target=self._run, name="bourse.track", daemon=True)
            self._thread.start()
            atexit.register(self.flush)

    def _run(self) -> None:
        while True:
            time.sleep(self._flush_s)
            self.flush()
