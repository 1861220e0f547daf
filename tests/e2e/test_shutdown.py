"""A coordinator asked to stop stops within seconds, even with a log follower attached, and
never restarts its embedded store on the way out: SIGTERM, SIGINT (a terminal's Ctrl-C), and
SIGTERM sent to the store too, as a service manager stopping the whole control group does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Cluster, Exchange, tail

from bourse.protocol.common import JobSpec
from bourse.storage.seaweed import running_weed

pytestmark = pytest.mark.slow
KEEP_ALIVE_S = 1.0
# uvicorn's bounded graceful shutdown (cli/server.py), the agents' goodbye, the store's ~3 s
# SIGTERM, and a busy CI machine; without the fix the coordinator waits for the job to end
STOP_S = 30.0


class Follower:
    """``bourse logs -f JOB`` in a process of its own."""

    def __init__(self, exchange: Exchange, job_id: str, log: Path) -> None:
        coordinator = exchange.coordinator
        env = {**os.environ, "BOURSE_URL": coordinator.url, "BOURSE_TOKEN": coordinator.token,
               "PYTHONUNBUFFERED": "1"}
        self.log = log
        self.proc = subprocess.Popen([sys.executable, "-m", "bourse", "logs", "-f", job_id],
                                     stdout=subprocess.PIPE, stderr=log.open("wb"), text=True,
                                     env=env)

    def first_line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def followed(cluster: Cluster, tmp_path: Path) -> Iterator[tuple[Exchange, Follower]]:
    """A coordinator with its embedded store and an agent, running a job that printed a line
    and sleeps; ``bourse logs -f`` attached to it (the line read back)."""
    exchange = Exchange(cluster, KEEP_ALIVE_S, store=()).start()
    exchange.agent("a1")
    job = exchange.client.submit(JobSpec(command=["sh", "-c", "echo ready; exec sleep 300"]))
    follower = Follower(exchange, job.id, tmp_path / "follower.log")
    try:
        assert follower.first_line() == "ready\n", tail(follower.log)
        yield exchange, follower
    finally:
        follower.close()


def weed_pid(exchange: Exchange) -> int:
    pid = running_weed(exchange.coordinator.data_dir / "seaweed")
    assert pid is not None
    return pid


def stopped_within(exchange: Exchange, seconds: float) -> int:
    popen = exchange.coordinator.proc.popen
    assert popen is not None
    try:
        return popen.wait(seconds)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the coordinator still runs {seconds:.0f} s after it was asked "
                             f"to stop:\n{exchange.coordinator.proc.tail()}") from None


def assert_store_not_restarted(exchange: Exchange, store: int) -> None:
    log = exchange.coordinator.proc.log.read_text(errors="replace")
    assert "SeaweedFS restarted" not in log and "restarting in" not in log, tail(
        exchange.coordinator.proc.log)
    assert running_weed(exchange.coordinator.data_dir / "seaweed") is None
    with pytest.raises(ProcessLookupError):
        os.kill(store, 0)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_followed_coordinator_stops_promptly_and_stops_its_store(
        followed: tuple[Exchange, Follower], sig: signal.Signals) -> None:
    exchange, follower = followed
    store = weed_pid(exchange)

    os.killpg(exchange.coordinator.proc.pid, sig)  # its group, as a terminal's Ctrl-C does

    stopped_within(exchange, STOP_S)
    assert_store_not_restarted(exchange, store)
    assert "Shutting down" in exchange.coordinator.proc.log.read_text()
    assert follower.proc.poll() is None  # reconnecting: the job is not over


def test_a_store_stopped_with_its_coordinator_is_not_restarted(
        followed: tuple[Exchange, Follower]) -> None:
    exchange, _ = followed
    store = weed_pid(exchange)

    os.kill(exchange.coordinator.proc.pid, signal.SIGTERM)
    os.kill(store, signal.SIGTERM)  # a control group stopped as a whole

    stopped_within(exchange, STOP_S)
    assert_store_not_restarted(exchange, store)
