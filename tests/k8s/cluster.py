"""A real Kubernetes control plane on loopback, and a fake GPU kubelet that runs pods as local
processes: the test harness of bourse's Kubernetes backend.

``Cluster`` starts etcd, kube-apiserver and kube-scheduler (built from Debian's source by
``build-kube.sh``; ``KubeBinaries.find`` says where they are), every port on 127.0.0.1, an admin
token in ``system:masters``, RBAC, the apiserver's self-signed serving cert as the kubeconfig's
CA. There is no kube-controller-manager and no kubelet, which shapes what the cluster does:

* no controllers: Deployments, Jobs, ReplicaSets create no pods, no ``default`` ServiceAccount
  is made in new namespaces (the ``ServiceAccount`` admission plugin is off, so pods need none),
  no node lifecycle (a node is never marked NotReady, its pods never evicted), no pod GC (pods
  of a deleted node stay);
* ``TaintNodesByCondition`` admission is off: it taints every new node ``not-ready``, and only
  the node lifecycle controller would take the taint off;
* a bound, running pod deleted with a grace period only gets a ``deletionTimestamp``: the
  kubelet finishes the deletion (``DELETE`` with ``gracePeriodSeconds: 0``). ``FakeKubelet``
  does that; the pods of a ``register_node``-only node stay Terminating until force-deleted.
  (Unbound pods and pods in a terminal phase are deleted at once by the apiserver.)

``FakeKubelet`` registers a node (capacity/allocatable such as ``nvidia.com/gpu``, labels,
taints, ``Ready=True`` kept fresh) and runs the *first container* of each pod bound to it as a
local process (``command`` + ``args``; the image is ignored, so a pod without ``command`` fails
with exit code 128). What it resolves from the pod:

* env: ``envFrom`` (Secret, ConfigMap) then ``env`` (``value`` with ``$(VAR)`` expansion,
  ``valueFrom`` ``secretKeyRef``/``configMapKeyRef``/``fieldRef``/``resourceFieldRef``), on
  top of ``KUBERNETES_SERVICE_HOST``/``_PORT`` (the real apiserver, so in-cluster clients
  work), ``HOSTNAME`` (the pod's name), on top of the ``base_env`` the test passes. A missing
  Secret/ConfigMap key keeps the pod Pending (``CreateContainerConfigError``), retried.
* volumes mounted by the container: ``secret`` and ``configMap`` (keys, or ``items``, written
  as files), ``emptyDir`` and anything else (an empty folder), ``hostPath`` (the host path
  itself), each in ``<pod dir>/volumes/<volume name>`` (``subPath`` honoured). The process
  cannot see the mount path, so every occurrence of a ``mountPath`` in the command, args, env
  values and ``workingDir`` is rewritten to the local folder, and ``BOURSE_FAKE_MOUNTS`` holds
  the JSON map ``{mountPath: local folder}``.

The process runs in its own session, in the pod's folder (or its rewritten ``workingDir``),
stdout and stderr to ``<pod dir>/log``; the pod's status follows it (Running, podIP 127.0.0.1,
then Succeeded/Failed with the exit code; 128+N for signal N). ``restartPolicy`` is honoured
(Always/OnFailure restart with a short backoff, ``restartCount`` counted). A deleted pod's
process group gets SIGTERM, SIGKILL after its grace period (at most 10 s), then the deletion is
finished. Init containers and containers after the first are not run.
"""

from __future__ import annotations

import base64
import contextlib
import json as jsonlib
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx
import pytest

T = TypeVar("T")

DEFAULT_CACHE = "~/.cache/bourse-kube"
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until(check: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.25,
               what: str = "condition") -> T:
    """Call ``check`` until it returns something other than None/False; return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


# --- binaries ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KubeBinaries:
    apiserver: Path
    scheduler: Path
    etcd: Path

    @classmethod
    def find(cls) -> KubeBinaries | None:
        """kube-apiserver and kube-scheduler from ``$BOURSE_KUBE_BIN``, else
        ``${BOURSE_KUBE_CACHE:-~/.cache/bourse-kube}/bin`` (where build-kube.sh puts them);
        etcd from the same folder, else PATH (Debian's etcd-server: /usr/bin/etcd). None if any
        is missing."""
        dirs: list[Path] = []
        if os.environ.get("BOURSE_KUBE_BIN"):
            dirs.append(Path(os.environ["BOURSE_KUBE_BIN"]).expanduser())
        dirs.append(Path(os.environ.get("BOURSE_KUBE_CACHE") or DEFAULT_CACHE).expanduser() / "bin")
        for d in dirs:
            api, sched = d / "kube-apiserver", d / "kube-scheduler"
            if os.access(api, os.X_OK) and os.access(sched, os.X_OK):
                local_etcd = d / "etcd"
                etcd = (str(local_etcd) if os.access(local_etcd, os.X_OK)
                        else shutil.which("etcd") or "/usr/bin/etcd")
                if not os.access(etcd, os.X_OK):
                    return None
                return cls(api, sched, Path(etcd))
        return None


def needs_kube() -> pytest.MarkDecorator:
    """Skip without the binaries, except under CI=1 (.ci/run builds them: their absence there
    is a failure, which ``Cluster`` raises, not a skip)."""
    return pytest.mark.skipif(
        KubeBinaries.find() is None and not os.environ.get("CI"),
        reason="no kube-apiserver/kube-scheduler/etcd here: run tests/k8s/build-kube.sh (it "
               "builds them from Debian's source; docs/clouds.md, Kubernetes) or set "
               "BOURSE_KUBE_BIN")


# --- the control plane ---------------------------------------------------------------------------

def _pdeathsig(argv: Sequence[str]) -> list[str]:
    """``argv`` killed when the thread that starts it ends (a killed test leaves no servers),
    by util-linux's setpriv where there is one."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else list(argv)


def _make_sa_key(key: Path, pub: Path) -> None:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError:
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
                       check=True, capture_output=True)
        return
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.TraditionalOpenSSL,
                                          serialization.NoEncryption()))
    pub.write_bytes(private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


class Cluster:
    """etcd + kube-apiserver + kube-scheduler on 127.0.0.1, in a temporary folder.

    ``with Cluster() as c: c.api("GET", "/api/v1/nodes").json()``; ``c.kubeconfig`` (context
    ``test``, namespace ``default``), ``c.server``, ``c.token``, ``c.ca_file``."""

    def __init__(self, binaries: KubeBinaries | None = None, *, timeout: float = 60.0,
                 keep: bool = False, verbosity: int = 1) -> None:
        found = binaries or KubeBinaries.find()
        if found is None:
            raise RuntimeError("kube-apiserver/kube-scheduler/etcd not found: run "
                               "tests/k8s/build-kube.sh")
        self.binaries = found
        self.timeout = timeout
        self.keep = keep
        self.verbosity = verbosity
        self.dir = Path(tempfile.mkdtemp(prefix="bourse-kube-"))
        self.token = secrets.token_hex(16)
        self.etcd_port, self.etcd_peer_port = _free_port(), _free_port()
        self.port, self.scheduler_port = _free_port(), _free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = self.dir / "kubeconfig"
        self.ca_file = self.dir / "ca.crt"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.startup_seconds: dict[str, float] = {}
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._clients_lock = threading.Lock()

    # lifecycle

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _spawn(self, name: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        with open(self.dir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(_pdeathsig(argv), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, cwd=self.dir,
                                    start_new_session=True)
        self.procs[name] = proc
        return proc

    def tail(self, name: str, lines: int = 30) -> str:
        path = self.dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait(self, name: str, check: Callable[[], bool]) -> None:
        t0 = time.monotonic()
        proc = self.procs[name]
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.tail(name)}")
            with contextlib.suppress(httpx.HTTPError, OSError, ssl.SSLError):
                if check():
                    break
            if time.monotonic() - t0 > self.timeout:
                raise TimeoutError(f"{name} not ready after {self.timeout:.0f} s:\n"
                                   f"{self.tail(name)}")
            time.sleep(0.25)
        self.startup_seconds[name] = time.monotonic() - t0

    def start(self) -> None:
        t0 = time.monotonic()
        d = self.dir
        b = self.binaries
        # etcd
        self._spawn("etcd", [
            str(b.etcd), "--name=test", f"--data-dir={d / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
            f"--initial-cluster=test=http://127.0.0.1:{self.etcd_peer_port}",
            "--log-level=warn", "--logger=zap", "--snapshot-count=100000",
            "--quota-backend-bytes=1073741824",
        ])
        self._wait("etcd", lambda: httpx.get(
            f"http://127.0.0.1:{self.etcd_port}/health", timeout=5).json().get("health") == "true")
        # kube-apiserver
        (d / "tokens.csv").write_text(f'{self.token},admin,admin,"system:masters"\n')
        _make_sa_key(d / "sa.key", d / "sa.pub")
        self._spawn("kube-apiserver", [
            str(b.apiserver), f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1", f"--secure-port={self.port}", "--insecure-port=0",
            "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
            f"--cert-dir={d / 'pki'}", f"--token-auth-file={d / 'tokens.csv'}",
            "--authorization-mode=RBAC", "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--allow-privileged=true", "--profiling=false", f"-v={self.verbosity}",
        ])
        cert = d / "pki" / "apiserver.crt"
        self._wait("kube-apiserver", lambda: cert.exists() and self._write_ca(cert)
                   and self.api("GET", "/readyz", timeout=5).status_code == 200)
        wait_until(lambda: self.api("GET", "/api/v1/namespaces/default").status_code == 200,
                   self.timeout, what="namespace default")
        self._write_kubeconfig()
        # kube-scheduler
        self._spawn("kube-scheduler", [
            str(b.scheduler), f"--kubeconfig={self.kubeconfig}", "--leader-elect=false",
            "--bind-address=127.0.0.1", f"--secure-port={self.scheduler_port}", "--port=0",
            "--profiling=false", f"-v={self.verbosity}",
        ])
        self._wait("kube-scheduler", lambda: httpx.get(
            f"https://127.0.0.1:{self.scheduler_port}/healthz", verify=False,
            timeout=5).status_code == 200)
        self.startup_seconds["total"] = time.monotonic() - t0

    def _write_ca(self, cert: Path) -> bool:
        """The apiserver's cert file holds its serving cert, then the CA that signed it."""
        blocks = re.findall(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\n?",
                            cert.read_text(), re.S)
        if not blocks:
            return False
        self.ca_file.write_text(blocks[-1])
        return True

    def _write_kubeconfig(self) -> None:
        ca = base64.b64encode(self.ca_file.read_bytes()).decode()
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.server,
                                                      "certificate-authority-data": ca}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin",
                                                      "namespace": "default"}}],
        }
        self.kubeconfig.write_text(jsonlib.dumps(config, indent=2))  # JSON is YAML

    def stop(self) -> None:
        with self._clients_lock:
            for client in self._clients:
                with contextlib.suppress(Exception):
                    client.close()
            self._clients.clear()
        for name in ("kube-scheduler", "kube-apiserver", "etcd"):
            proc = self.procs.get(name)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        self.procs.clear()
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    # talking to the apiserver

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
        return ctx

    def client(self, timeout: float = 30.0) -> httpx.Client:
        """A new client for the apiserver (the caller closes it)."""
        return httpx.Client(base_url=self.server, verify=self.ssl_context(), timeout=timeout,
                            headers={"Authorization": f"Bearer {self.token}"})

    def _thread_client(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None or client.is_closed:
            client = self.client()
            self._local.client = client
            with self._clients_lock:
                self._clients.append(client)
        return client

    def api(self, method: str, path: str, json: Any = None, *,
            params: Mapping[str, str] | None = None, content_type: str | None = None,
            timeout: float = 30.0) -> httpx.Response:
        """One request to the apiserver as the admin; ``content_type`` for PATCH (default:
        strategic merge patch)."""
        headers = {}
        if json is not None:
            headers["Content-Type"] = content_type or (
                STRATEGIC if method.upper() == "PATCH" else "application/json")
        return self._thread_client().request(
            method, path, content=None if json is None else jsonlib.dumps(json),
            params=params, headers=headers, timeout=timeout)

    def json(self, method: str, path: str, json: Any = None, **kw: Any) -> Any:
        """``api`` that raises on an HTTP error and returns the decoded body."""
        resp = self.api(method, path, json, **kw)
        if resp.is_error:
            raise RuntimeError(f"{method} {path}: {resp.status_code} {resp.text}")
        return resp.json()

    def listening(self) -> list[tuple[str, str, int]]:
        """(process, address, port) of every TCP socket the control plane listens on."""
        import psutil
        out: list[tuple[str, str, int]] = []
        for name, proc in self.procs.items():
            for conn in psutil.Process(proc.pid).net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    out.append((name, conn.laddr.ip, conn.laddr.port))
        return out

    def create_namespace(self, name: str) -> None:
        self.json("POST", "/api/v1/namespaces",
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def create_secret(self, name: str, data: Mapping[str, str | bytes],
                      namespace: str = "default") -> dict[str, Any]:
        encoded = {k: base64.b64encode(v.encode() if isinstance(v, str) else v).decode()
                   for k, v in data.items()}
        result: dict[str, Any] = self.json(
            "POST", f"/api/v1/namespaces/{namespace}/secrets",
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
             "type": "Opaque", "data": encoded})
        return result

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        resp = self.api("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        if resp.status_code == 404:
            return None
        resp.raise_for_status()
        result: dict[str, Any] = resp.json()
        return result


# --- nodes ---------------------------------------------------------------------------------------

def _quantities(values: Mapping[str, str | int] | None) -> dict[str, str]:
    return {k: str(v) for k, v in (values or {}).items()}


def _node_status(name: str, capacity: Mapping[str, str], allocatable: Mapping[str, str]
                 ) -> dict[str, Any]:
    now = _now()

    def cond(kind: str, status: str, reason: str) -> dict[str, str]:
        return {"type": kind, "status": status, "reason": reason, "message": reason,
                "lastHeartbeatTime": now, "lastTransitionTime": now}

    return {
        "capacity": dict(capacity), "allocatable": dict(allocatable),
        "conditions": [cond("Ready", "True", "KubeletReady"),
                       cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                       cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                       cond("PIDPressure", "False", "KubeletHasSufficientPID")],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                      {"type": "Hostname", "address": name}],
        "nodeInfo": {"machineID": name, "systemUUID": name, "bootID": name,
                     "kernelVersion": os.uname().release, "osImage": "fake",
                     "containerRuntimeVersion": "fake://0", "kubeletVersion": "v1.20.2-fake",
                     "kubeProxyVersion": "v1.20.2-fake", "operatingSystem": "linux",
                     "architecture": "amd64"},
    }


def register_node(cluster: Cluster, name: str, capacity: Mapping[str, str | int] | None = None,
                  *, labels: Mapping[str, str] | None = None,
                  taints: Sequence[Mapping[str, str]] | None = None,
                  allocatable: Mapping[str, str | int] | None = None) -> dict[str, Any]:
    """A Ready node that nothing runs: ``capacity`` (on top of cpu 16, memory 64Gi, pods 110;
    e.g. ``{"nvidia.com/gpu": 8}``), ``allocatable`` (default: the capacity), ``labels`` (on
    top of hostname/os/arch), ``taints`` (``{"key", "value", "effect"}``). Returns the node."""
    cap = {"cpu": "16", "memory": "64Gi", "pods": "110", **_quantities(capacity)}
    alloc = {**cap, **_quantities(allocatable)}
    body = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", **(labels or {})}},
        "spec": {"taints": [dict(t) for t in taints or []]},
        "status": _node_status(name, cap, alloc),
    }
    cluster.json("POST", "/api/v1/nodes", body)
    # the status given on create is kept in 1.20, but set it through /status all the same
    result: dict[str, Any] = cluster.json("PATCH", f"/api/v1/nodes/{name}/status",
                                          {"status": body["status"]})
    return result


# --- the fake kubelet ----------------------------------------------------------------------------

class _ConfigError(Exception):
    """A Secret/ConfigMap the container needs is missing: the pod stays Pending, retried."""


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def _expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: known variables replaced, ``$$`` -> ``$``."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _VAR.sub(sub, text)


@dataclass
class PodProcess:
    """One pod run by a FakeKubelet (kept after it ends, for its log)."""

    namespace: str
    name: str
    uid: str
    dir: Path
    restart_policy: str
    container: str
    image: str
    proc: subprocess.Popen[bytes] | None = None
    state: str = "pending"  # pending, running, backoff, finished, terminating, gone
    restarts: int = 0
    started_at: str = ""
    next_start: float = 0.0
    exit_code: int | None = None
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    mounts: dict[str, str] = field(default_factory=dict)
    config_error: str = ""

    @property
    def log_path(self) -> Path:
        return self.dir / "log"


class FakeKubelet:
    """A node (see ``register_node``) whose pods run as local processes (see the module doc).

    ``base_env`` is the environment under the pod's (default: this process's). Starts on
    construction; ``stop()`` (or the context manager's exit) kills its processes and deletes
    the node."""

    def __init__(self, cluster: Cluster, name: str,
                 capacity: Mapping[str, str | int] | None = None,
                 labels: Mapping[str, str] | None = None,
                 taints: Sequence[Mapping[str, str]] | None = None, *,
                 allocatable: Mapping[str, str | int] | None = None,
                 base_env: Mapping[str, str] | None = None, workdir: Path | None = None,
                 poll: float = 0.5, heartbeat: float = 5.0, max_grace: float = 10.0) -> None:
        self.cluster = cluster
        self.name = name
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.dir = workdir or cluster.dir / "kubelets" / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.poll = poll
        self.heartbeat = heartbeat
        self.max_grace = max_grace
        self.pods: dict[str, PodProcess] = {}  # by uid
        self.errors: list[str] = []  # sync errors, for debugging
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        node = register_node(cluster, name, capacity, labels=labels, taints=taints,
                             allocatable=allocatable)
        self._capacity: dict[str, str] = node["status"]["capacity"]
        self._allocatable: dict[str, str] = node["status"]["allocatable"]
        self._client = cluster.client()
        self._thread = threading.Thread(target=self._run, name=f"fake-kubelet-{name}",
                                        daemon=True)
        self._thread.start()

    def __enter__(self) -> FakeKubelet:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # what tests look at

    def processes(self) -> list[int]:
        """The pids of the pods' processes that are alive."""
        with self._lock:
            return [p.proc.pid for p in self.pods.values()
                    if p.proc is not None and p.proc.poll() is None]

    def find(self, pod_name: str, namespace: str = "default") -> PodProcess | None:
        with self._lock:
            found = [p for p in self.pods.values()
                     if p.name == pod_name and p.namespace == namespace]
        return found[-1] if found else None

    def log(self, pod_name: str, namespace: str = "default") -> str:
        """The output of the latest pod of that name ("" if it never ran)."""
        pod = self.find(pod_name, namespace)
        if pod is None or not pod.log_path.exists():
            return ""
        return pod.log_path.read_text(errors="replace")

    def stop(self, delete_node: bool = True, delete_pods: bool = False) -> None:
        """Kill every process (SIGTERM, SIGKILL after 2 s); delete the node (its pods stay, as
        without a pod GC, unless ``delete_pods``)."""
        self._stop.set()
        self._thread.join(30)
        for t in self._threads:
            t.join(15)
        with self._lock:
            running = [p for p in self.pods.values() if p.proc is not None]
        for pod in running:
            self._kill(pod, 2.0)
        with contextlib.suppress(httpx.HTTPError):
            if delete_pods:
                for item in self._list_pods():
                    self._finish_delete(self._client, item)
            if delete_node:
                self._client.delete(f"/api/v1/nodes/{self.name}")
        self._client.close()

    # the loop

    def _run(self) -> None:
        last_beat = time.monotonic()
        while not self._stop.wait(self.poll):
            try:
                if time.monotonic() - last_beat >= self.heartbeat:
                    self._heartbeat()
                    last_beat = time.monotonic()
                self._sync()
            except Exception as e:  # keep going: the apiserver may be busy or stopping
                self.errors.append(f"{type(e).__name__}: {e}")
                del self.errors[:-50]

    def _heartbeat(self) -> None:
        status = _node_status(self.name, self._capacity, self._allocatable)
        self._client.patch(f"/api/v1/nodes/{self.name}/status",
                           content=jsonlib.dumps({"status": {"conditions": status["conditions"]}}),
                           headers={"Content-Type": STRATEGIC})

    def _list_pods(self) -> list[dict[str, Any]]:
        resp = self._client.get("/api/v1/pods",
                                params={"fieldSelector": f"spec.nodeName={self.name}"})
        resp.raise_for_status()
        items: list[dict[str, Any]] = resp.json()["items"]
        return items

    def _sync(self) -> None:
        pods = {p["metadata"]["uid"]: p for p in self._list_pods()}
        with self._lock:
            known = dict(self.pods)
        for uid, rec in known.items():
            self._sync_known(rec, pods.get(uid))
        for uid, pod in pods.items():
            meta = pod["metadata"]
            if uid in known:
                continue
            if meta.get("deletionTimestamp"):
                self._finish_delete(self._client, pod)
                continue
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            container = pod["spec"]["containers"][0]
            rec = PodProcess(namespace=meta["namespace"], name=meta["name"], uid=uid,
                             dir=self.dir / f"{meta['namespace']}_{meta['name']}_{uid[:8]}",
                             restart_policy=pod["spec"].get("restartPolicy", "Always"),
                             container=container["name"], image=container.get("image", ""))
            with self._lock:
                self.pods[uid] = rec
            self._start(rec, pod)

    def _sync_known(self, rec: PodProcess, pod: dict[str, Any] | None) -> None:
        if rec.state in ("terminating", "gone"):
            return
        if pod is None:  # force-deleted
            self._terminate(rec, None)
        elif pod["metadata"].get("deletionTimestamp"):
            self._terminate(rec, pod)
        elif rec.state == "running" and rec.proc is not None and rec.proc.poll() is not None:
            self._exited(rec)
        elif rec.state == "pending" or (rec.state == "backoff"
                                        and time.monotonic() >= rec.next_start):
            self._start(rec, pod)

    # starting

    def _get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        resp = self._client.get(f"/api/v1/namespaces/{namespace}/{kind}/{name}")
        if resp.status_code == 404:
            return None
        resp.raise_for_status()
        result: dict[str, Any] = resp.json()
        return result

    def _source(self, kind: str, namespace: str, name: str) -> dict[str, str] | None:
        """The decoded data of a Secret (``secrets``) or ConfigMap (``configmaps``)."""
        obj = self._get(kind, namespace, name)
        if obj is None:
            return None
        if kind == "secrets":
            return {k: base64.b64decode(v).decode(errors="surrogateescape")
                    for k, v in (obj.get("data") or {}).items()}
        data = dict(obj.get("data") or {})
        for k, v in (obj.get("binaryData") or {}).items():
            data[k] = base64.b64decode(v).decode(errors="surrogateescape")
        return data

    def _key_ref(self, kind: str, namespace: str, ref: Mapping[str, Any]) -> str | None:
        data = self._source(kind, namespace, ref["name"])
        if data is None or ref["key"] not in data:
            if ref.get("optional"):
                return None
            raise _ConfigError(f"{kind[:-1]} {ref['name']!r} key {ref['key']!r} not found")
        return data[ref["key"]]

    def _field_ref(self, pod: Mapping[str, Any], path: str) -> str:
        meta, spec = pod["metadata"], pod["spec"]
        simple = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"],
                  "metadata.uid": meta["uid"], "spec.nodeName": self.name,
                  "spec.serviceAccountName": spec.get("serviceAccountName", ""),
                  "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1",
                  "status.podIPs": "127.0.0.1"}
        if path in simple:
            return str(simple[path])
        m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
        if m:
            return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
        raise _ConfigError(f"fieldRef {path!r} not supported by the fake kubelet")

    def _resolve_env(self, pod: Mapping[str, Any], container: Mapping[str, Any]
                     ) -> dict[str, str]:
        ns = pod["metadata"]["namespace"]
        env: dict[str, str] = {}
        for src in container.get("envFrom") or []:
            kind, ref = (("secrets", src["secretRef"]) if "secretRef" in src
                         else ("configmaps", src.get("configMapRef") or {}))
            data = self._source(kind, ns, ref.get("name", ""))
            if data is None:
                if ref.get("optional"):
                    continue
                raise _ConfigError(f"{kind[:-1]} {ref.get('name')!r} not found")
            prefix = src.get("prefix", "")
            env.update({prefix + k: v for k, v in data.items()})
        for var in container.get("env") or []:
            value = self._env_value(pod, container, var, env)
            if value is not None:
                env[var["name"]] = value
        return env

    def _env_value(self, pod: Mapping[str, Any], container: Mapping[str, Any],
                   var: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
        ns = pod["metadata"]["namespace"]
        source = var.get("valueFrom")
        if source is None:
            return _expand(var.get("value", ""), env)
        if "secretKeyRef" in source:
            return self._key_ref("secrets", ns, source["secretKeyRef"])
        if "configMapKeyRef" in source:
            return self._key_ref("configmaps", ns, source["configMapKeyRef"])
        if "fieldRef" in source:
            return self._field_ref(pod, source["fieldRef"]["fieldPath"])
        if "resourceFieldRef" in source:
            kind, _, res = source["resourceFieldRef"]["resource"].partition(".")
            return str(((container.get("resources") or {}).get(kind) or {}).get(res, ""))
        raise _ConfigError(f"env {var['name']}: unsupported valueFrom {source}")

    def _write_items(self, target: Path, data: Mapping[str, str],
                     items: Sequence[Mapping[str, Any]] | None, mode: int) -> None:
        pairs = ([(it["key"], it["path"], it.get("mode", mode)) for it in items] if items
                 else [(k, k, mode) for k in data])
        for key, rel, fmode in pairs:
            if key not in data:
                raise _ConfigError(f"key {key!r} not found for volume {target.name}")
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data[key].encode(errors="surrogateescape"))
            path.chmod(fmode)

    def _materialise(self, rec: PodProcess, pod: Mapping[str, Any],
                     container: Mapping[str, Any]) -> dict[str, str]:
        """mountPath -> local folder (or file, with subPath) for each of its volumeMounts."""
        ns = pod["metadata"]["namespace"]
        volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        mounts: dict[str, str] = {}
        for vm in container.get("volumeMounts") or []:
            vol = volumes.get(vm["name"], {})
            local = rec.dir / "volumes" / vm["name"]
            if "hostPath" in vol:
                local = Path(vol["hostPath"]["path"])
            elif not local.exists():
                local.mkdir(parents=True)
                for kind, key, name_key in (("secrets", "secret", "secretName"),
                                            ("configmaps", "configMap", "name")):
                    if key not in vol:
                        continue
                    spec = vol[key]
                    data = self._source(kind, ns, spec.get(name_key, ""))
                    if data is None:
                        if spec.get("optional"):
                            continue
                        shutil.rmtree(local)
                        raise _ConfigError(f"{kind[:-1]} {spec.get(name_key)!r} not found")
                    self._write_items(local, data, spec.get("items"),
                                      spec.get("defaultMode", 0o644))
            if vm.get("subPath"):
                local = local / vm["subPath"]
            mounts[vm["mountPath"].rstrip("/") or "/"] = str(local)
        return mounts

    @staticmethod
    def _rewrite(text: str, mounts: Mapping[str, str]) -> str:
        for mount in sorted(mounts, key=len, reverse=True):
            if len(mount) > 1:
                text = re.sub(re.escape(mount) + r"(?=/|$|[^A-Za-z0-9_.\-])",
                              mounts[mount].replace("\\", "\\\\"), text)
        return text

    def _start(self, rec: PodProcess, pod: Mapping[str, Any]) -> None:
        container = pod["spec"]["containers"][0]
        rec.dir.mkdir(parents=True, exist_ok=True)
        try:
            mounts = self._materialise(rec, pod, container)
            env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                   "KUBERNETES_SERVICE_PORT": str(self.cluster.port),
                   "KUBERNETES_SERVICE_PORT_HTTPS": str(self.cluster.port),
                   "HOSTNAME": rec.name}
            env.update(self._resolve_env(pod, container))
        except _ConfigError as e:
            if rec.config_error != str(e):
                rec.config_error = str(e)
                self._patch_status(rec, {"phase": "Pending", "containerStatuses": [
                    self._cstatus(rec, {"waiting": {"reason": "CreateContainerConfigError",
                                                    "message": str(e)}}, ready=False)]})
            return
        env = {k: self._rewrite(v, mounts) for k, v in env.items()}
        env["BOURSE_FAKE_MOUNTS"] = jsonlib.dumps(mounts)
        argv = [self._rewrite(_expand(a, env), mounts)
                for a in [*(container.get("command") or []), *(container.get("args") or [])]]
        cwd = rec.dir
        if container.get("workingDir"):
            wd = Path(self._rewrite(container["workingDir"], mounts))
            cwd = wd if wd.is_dir() else cwd
        rec.argv, rec.env, rec.mounts = argv, env, mounts
        rec.started_at = _now()
        try:
            if not container.get("command"):
                raise FileNotFoundError("the fake kubelet runs only pods with a command")
            with open(rec.log_path, "ab") as log:
                rec.proc = subprocess.Popen(_pdeathsig(argv), cwd=cwd,
                                            env={**self.base_env, **env},
                                            stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            with open(rec.log_path, "a") as log:
                log.write(f"fake kubelet: cannot start {argv}: {e}\n")
            rec.proc = None
            self._ended(rec, 128, "StartError")
            return
        rec.state = "running"
        self._patch_status(rec, {
            "phase": "Running", "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}], "startTime": pod.get("status", {}).get(
                "startTime") or rec.started_at,
            "conditions": self._conditions(ready=True),
            "containerStatuses": [self._cstatus(rec, {"running": {"startedAt": rec.started_at}},
                                                ready=True)]})

    # ending

    def _exited(self, rec: PodProcess) -> None:
        assert rec.proc is not None
        code = rec.proc.returncode
        code = 128 - code if code < 0 else code
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(rec.proc.pid, signal.SIGKILL)  # whatever it left behind
        self._ended(rec, code, "Completed" if code == 0 else "Error")

    def _ended(self, rec: PodProcess, code: int, reason: str) -> None:
        rec.exit_code = code
        terminated = {"terminated": {"exitCode": code, "reason": reason,
                                     "startedAt": rec.started_at, "finishedAt": _now(),
                                     "containerID": self._cid(rec)}}
        if rec.restart_policy == "Always" or (rec.restart_policy == "OnFailure" and code):
            rec.restarts += 1
            rec.state = "backoff"
            rec.next_start = time.monotonic() + min(10.0, 0.5 * 2 ** min(rec.restarts, 5))
            self._patch_status(rec, {"containerStatuses": [self._cstatus(
                rec, {"waiting": {"reason": "CrashLoopBackOff" if code else "Completed"}},
                ready=False, last=terminated)]})
            return
        rec.state = "finished"
        self._patch_status(rec, {
            "phase": "Succeeded" if code == 0 else "Failed",
            "conditions": self._conditions(ready=False),
            "containerStatuses": [self._cstatus(rec, terminated, ready=False)]})

    def _terminate(self, rec: PodProcess, pod: Mapping[str, Any] | None) -> None:
        """The pod is being deleted: kill its process within its grace, finish the deletion."""
        rec.state = "terminating"
        grace = float(self.max_grace)
        if pod is not None:
            meta, spec = pod["metadata"], pod["spec"]
            asked = meta.get("deletionGracePeriodSeconds",
                             spec.get("terminationGracePeriodSeconds", 30))
            grace = min(float(asked), self.max_grace)

        def finish() -> None:
            self._kill(rec, grace)
            if pod is not None:
                with self.cluster.client() as client:
                    self._finish_delete(client, pod)
            rec.state = "gone"

        t = threading.Thread(target=finish, name=f"fake-kubelet-kill-{rec.name}", daemon=True)
        self._threads.append(t)
        t.start()

    @staticmethod
    def _kill(rec: PodProcess, grace: float) -> None:
        proc = rec.proc
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the rest of its group
            return

    @staticmethod
    def _finish_delete(client: httpx.Client, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "preconditions": {"uid": meta["uid"]}}
        client.request("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                       content=jsonlib.dumps(body),
                       headers={"Content-Type": "application/json"})

    # status

    @staticmethod
    def _cid(rec: PodProcess) -> str:
        return f"fake://{rec.proc.pid if rec.proc else 0}"

    def _cstatus(self, rec: PodProcess, state: Mapping[str, Any], *, ready: bool,
                 last: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {"name": rec.container, "image": rec.image, "imageID": f"fake://{rec.image}",
                "containerID": self._cid(rec), "ready": ready, "started": "running" in state,
                "restartCount": rec.restarts, "state": dict(state),
                "lastState": dict(last or {})}

    @staticmethod
    def _conditions(*, ready: bool) -> list[dict[str, str]]:
        now = _now()
        status = "True" if ready else "False"
        return [{"type": t, "status": s, "lastTransitionTime": now}
                | ({} if ready or t not in ("Ready", "ContainersReady")
                   else {"reason": "PodCompleted"})
                for t, s in (("Initialized", "True"), ("Ready", status),
                             ("ContainersReady", status), ("PodScheduled", "True"))]

    def _patch_status(self, rec: PodProcess, status: Mapping[str, Any]) -> None:
        resp = self._client.patch(
            f"/api/v1/namespaces/{rec.namespace}/pods/{rec.name}/status",
            content=jsonlib.dumps({"metadata": {"uid": rec.uid}, "status": status}),
            headers={"Content-Type": STRATEGIC})
        if resp.is_error and resp.status_code not in (404, 409):
            self.errors.append(f"status of {rec.name}: {resp.status_code} {resp.text}")
