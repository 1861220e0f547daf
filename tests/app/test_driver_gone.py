"""A run whose driver is gone ends without its user: the real ``bourse run app.py`` on a real
local exchange, its only stage running for ten minutes, then the driver stopped (SIGHUP, as
when its terminal closes), killed outright (SIGKILL: the exchange cancels the run once the
driver's lease lapses), or, for a detached run, its driver job stopped. (A stage asking for a
GPU no node has would not wait: it fails at once, saying so.)"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
from app_harness import BOURSE, Project
from exchange_harness import ExchangeUnderTest

from bourse.protocol.api import JobView

pytestmark = pytest.mark.slow

PARKED = """
    import time

    from bourse import App, Compute, Work


    class Train(Work):
        def run(self) -> None:
            time.sleep(600)


    app = App(Train(compute=Compute(cpus=1)))
"""
WAIT_S = 120.0
T = TypeVar("T")


def until(check: Callable[[], T | None], what: str, timeout: float = WAIT_S) -> T:
    """Poll ``check()`` until it returns something true (real processes: no clock to inject)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


@contextmanager
def driver(exchange: ExchangeUnderTest, root: Path) -> Iterator[subprocess.Popen[str]]:
    """``bourse run app.py`` in a session of its own, killed if the test leaves it running."""
    proc = subprocess.Popen([str(BOURSE), "run", "app.py"], cwd=root, env=exchange.env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def run_id_of(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.match(r"^run (r-[0-9a-f]+): ", line)
        if found:
            return found[1]
    raise AssertionError("bourse run printed no run id")


def parked_stage(exchange: ExchangeUnderTest, run_id: str) -> JobView:
    def running() -> JobView | None:
        jobs = [j for j in exchange.client.jobs(run=run_id) if j.spec.stage == "Train"]
        return jobs[0] if jobs and jobs[0].state == "RUNNING" else None

    return until(running, f"the stage of run {run_id} RUNNING")


def test_a_driver_whose_terminal_closes_cancels_its_stages(
        project: Project, exchange: ExchangeUnderTest) -> None:
    project.write("app.py", PARKED)
    with driver(exchange, project.root) as proc:
        run_id = run_id_of(proc)
        stage = parked_stage(exchange, run_id)

        proc.send_signal(signal.SIGHUP)
        _, stderr = proc.communicate(timeout=60)

    assert proc.returncode == 128 + signal.SIGHUP, stderr
    assert (f"bourse: run {run_id} stopped: its driver got SIGHUP (the terminal running it "
            "closed)") in stderr
    job = exchange.client.job(stage.id)
    assert (job.state, job.reason) == ("CANCELLED", "its app run was cancelled: its driver "
                                       "got SIGHUP (the terminal running it closed)")
    run = exchange.client.run(run_id)
    assert (run.state, run.cancelled) == ("CANCELLED", "its driver got SIGHUP (the terminal "
                                          "running it closed)")


def test_a_driver_killed_outright_is_ended_by_the_exchange(
        project: Project, exchange: ExchangeUnderTest) -> None:
    project.write("app.py", PARKED)
    with driver(exchange, project.root) as proc:
        run_id = run_id_of(proc)
        stage = parked_stage(exchange, run_id)

        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def cancelled() -> bool | None:
        return exchange.client.job(stage.id).state == "CANCELLED" or None

    until(cancelled, f"stage {stage.id} cancelled once the driver's lease lapsed")
    job = exchange.client.job(stage.id)
    assert job.reason is not None and job.reason.startswith(
        "its app run was cancelled: its driver (bourse run) stopped renewing the run's lease")
    run = exchange.client.run(run_id)
    assert run.state == "CANCELLED" and run.cancelled is not None


def test_a_detached_run_whose_driver_job_is_stopped_cancels_its_stages(
        project: Project, exchange: ExchangeUnderTest) -> None:
    """A detached run's driver is a job on the exchange: it renews the lease from its node,
    and `bourse stop` on it (SIGTERM there) cancels the run's stages."""
    project.write("app.py", PARKED)
    done = exchange.cli("run", "--detach", "app.py", cwd=project.root)
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = done.stdout.strip()
    stage = parked_stage(exchange, run_id)
    driver_job = exchange.client.run(run_id).driver
    assert driver_job is not None

    stopped = exchange.cli("stop", driver_job, cwd=project.root)

    assert stopped.returncode == 0, stopped.stderr

    def ended() -> bool | None:
        return exchange.client.job(stage.id).state == "CANCELLED" or None

    until(ended, f"stage {stage.id} cancelled by its stopped driver")
    assert exchange.client.job(stage.id).reason == (
        "its app run was cancelled: its driver got SIGTERM")
    run = exchange.client.run(run_id)
    assert (run.state, run.cancelled) == ("CANCELLED", "its driver got SIGTERM")


def test_a_run_stopped_by_hand_ends_its_driver_too(
        project: Project, exchange: ExchangeUnderTest) -> None:
    project.write("app.py", PARKED)
    with driver(exchange, project.root) as proc:
        run_id = run_id_of(proc)
        stage = parked_stage(exchange, run_id)

        stopped = exchange.cli("runs", "stop", "--yes", run_id, cwd=project.root)
        _, stderr = proc.communicate(timeout=60)

    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stderr.strip() == (f"run {run_id} cancelled (stopped with `bourse runs "
                                      f"stop`); jobs stopped: {stage.id}")
    assert proc.returncode == 1  # its stage ended CANCELLED: the flow failed with it
    assert f"error: stage 'Train' failed (job {stage.id}, CANCELLED, exit code 143)" in stderr
    run = exchange.client.run(run_id)
    assert (run.state, run.cancelled) == ("CANCELLED", "stopped with `bourse runs stop`")


SLEEPER = """
    import os
    import time
    from pathlib import Path

    from bourse import App, Compute, Work


    class Wait(Work):
        def run(self) -> None:
            Path("stage.pid").write_text(str(os.getpid()))
            time.sleep(600)


    app = App(Wait(compute=Compute("cpu")))
"""


def test_a_local_driver_stopped_stops_its_stage_processes(project: Project) -> None:
    project.write("app.py", SLEEPER)
    pid_file = project.root / "stage.pid"
    proc = subprocess.Popen([str(BOURSE), "run", "--local", "app.py"], cwd=project.root,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        pid = int(until(lambda: pid_file.exists() and pid_file.read_text(), "the stage's pid"))

        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()

    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "stopped: its driver got SIGTERM" in stderr
    with pytest.raises(ProcessLookupError):  # stopped, and reaped by the driver
        os.kill(pid, 0)
