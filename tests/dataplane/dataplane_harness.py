"""Helpers of the data-plane tests: a real coordinator with its embedded SeaweedFS and a real
agent (processes, from tests/e2e/harness.py), and a root S3 client to put datasets in and
look at what jobs wrote.

The coordinator is stopped with SIGTERM so that it stops its SeaweedFS; a store it left
running anyway (it runs in a session of its own) is killed by its pid file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))

from harness import Agent, Cluster, Exchange

from bourse.storage.seaweed import load_root_key

KEEP_ALIVE_S = 1.0
STOP_S = 15.0  # the coordinator's graceful stop, its store included
DATASETS, RESULTS = "datasets", "results"
ARCHIVE_AFTER_S = 1.0  # ended jobs' logs move to the store quickly: every test reads through it


@dataclass
class DataExchange:
    exchange: Exchange
    agent: Agent
    s3: Any  # boto3 S3 client with the store's root key

    @property
    def cluster(self) -> Cluster:
        return self.exchange.cluster

    @property
    def store_dir(self) -> Path:
        return store_dir(self.exchange)

    def logs(self) -> str:
        weed = self.store_dir / "weed.log"
        tail = "\n".join(weed.read_text(errors="replace").splitlines()[-20:]) \
            if weed.exists() else "(no weed.log)"
        return f"{self.cluster.logs()}\n----- weed.log -----\n{tail}"


def store_dir(exchange: Exchange) -> Path:
    return exchange.coordinator.data_dir / "seaweed"


def root_client(store: Path) -> Any:
    ports = json.loads((store / "ports.json").read_text())
    key = load_root_key(store)
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{ports['s3']}",
                        region_name="us-east-1", aws_access_key_id=key.access_key_id,
                        aws_secret_access_key=key.secret_access_key,
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))


def start(root: Path) -> DataExchange:
    exchange = Exchange(Cluster(root), KEEP_ALIVE_S, store=("--archive-logs-after",
                                                             str(ARCHIVE_AFTER_S)))
    exchange.start()
    agent = exchange.agent("node")
    s3 = root_client(store_dir(exchange))
    for bucket in (DATASETS, RESULTS):
        s3.create_bucket(Bucket=bucket)
    return DataExchange(exchange, agent, s3)


def stop(exchange: Exchange) -> None:
    """Agents first (as a shutdown would find them gone), then the coordinator gracefully;
    whatever is left, killed."""
    cluster, coordinator = exchange.cluster, exchange.coordinator.proc
    for proc in cluster.procs:
        if proc is not coordinator:
            proc.kill9()
    if coordinator.popen is not None and coordinator.alive:
        coordinator.popen.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            coordinator.popen.wait(STOP_S)
    with contextlib.suppress(OSError, ValueError):
        os.kill(int((store_dir(exchange) / "weed.pid").read_text()), signal.SIGKILL)
    cluster.close()
