"""Real processes for the end-to-end tests: a coordinator and agents started as `python -m bourse`
in their own process groups, killed with SIGKILL and restarted on the same data, and the
helpers the tests poll them with.

Every process, and every job process an agent started (they live in sessions of their own and
survive their agent by design), is killed when the test ends, whatever its outcome. A failing
test shows the tails of all the logs (see ``conftest.py``), which is all there is to debug a CI
failure with.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import httpx
import psutil

from bourse.protocol.api import JobDetail
from bourse.sdk.client import Client
from bourse.storage.seaweed import running_weed
from zygote import Forked, zygote

T = TypeVar("T")
POLL_S = 0.02
START_TIMEOUT_S = 60.0  # a cold `python -m bourse` on a busy 2-core CI machine takes seconds
TAIL_LINES = 40


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: Callable[[], T], timeout: float, what: str,
             diagnose: Callable[[], str] | None = None) -> T:
    """Poll ``predicate`` every few milliseconds until it returns something truthy (returned);
    AssertionError naming ``what`` (and ``diagnose()``, e.g. log tails) on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = f"\n{diagnose()}" if diagnose is not None else ""
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}{detail}")
        time.sleep(POLL_S)


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class Proc:
    """One `python -m bourse ...` process in a process group of its own, logging to a file."""

    def __init__(self, name: str, args: Sequence[str], log: Path,
                 prefix: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        self.name, self.args, self.log, self.prefix = name, list(args), log, list(prefix)
        self.env = dict(env or {})  # on top of the test's environment
        self.popen: subprocess.Popen[bytes] | Forked | None = None
        self.starts = 0

    def start(self) -> None:
        assert not self.alive, f"{self.name} is already running"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "BOURSE_HOME": str(self.log.parent / "bourse-home"), **self.env}
        with self.log.open("ab") as out:
            out.write(f"=== start {self.starts} of {self.name} ===\n".encode())
            out.flush()
            forks = None if self.prefix else zygote()  # a fresh interpreter in a netns
            if forks is not None:
                self.popen = forks.spawn(self.args, env, self.log)
                return
            self.popen = subprocess.Popen(
                [*self.prefix, sys.executable, "-m", "bourse", *self.args], stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                env=env)

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def kill9(self) -> None:
        """SIGKILL to the whole group, and reap it."""
        if self.popen is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()

    def tail(self) -> str:
        return f"----- {self.name} ({self.log}) -----\n{tail(self.log)}"


class Cluster:
    """Everything one test started, so that all of it can be killed and shown."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[Proc] = []
        self.work_dirs: list[Path] = []
        self.closers: list[Callable[[], None]] = []

    def spawn(self, name: str, args: Sequence[str], prefix: Sequence[str] = (),
              env: Mapping[str, str] | None = None) -> Proc:
        proc = Proc(name, args, self.root / "logs" / f"{name}.log", prefix, env)
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(p.tail() for p in self.procs)

    def wait_for(self, predicate: Callable[[], T], timeout: float, what: str) -> T:
        return wait_for(predicate, timeout, what, self.logs)

    def close(self) -> None:
        for proc in self.procs:
            proc.kill9()
        for work_dir in self.work_dirs:
            kill_jobs(work_dir)
        for closer in reversed(self.closers):
            closer()
        self._kill_stores()

    def _kill_stores(self) -> None:
        """Embedded stores outlive a coordinator killed with SIGKILL (by design: a restart
        stops them): the test's are stopped here, found by their pid files in its root."""
        for pid_file in self.root.rglob("weed.pid"):
            pid = running_weed(pid_file.parent)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def kill_jobs(work_dir: Path) -> list[int]:
    """SIGKILL the process group of every job an agent started under ``work_dir`` and that is
    still running: the shim's pid is the group's id, and its command line names its directory."""
    killed = []
    for pid_file in work_dir.glob("jobs/*/*/pid"):
        pid = job_pid(pid_file.parent)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def job_pid(attempt_dir: Path) -> int | None:
    """The pid of the shim running this attempt while it runs, else None (checked against its
    command line, so a recycled pid is never mistaken for it)."""
    try:
        pid = int((attempt_dir / "pid").read_text().strip())
        proc = psutil.Process(pid)
        running = proc.status() != psutil.STATUS_ZOMBIE and str(attempt_dir) in proc.cmdline()
    except (OSError, ValueError, psutil.Error):
        return None
    return pid if running else None


class Coordinator:
    """`bourse server` on a fixed port, so that a restart on the same data dir is the same
    exchange to agents and clients."""

    def __init__(self, cluster: Cluster, keep_alive: float, host: str = "127.0.0.1",
                 store: Sequence[str] = ("--no-store",), loss_window: float = 120.0, *,
                 args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        """``store``: the store options; by default none (the data plane has tests of its own,
        in tests/dataplane), ``()`` for the embedded SeaweedFS. ``args``, ``env``: more
        options and environment (a cloud's, say)."""
        self.cluster, self.keep_alive, self.host = cluster, keep_alive, host
        self.loss_window, self.store = loss_window, list(store)
        self.port = free_port(host)
        self.data_dir = cluster.root / "server"
        self.credentials = cluster.root / "admin.json"
        self.args, self.env = list(args), env
        self.proc = self._spawn()
        self._client: Client | None = None

    def _spawn(self) -> Proc:
        return self.cluster.spawn("coordinator", [
            "server", "--data-dir", str(self.data_dir), "--host", self.host,
            "--port", str(self.port), "--keep-alive", str(self.keep_alive),
            "--loss-window", str(self.loss_window), "--credentials", str(self.credentials),
            *self.store, *self.args], env=self.env)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self.proc.start()
        self.cluster.wait_for(self._healthy, START_TIMEOUT_S, f"the coordinator on {self.url}")

    def _healthy(self) -> bool:
        if not self.proc.alive:
            raise AssertionError(f"the coordinator exited:\n{self.proc.tail()}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill9(self) -> None:
        self.proc.kill9()

    @property
    def token(self) -> str:
        return str(json.loads(self.credentials.read_text())["token"])

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.url, self.token, timeout=10)
            self.cluster.closers.append(self._client.close)
        return self._client


class Agent:
    """`bourse agent` with a work dir of its own; restarts reuse it (and its node credential)."""

    def __init__(self, cluster: Cluster, name: str, server: str, keep_alive: float, *,
                 cpus: int = 4, prefix: Sequence[str] = (), args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None) -> None:
        self.cluster, self.name, self.server = cluster, name, server
        self.work_dir = cluster.root / name
        cluster.work_dirs.append(self.work_dir)
        argv = ["agent", "--server", server, "--name", name, "--work-dir", str(self.work_dir),
                "--keep-alive", str(keep_alive), "--cpus", str(cpus), *args]
        self.proc = cluster.spawn(name, argv, prefix, env)

    def start(self, token: str | None = None) -> None:
        """Start it; ``token`` enrols it (needed once)."""
        if token is not None:
            self.proc.args = [*self.proc.args, "--token", token]
        self.proc.start()
        if token is not None:
            self.proc.args = self.proc.args[:-2]  # a restart needs no token

    def kill9(self) -> None:
        self.proc.kill9()

    @property
    def node_id(self) -> str | None:
        try:
            return str(json.loads((self.work_dir / "node.json").read_text())["node_id"])
        except (OSError, ValueError, KeyError):
            return None

    def attempt_dir(self, job_id: str, attempt: int) -> Path:
        return self.work_dir / "jobs" / job_id / str(attempt)

    def job_pid(self, job_id: str, attempt: int) -> int | None:
        return job_pid(self.attempt_dir(job_id, attempt))

    def stdout(self, job_id: str, attempt: int) -> bytes:
        path = self.attempt_dir(job_id, attempt) / "logs" / "stdout"
        return path.read_bytes() if path.exists() else b""


class Exchange:
    """A coordinator and its agents, with the waits the tests share."""

    def __init__(self, cluster: Cluster, keep_alive: float, host: str = "127.0.0.1",
                 store: Sequence[str] = ("--no-store",), loss_window: float = 120.0, *,
                 args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        self.cluster, self.keep_alive = cluster, keep_alive
        self.coordinator = Coordinator(cluster, keep_alive, host, store, loss_window, args=args,
                                       env=env)

    @property
    def loss_window(self) -> float:
        """The coordinator's loss window for its agents (never less than 3 keep-alives)."""
        return max(self.coordinator.loss_window, 3 * self.keep_alive)

    @property
    def client(self) -> Client:
        return self.coordinator.client

    def start(self) -> Exchange:
        self.coordinator.start()
        return self

    def agent(self, name: str, server: str | None = None, *, cpus: int = 4,
              prefix: Sequence[str] = (), connect: bool = True, args: Sequence[str] = (),
              env: Mapping[str, str] | None = None) -> Agent:
        """Enrol and start an agent (dialling ``server``, default the coordinator itself)
        with more ``args`` and ``env``; wait until it is connected unless ``connect`` is
        False."""
        agent = Agent(self.cluster, name, server or self.coordinator.url, self.keep_alive,
                      cpus=cpus, prefix=prefix, args=args, env=env)
        agent.start(self.client.create_enrollment(name=name).token)
        if connect:
            self.wait_connected(agent)
        return agent

    def connected(self, agent: Agent) -> bool:
        node_id = agent.node_id
        return node_id is not None and any(n.id == node_id and n.connected
                                           for n in self.client.nodes())

    def wait_connected(self, agent: Agent, timeout: float = START_TIMEOUT_S) -> None:
        self.wait_for(lambda: self.connected(agent), timeout, f"{agent.name} to connect")

    def wait_for(self, predicate: Callable[[], T], timeout: float, what: str) -> T:
        return self.cluster.wait_for(predicate, timeout, what)

    def wait_job(self, job_id: str, done: Callable[[JobDetail], bool], timeout: float,
                 what: str) -> JobDetail:
        """The job's detail once ``done(detail)`` holds (the last detail seen on timeout)."""
        seen: list[JobDetail] = []

        def check() -> JobDetail | None:
            seen[:] = [self.client.job(job_id)]
            return seen[0] if done(seen[0]) else None

        try:
            return self.wait_for(check, timeout, f"job {job_id} {what}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nlast seen: {seen[0] if seen else None!r}") from None

    def wait_ended(self, job_id: str, timeout: float = 30.0) -> JobDetail:
        return self.wait_job(job_id, lambda j: j.state in ("SUCCEEDED", "FAILED", "CANCELLED"),
                             timeout, "to end")

    def wait_running(self, job_id: str, timeout: float = 30.0, attempt: int = 1) -> JobDetail:
        return self.wait_job(job_id, lambda j: j.state == "RUNNING" and j.attempt == attempt,
                             timeout, f"to run attempt {attempt}")
