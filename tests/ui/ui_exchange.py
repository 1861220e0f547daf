"""A real exchange for the browser tests: `bourse server` (with its embedded SeaweedFS, so that
an app run's stages can pass data) and one `bourse agent` as processes (process groups of their
own, killed with everything their jobs started when the module ends), the admin's SDK client,
and the jobs the tests run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import psutil

from bourse.core.compute import Compute
from bourse.protocol.api import JobView, NodeView
from bourse.protocol.common import JobSpec
from bourse.sdk.client import Client
from zygote import Forked, start_bourse

T = TypeVar("T")
START_TIMEOUT_S = 60.0  # a cold `python -m bourse` on a busy 2-core CI machine takes seconds
VERIFY_TIMEOUT_S = 90.0  # the probe's storage and compute checks
KEEP_ALIVE_S = 3.0  # lost after 3x: a loaded CI machine can stall an agent for seconds


def wait_for(predicate: Callable[[], T], timeout: float, what: str,
             logs: Callable[[], str] = lambda: "") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{logs()}")
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class UiExchange:
    """A coordinator and one verified agent on loopback."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.credentials = root / "admin.json"
        self.agent_dir = root / "agent"
        self.procs: list[tuple[str, subprocess.Popen[bytes] | Forked, Path]] = []
        self._client: Client | None = None

    def _spawn(self, name: str, *args: str) -> None:
        log = self.root / f"{name}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "BOURSE_HOME": str(self.root / "home")}
        self.procs.append((name, start_bourse(args, env, log), log))

    def logs(self) -> str:
        tails = []
        for name, _, log in self.procs:
            lines = log.read_text(errors="replace").splitlines()[-30:] if log.exists() else []
            tails.append(f"----- {name} -----\n" + "\n".join(lines))
        return "\n".join(tails)

    @property
    def token(self) -> str:
        return str(json.loads(self.credentials.read_text())["token"])

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.url, self.token, timeout=10)
        return self._client

    def start(self) -> UiExchange:
        self._spawn("coordinator", "server", "--data-dir", str(self.root / "server"),
                    "--port", str(self.port), "--keep-alive", str(KEEP_ALIVE_S),
                    "--credentials", str(self.credentials))
        wait_for(self._healthy, START_TIMEOUT_S, "the coordinator", self.logs)
        enrolment = self.client.create_enrollment(name="ui-node").token
        self._spawn("agent", "agent", "--server", self.url, "--token", enrolment,
                    "--name", "ui-node", "--work-dir", str(self.agent_dir),
                    "--keep-alive", str(KEEP_ALIVE_S), "--cpus", "4", "--storage-mb", "4",
                    "--metrics-interval", "1")
        wait_for(self._verified, VERIFY_TIMEOUT_S, "the agent to connect and pass verification",
                 self.logs)
        return self

    def _healthy(self) -> bool:
        if any(p.poll() is not None for _, p, _ in self.procs):
            raise AssertionError(f"a process exited:\n{self.logs()}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def _verified(self) -> NodeView | None:
        self._healthy()
        found = [n for n in self.client.nodes()
                 if n.connected and n.verification_status in ("pass", "warn")]
        return found[0] if found else None

    def submit(self, script: str, name: str, cpus: float = 0.5) -> JobView:
        return self.client.submit(JobSpec(command=[sys.executable, "-c", script], name=name,
                                          compute=Compute(cpus=cpus), max_retries=0))

    def submit_stage(self, run: str, stage: str, reads: tuple[str, ...] = (),
                     app: str = "app.py") -> JobView:
        """A stage of an app run as the app API submits it (``<run>/<stage>``, its output
        under ``runs/<run>/<stage>/``), reading the output of each stage in ``reads``."""
        out = f"s3://bourse/runs/{run}/{{}}/out/"
        return self.client.submit(JobSpec(
            command=[sys.executable, "-c", STAGE, stage], name=f"{run}/{stage}",
            compute=Compute(cpus=0.5), max_retries=0, run=run, app=app, stage=stage,
            inputs={f"from_{r}": out.format(r) for r in reads},
            outputs={"out": out.format(stage)}))

    def submit_driver(self, run: str, app: str) -> JobView:
        """A detached run's flow driver as ``bourse run --detach`` submits it: a job of the
        run without a stage, named ``<run>/driver``."""
        return self.client.submit(JobSpec(
            command=[sys.executable, "-c", "pass"], name=f"{run}/driver",
            compute=Compute(cpus=0.5), max_retries=0, run=run, app=app))

    def wait_state(self, job_id: str, *states: str, timeout: float = 30.0) -> JobView:
        return wait_for(lambda: (j if (j := self.client.job(job_id)).state in states else None),
                        timeout, f"job {job_id} to be {'/'.join(states)}", self.logs)

    def wait_succeeded(self, job_id: str, timeout: float = 30.0) -> JobView:
        """The job ends SUCCEEDED; if it ends otherwise, the error says why (its attempts, its
        log's tail and the processes' logs)."""
        job = self.wait_state(job_id, "SUCCEEDED", "FAILED", "CANCELLED", timeout=timeout)
        if job.state != "SUCCEEDED":
            detail = self.client.job(job_id)
            attempts = "\n".join(f"  attempt {a.number}: {a.state} on {a.node_name} "
                                  f"exit {a.exit_code}: {a.reason}" for a in detail.attempts)
            raise AssertionError(f"job {job_id} ended {job.state}: {job.reason}\n{attempts}\n"
                                 f"{self.logs()}")
        return job

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        for _, popen, _ in self.procs:  # SIGTERM first: the coordinator stops its store
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(popen.pid, signal.SIGTERM)
        for _, popen, _ in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=15)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()
        for pid in _job_groups(self.agent_dir):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def _job_groups(work_dir: Path) -> Iterator[int]:
    """The process groups of the jobs the agent started (they outlive it by design): each
    attempt's shim leads one, and its command line names the attempt's directory."""
    for pid_file in work_dir.glob("jobs/*/*/pid"):
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            pid = int(pid_file.read_text().strip())
            if str(pid_file.parent) in psutil.Process(pid).cmdline():
                yield pid


TICKER = """\
import sys, time
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3000):
    print(f"tick {i}", flush=True)
    time.sleep(0.1)
"""

HUNDRED_K = """\
import sys
out = sys.stdout
for i in range(100_000):
    needle = " needle" if i % 25_000 == 12_345 else ""  # lines 12345, 37345, 62345, 87345
    out.write(f"line {i:06d} value {i * 7919 % 100_003}{needle}\\n")
"""

COMPUTER = """\
import time
end = time.time() + 120
while time.time() < end:
    sum(range(20000))
"""

STAGE = """\
import os, pathlib, sys
lines = [line for name, path in sorted(os.environ.items()) if name.startswith("BOURSE_INPUT_")
         and not name.endswith("_URI") for line in
         (pathlib.Path(path) / "lines.txt").read_text().splitlines()]
(pathlib.Path(os.environ["BOURSE_OUTPUT_OUT"]) / "lines.txt").write_text(
    "\\n".join([*lines, sys.argv[1]]) + "\\n")
"""
