"""A GPU job on an exchange with no GPU node and a Kubernetes cluster enabled, with real
processes: a coordinator (`bourse server --cloud kubernetes`) talks to a real kube-apiserver
and kube-scheduler (``cluster.py``). The cluster has a node whose kubelet never starts
anything: the job's first pod is bound there, stays Pending past the pending timeout, is
deleted in the cluster's words, and the job moves on to a node that joined meanwhile, whose
(fake) kubelet runs the pod: the boot script from the pod's Secret starts the agent in the
foreground, with an nvidia-smi replaying a real L40S capture; it enrols, is verified, runs the
job; once idle the pod and its Secret are deleted. Nothing of the exchange is left in the
cluster, and the enrolment token is in no pod spec."""

from __future__ import annotations

import getpass
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "dataplane"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clouds"))

from boot import fake_gpus
from cluster import Cluster, FakeKubelet, KubeBinaries, needs_kube, register_node, wait_until
from dataplane_harness import stop
from harness import Cluster as Machines
from harness import Exchange
from job_lines import printed

from bourse.protocol.common import JobSpec

pytestmark = [pytest.mark.slow, needs_kube()]
BINARIES = KubeBinaries.find()
CAPTURE = "txt-l40s-drv595.txt"
L40S = {"nvidia.com/gpu.product": "NVIDIA-L40S", "nvidia.com/gpu.memory": "46068"}
GPU = {"nvidia.com/gpu": 1, "cpu": "8", "memory": "32Gi"}
LABEL = "bourse.dev/exchange"


def _ours(cluster: Cluster, kind: str, namespace: str = "jobs") -> list[dict[str, Any]]:
    found = cluster.json("GET", f"/api/v1/namespaces/{namespace}/{kind}")
    return [o for o in found["items"] if LABEL in (o["metadata"].get("labels") or {})]


def _boot_env(root: Path) -> dict[str, str]:
    """What a node's image would give the pod: bourse installed (this test's virtualenv), an
    nvidia-smi replaying an L40S, a root of its own for the boot script's files."""
    bin_dir = root / "usr" / "local" / "bin"
    fake_gpus(bin_dir, CAPTURE)
    (root / "root").mkdir(parents=True, exist_ok=True)
    return {"PATH": f"{bin_dir}:{Path(sys.prefix) / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(root / "root"), "LANG": "C.UTF-8", "BOURSE_BOOT_ROOT": str(root),
            "BOURSE_BOOT_USER": getpass.getuser(), "BOURSE_BOOT_VENV": sys.prefix}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """One control plane for the module (it costs seconds of CPU to start); each test has a
    namespace of its own."""
    with Cluster(BINARIES) as running:
        yield running


def _exchange(root: Path, cluster: Cluster, namespace: str, *more: str,
              env: dict[str, str] | None = None) -> Exchange:
    cluster.create_namespace(namespace)
    args = ["--cloud", "kubernetes", "--kubeconfig", str(cluster.kubeconfig),
            "--kube-namespace", namespace, "--kube-gpu-price", "l40s=0.9",
            "--idle-timeout", "5s", "--boot-timeout", "3m", *more]
    return Exchange(Machines(root), 1.0, loss_window=10.0, args=args, env=env)


def _checked(exchange: Exchange) -> None:
    [cloud] = exchange.wait_for(lambda: [c for c in exchange.client.clouds().clouds
                                         if c.name == "kubernetes" and c.regions], 60,
                                "the cluster's check")
    assert cloud.enabled, cloud.reason


def test_a_gpu_job_moves_past_a_pod_no_node_starts_and_runs_in_a_pod(
        tmp_path: Path, cluster: Cluster) -> None:
    register_node(cluster, "gpu-b", GPU, labels={**L40S, "topology.kubernetes.io/zone":
                                                  "z2"})  # nothing runs its pods
    exchange = _exchange(tmp_path / "exchange", cluster, "jobs", "--kube-pending-timeout", "8s")
    exchange.start()
    kubelet: FakeKubelet | None = None
    try:
        _checked(exchange)
        job = exchange.client.submit(JobSpec(
            command=[sys.executable, "-c", "print('RESULT in a pod')"],
            compute={"gpu": "l40s:1"}))
        [first] = exchange.wait_for(lambda: [p for p in _ours(cluster, "pods")
                                             if p["spec"].get("nodeName")], 60,
                                    "the first pod, bound by the scheduler")
        assert first["spec"]["nodeName"] == "gpu-b"
        limits = first["spec"]["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "1"
        assert "bse_e_" not in json.dumps(first)  # the token is in the Secret only
        kubelet = FakeKubelet(cluster, "gpu-a", GPU, labels={
            **L40S, "topology.kubernetes.io/zone": "z1"},
            base_env=_boot_env(tmp_path / "gpu-a"))

        done = exchange.wait_ended(job.id, timeout=180)
        assert done.state == "SUCCEEDED", done.reason
        assert printed(exchange.client, job.id, done.attempt) == [
            "RESULT in a pod"]
        ran = list(kubelet.pods.values())
        assert len(ran) == 1  # the pod's output is the agent's
        assert "in the foreground" in kubelet.log(ran[0].name, "jobs")
        launches = {launch.instance_id: launch for launch in exchange.client.launches()}
        stuck = launches[first["metadata"]["name"]]
        assert stuck.reason is not None and "pending timeout (8s)" in stuck.reason, stuck
        assert "gpu-b" in stuck.reason and stuck.enrolled_at is None
        served = launches[ran[0].name]
        assert served.enrolled_at is not None and served.zone == "z1"

        wait_until(lambda: not _ours(cluster, "pods") and not _ours(cluster, "secrets"),
                   60)  # idle: the pod and its Secret deleted, the stuck one too
        wait_until(lambda: not kubelet.processes(), 30)
        log = exchange.coordinator.proc.log.read_bytes()
        assert cluster.token.encode() not in log
    finally:
        if kubelet is not None:
            kubelet.stop()
        stop(exchange)
        cluster.json("DELETE", "/api/v1/nodes/gpu-b")


def test_a_coordinator_killed_after_making_the_pod_adopts_it_and_leaves_nothing(
        tmp_path: Path, cluster: Cluster) -> None:
    """The crash falls between the API's answer and the commit: the restarted coordinator's
    reconciler finds the pod by its labels and adopts it (a retry would have answered 409);
    the job cancelled, the pod and its Secret are deleted."""
    register_node(cluster, "gpu-c", GPU, labels=L40S)  # pods stay Pending: nothing runs them
    exchange = _exchange(tmp_path / "exchange", cluster, "crash",
                         env={"BOURSE_TEST_CRASH_AT": "after-call"})
    exchange.start()
    try:
        job = exchange.client.submit(JobSpec(command=["true"], compute={"gpu": "l40s:1"}))
        proc = exchange.coordinator.proc
        exchange.wait_for(lambda: not proc.alive, 60, "the coordinator to die after the call")
        [made] = _ours(cluster, "pods", "crash")
        proc.env.pop("BOURSE_TEST_CRASH_AT")
        exchange.coordinator.start()
        [live] = exchange.wait_for(lambda: [x for x in exchange.client.launches(live=True)
                                            if x.instance_id], 60, "the pod adopted")
        assert live.instance_id == made["metadata"]["name"] and live.job_id == job.id
        time.sleep(2)  # a reconciler pass and a launcher tick more change nothing
        assert [p["metadata"]["name"] for p in _ours(cluster, "pods", "crash")] == [
            live.instance_id]
        exchange.client.cancel(job.id)
        wait_until(lambda: not _ours(cluster, "pods", "crash")
                   and not _ours(cluster, "secrets", "crash"), 60, what="nothing left")
    finally:
        stop(exchange)
        cluster.json("DELETE", "/api/v1/nodes/gpu-c")
