"""``LocalExchange``: what ``bourse up`` and ``bourse down`` manage.

Layout of the data dir: ``server/`` (the coordinator's database, bundles, log),
``agent-N/`` (each agent's work dir), and ``up.json`` (pids and URL of what is running).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bourse.agent.interpreter import python_unreachable
from bourse.agent.shim import signal_group
from bourse.agent.spool import AttemptStatus, Spool
from bourse.core.errors import BourseError
from bourse.local.processes import alive, free_port, port_free, spawn, stop
from bourse.sdk.client import Client
from bourse.sdk.config import credentials_path, save_credentials

DEFAULT_PORT = 8470


def job_users_args(euid: int, python: Path, prefix: Path) -> list[str]:
    """The local agent's ``--job-users``: left to the agent (``auto``), unless the agent is
    root and job users could not run the python the local exchange puts first on jobs' PATH
    (``agent_env``); then off, so that ``bourse run -- python ...`` works."""
    if euid != 0 or python_unreachable(python, prefix) is None:
        return []
    return ["--job-users", "off"]


def agent_env() -> dict[str, str]:
    """The local agent's environment: jobs find this installation's ``python`` (with bourse,
    torch and Lightning) first on their PATH, as if its virtualenv were activated."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@contextmanager
def bourse_home_at(home: Path) -> Iterator[dict[str, str]]:
    """Use ``home`` as ``BOURSE_HOME`` (its credentials file) for a while; yields the
    environment a ``bourse`` subprocess needs to see the same exchange."""
    previous = os.environ.get("BOURSE_HOME")
    os.environ["BOURSE_HOME"] = str(home)
    try:
        yield {**os.environ, "BOURSE_HOME": str(home)}
    finally:
        if previous is None:
            os.environ.pop("BOURSE_HOME", None)
        else:
            os.environ["BOURSE_HOME"] = previous


class LocalExchangeError(BourseError):
    exit_code = 1


@dataclass
class Status:
    url: str
    server_pid: int
    agent_pids: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "server_pid": self.server_pid, "agent_pids": self.agent_pids}


@dataclass
class LocalExchange:
    data_dir: Path
    keep_alive_s: float = 20.0
    metrics_interval_s: float | None = None  # the agents' default (5 s) unless set

    @property
    def state_file(self) -> Path:
        return self.data_dir / "up.json"

    def status(self) -> Status | None:
        """What is running, or None; a stale state file (processes gone) counts as None."""
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None
        status = Status(data["url"], data["server_pid"], data.get("agent_pids", []))
        return status if alive(status.server_pid) else None

    def up(self, agents: int = 1, port: int | None = None, cpus: int | None = None) -> Status:
        """Start the coordinator and ``agents`` agents unless already running."""
        running = self.status()
        if running is not None:
            return running
        self.data_dir.mkdir(parents=True, exist_ok=True)
        url, server_pid = self._start_server(port)
        status = Status(url, server_pid)
        self._save(status)
        token = self._token(url)
        client = Client(url, token)
        for n in range(agents):
            status.agent_pids.append(self._start_agent(client, url, n, cpus))
            self._save(status)
        self._wait_nodes(client, agents)
        return status

    def _start_server(self, port: int | None) -> tuple[str, int]:
        port = port or (DEFAULT_PORT if port_free(DEFAULT_PORT) else free_port())
        server_dir = self.data_dir / "server"
        (server_dir / "server.json").unlink(missing_ok=True)
        fresh = not (server_dir / "bourse.db").exists()
        args = ["server", "--data-dir", str(server_dir), "--port", str(port),
                "--keep-alive", str(self.keep_alive_s)]
        if fresh:
            args += ["--credentials", str(credentials_path())]
        pid = spawn(args, server_dir / "server.log")
        url = f"http://127.0.0.1:{port}"
        self._wait_healthy(url, pid, server_dir / "server.log")
        return url, pid

    def _wait_healthy(self, url: str, pid: int, log: Path, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not alive(pid):
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise LocalExchangeError(f"the coordinator exited during start:\n{tail}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise LocalExchangeError(f"the coordinator did not answer on {url} within "
                                 f"{timeout:.0f} s; see {log}")

    def _token(self, url: str) -> str:
        """The admin token (written by the server's first start); point it at ``url``."""
        path = credentials_path()
        try:
            token = str(json.loads(path.read_text())["token"])
        except (OSError, ValueError, KeyError):
            raise LocalExchangeError(
                f"the local exchange in {self.data_dir} exists but its admin token is not in "
                f"{path}", hint=f"remove {self.data_dir} to start afresh") from None
        save_credentials(url, token)
        return token

    def _start_agent(self, client: Client, url: str, n: int, cpus: int | None) -> int:
        work_dir = self.data_dir / f"agent-{n}"
        name = f"local-{n}"
        args = ["agent", "--server", url, "--name", name, "--work-dir", str(work_dir),
                "--keep-alive", str(self.keep_alive_s), "--storage-mb", "16"]
        if not (work_dir / "node.json").exists():
            args += ["--token", client.create_enrollment(name=name).token]
        if cpus:
            args += ["--cpus", str(cpus)]
        if self.metrics_interval_s is not None:
            args += ["--metrics-interval", str(self.metrics_interval_s)]
        args += job_users_args(os.geteuid(), Path(sys.executable), Path(sys.prefix))
        return spawn(args, work_dir / "agent.log", env=agent_env())

    def _wait_nodes(self, client: Client, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(1 for n in client.nodes()
                   if n.connected and n.verification_status != "unverified") >= count:
                return
            time.sleep(0.1)
        raise LocalExchangeError(f"agents did not connect and verify within {timeout:.0f} s; "
                                 f"see {self.data_dir}/agent-*/agent.log")

    def _save(self, status: Status) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(status.to_json()))
        os.replace(tmp, self.state_file)

    def down(self) -> list[str]:
        """Stop agents, the jobs they run, and the coordinator. Returns what was stopped."""
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return []
        stopped = []
        for pid in data.get("agent_pids", []):
            if alive(pid):
                stop(pid)
                stopped.append(f"agent {pid}")
        stopped += [f"job {pid}" for pid in self._kill_jobs()]
        if alive(data["server_pid"]):
            stop(data["server_pid"])
            stopped.append(f"coordinator {data['server_pid']}")
        self.state_file.unlink(missing_ok=True)
        return stopped

    def _kill_jobs(self) -> list[int]:
        """Jobs survive their agent by design (it re-adopts them); ``down`` ends them too."""
        killed = []
        for spool_file in self.data_dir.glob("agent-*/spool.db"):
            spool = Spool(spool_file)
            try:
                for record in spool.attempts(AttemptStatus.STARTING, AttemptStatus.RUNNING):
                    if record.pid:
                        signal_group(record.pid, signal.SIGKILL)
                        killed.append(record.pid)
            finally:
                spool.close()
        return killed
