"""``LocalExchange``: what ``bourse up`` and ``bourse down`` manage.

Layout of the data dir: ``server/`` (the coordinator's database, bundles, log, store),
``agent-N/`` (each agent's work dir), ``up.json`` (what ``up`` started: ``record``) and
``up.lock`` (one ``up`` or ``down`` at a time).

``up`` adopts what already runs for the data dir (``inventory``) and starts only what does
not: a coordinator that crashed is restarted on the same port, its agents kept (they reconnect
to it). ``down`` stops every process of the exchange, and the jobs its agents started.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bourse.agent.interpreter import python_unreachable
from bourse.agent.jobs import kill_jobs
from bourse.core.liveness import DEFAULT_LOSS_WINDOW_S
from bourse.local import inventory
from bourse.local.inventory import STORE, Inventory, LocalExchangeError
from bourse.local.processes import Process, free_port, port_free, same, spawn, stop_all
from bourse.local.record import COORDINATOR, Record, agent_role, save
from bourse.sdk.client import Client
from bourse.sdk.config import credentials_path, save_credentials

CONTEXT = "local"  # the context `bourse up` writes and makes current
# its processes read no settings file: a server.toml written for a real coordinator (its
# database, its store) must not reach a throwaway local one
NO_SETTINGS_FILE = ["--config", "none"]

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


@dataclass
class Status:
    url: str
    server_pid: int
    agent_pids: list[int] = field(default_factory=list)
    started: list[str] = field(default_factory=list)  # roles this `up` started
    kept: list[str] = field(default_factory=list)  # roles that were running: adopted

    @property
    def already_running(self) -> bool:
        return not self.started

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "server_pid": self.server_pid, "agent_pids": self.agent_pids,
                "started": self.started, "kept": self.kept}


@dataclass
class Stopped:
    """What ``down`` did: processes it stopped, and recorded ones that had already ended."""

    stopped: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)


@dataclass
class LocalExchange:
    data_dir: Path
    keep_alive_s: float = 20.0
    loss_window_s: float = DEFAULT_LOSS_WINDOW_S  # the coordinator's (docs/exchange.md)
    metrics_interval_s: float | None = None  # the agents' default (5 s) unless set
    stop_grace_s: float = 15.0  # SIGTERM, then SIGKILL after this
    server_args: list[str] = field(default_factory=list)  # more `bourse server` options

    def __post_init__(self) -> None:
        # one spelling of every path: processes are recognised by the paths in their arguments
        self.data_dir = self.data_dir.expanduser().absolute()

    @property
    def state_file(self) -> Path:
        return self.data_dir / "up.json"

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One ``up`` or ``down`` at a time on this data dir."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_dir / "up.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def running(self) -> list[str]:
        """The roles of this exchange's processes that run now (``coordinator``,
        ``agent-N``)."""
        return sorted(inventory.take(self.data_dir, self.state_file).live.processes)

    def up(self, agents: int = 1, port: int | None = None, cpus: int | None = None) -> Status:
        """Bring the exchange up with at least ``agents`` agents (or as many as it had):
        what runs is kept, what does not is started."""
        with self._exclusive():
            live = inventory.take(self.data_dir, self.state_file).live
            status = Status("", 0)
            url = self._coordinator(live, port, status)
            client = Client(url, self._token(url))
            live.agents = max(agents, live.agents)
            for n in range(live.agents):
                self._agent(live, client, n, cpus, status)
            self._save(live)
            self._wait_nodes(client, len(live.agent_roles))
            return _status(live, status)

    def _coordinator(self, live: Record, port: int | None, status: Status) -> str:
        """The URL of the running coordinator, started if it is not."""
        if port is not None and live.processes and live.port not in (None, port):
            raise LocalExchangeError(
                f"the local exchange in {self.data_dir} runs on port {live.port}, not {port}",
                hint=f"leave --port out, or stop it first with `bourse down --data-dir "
                     f"{self.data_dir}`")
        process = live.processes.get(COORDINATOR)
        if process is not None:
            self._wait_healthy(live.url, process, adopted=True)
            status.kept.append(COORDINATOR)
            return live.url
        chosen = self._port(live, port)
        live.url = f"http://127.0.0.1:{chosen}"
        live.processes[COORDINATOR] = self._start_server(chosen)
        self._save(live)  # recorded before it is waited on
        self._wait_healthy(live.url, live.processes[COORDINATOR])
        status.started.append(COORDINATOR)
        return live.url

    def _port(self, live: Record, port: int | None) -> int:
        """The recorded port while agents run (they dial it), else the one asked for, the
        recorded one, the default, or a free one."""
        if live.processes:  # agents, without their coordinator
            if live.port is None or not port_free(live.port):
                raise LocalExchangeError(
                    f"the agents of the local exchange in {self.data_dir} are running but "
                    f"their coordinator's port ({live.port or 'unknown'}) is not free",
                    hint=f"stop the exchange with `bourse down --data-dir {self.data_dir}`, "
                         f"then start it again")
            return live.port
        for candidate in (port, live.port, DEFAULT_PORT):
            if candidate is not None and (candidate == port or port_free(candidate)):
                return candidate
        return free_port()

    def _start_server(self, port: int) -> Process:
        server_dir = self.data_dir / "server"
        (server_dir / "server.json").unlink(missing_ok=True)
        fresh = not (server_dir / "bourse.db").exists()
        args = ["server", "--data-dir", str(server_dir), "--port", str(port),
                "--keep-alive", str(self.keep_alive_s), "--loss-window", str(self.loss_window_s),
                *NO_SETTINGS_FILE, *self.server_args]
        if fresh:
            args += ["--credentials", str(self.admin_token)]
        return spawn(args, server_dir / "server.log")

    @property
    def admin_token(self) -> Path:
        """Where the coordinator's first start writes the admin token (JSON: url, token)."""
        return self.data_dir / "server" / "admin-token"

    def _wait_healthy(self, url: str, process: Process, timeout: float = 60.0,
                      adopted: bool = False) -> None:
        log = self.data_dir / "server" / "server.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not same(process):
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise LocalExchangeError(f"the coordinator exited during start:\n{tail}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise LocalExchangeError(
            f"the coordinator (pid {process.pid}) {'runs but ' if adopted else ''}did not "
            f"answer on {url} within {timeout:.0f} s; see {log}",
            hint=f"`bourse down --data-dir {self.data_dir}` stops it")

    def _token(self, url: str) -> str:
        """The admin token (written by the server's first start; by versions before
        contexts, into the legacy credentials file), kept as the context ``local``."""
        path = self.admin_token if self.admin_token.exists() else credentials_path()
        try:
            token = str(json.loads(path.read_text())["token"])
        except (OSError, ValueError, KeyError):
            raise LocalExchangeError(
                f"the local exchange in {self.data_dir} exists but its admin token is not in "
                f"{self.admin_token}", hint=f"remove {self.data_dir} to start afresh") from None
        save_credentials(url, token, context=CONTEXT)
        return token

    def _agent(self, live: Record, client: Client, n: int, cpus: int | None,
               status: Status) -> None:
        """Agent ``n``: kept when it runs, else started (and recorded at once)."""
        role = agent_role(n)
        if role in live.processes:
            status.kept.append(role)
            return
        live.processes[role] = self._start_agent(client, live.url, n, cpus)
        self._save(live)
        status.started.append(role)

    def _start_agent(self, client: Client, url: str, n: int, cpus: int | None) -> Process:
        work_dir = self.data_dir / agent_role(n)
        name = f"local-{n}"
        args = ["agent", "--server", url, "--name", name, "--work-dir", str(work_dir),
                "--keep-alive", str(self.keep_alive_s), "--storage-mb", "16",
                *NO_SETTINGS_FILE]
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

    def _save(self, live: Record) -> None:
        save(self.state_file, live)

    def down(self) -> Stopped:
        """Stop the agents, the jobs they run, the coordinator and its store: every process
        of this exchange, recorded or found, and none that is not."""
        if not self.data_dir.is_dir():
            return Stopped()
        with self._exclusive():
            found = inventory.take(self.data_dir, self.state_file)
            done = Stopped(gone=[found.describe(role) for role in found.gone])
            self._stop(found, found.live.agent_roles, done)
            done.stopped += [f"job (pid {pid})" for pid in self._kill_jobs()]
            self._stop(found, [COORDINATOR] if COORDINATOR in found.live.processes else [],
                       done)
            if found.store is not None:
                stop_all([found.store], self.stop_grace_s)
                done.stopped.append(f"{STORE} (pid {found.store.pid})")
            self.state_file.unlink(missing_ok=True)
            return done

    def _stop(self, found: Inventory, roles: list[str], done: Stopped) -> None:
        processes = [found.live.processes[role] for role in roles]
        stop_all(processes, self.stop_grace_s)
        left = [role for role, process in zip(roles, processes, strict=True) if same(process)]
        if left:
            raise LocalExchangeError(f"{', '.join(map(found.describe, left))} did not stop "
                                     f"after SIGKILL", hint="check the processes and retry")
        done.stopped += [found.describe(role) for role in roles]

    def _kill_jobs(self) -> list[int]:
        """Jobs survive their agent by design (it re-adopts them); ``down`` ends them too."""
        return [pid for work_dir in sorted(self.data_dir.glob("agent-*"))
                for pid in kill_jobs(work_dir)]


def _status(live: Record, status: Status) -> Status:
    status.url = live.url
    status.server_pid = live.processes[COORDINATOR].pid
    status.agent_pids = [live.processes[role].pid for role in live.agent_roles]
    return status
