"""The Kubernetes harness itself: a real kube-apiserver + kube-scheduler (built by
tests/k8s/build-kube.sh) and a fake GPU kubelet that runs pods as local processes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cluster import Cluster, FakeKubelet, KubeBinaries, needs_kube, register_node, wait_until

BINARIES = KubeBinaries.find()

pytestmark = [pytest.mark.slow, needs_kube()]

A100 = "NVIDIA-A100-SXM4-80GB"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(BINARIES) as c:
        yield c


@pytest.fixture(scope="module")
def kubelet(cluster: Cluster) -> Iterator[FakeKubelet]:
    with FakeKubelet(cluster, "gpu-node-1", capacity={"nvidia.com/gpu": 8},
                     labels={"nvidia.com/gpu.product": A100},
                     base_env={"PATH": os.environ["PATH"]}) as k:
        yield k


def _pod(name: str, command: list[str], gpus: int, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "busybox", "command": command,
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}, **container}]},
    }


def _phase(cluster: Cluster, name: str) -> str | None:
    pod = cluster.pod(name)
    return None if pod is None else str(pod.get("status", {}).get("phase"))


def test_control_plane_listens_on_loopback_only(cluster: Cluster) -> None:
    listening = cluster.listening()
    assert {name for name, _, _ in listening} == {"etcd", "kube-apiserver", "kube-scheduler"}
    assert all(ip == "127.0.0.1" for _, ip, _ in listening), listening
    assert cluster.json("GET", "/version")["gitVersion"] == "v1.20.2"
    assert cluster.api("GET", "/api/v1/namespaces/default").status_code == 200
    anonymous = cluster.client()
    anonymous.headers.pop("Authorization")
    with anonymous:
        assert anonymous.get("/api/v1/nodes").status_code == 401


def test_gpu_node_is_registered(cluster: Cluster, kubelet: FakeKubelet) -> None:
    nodes = {n["metadata"]["name"]: n for n in cluster.json("GET", "/api/v1/nodes")["items"]}
    node = nodes["gpu-node-1"]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == A100
    assert not node["spec"].get("taints")  # no not-ready taint: nothing would lift it
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True"


def test_pod_is_scheduled_and_runs_with_secret_env(cluster: Cluster,
                                                   kubelet: FakeKubelet) -> None:
    cluster.create_secret("creds", {"foo": "s3cret-value", "token.txt": "file-token"})
    script = "echo hi; echo $FOO; cat /etc/creds/token.txt; echo; echo $BAR"
    pod = _pod("hello", ["sh", "-c", script], 1,
               env=[{"name": "FOO", "valueFrom": {"secretKeyRef": {"name": "creds",
                                                                   "key": "foo"}}},
                    {"name": "BAR", "value": "bar-$(FOO)"}],
               volumeMounts=[{"name": "creds", "mountPath": "/etc/creds"}])
    pod["spec"]["volumes"] = [{"name": "creds", "secret": {"secretName": "creds"}}]
    cluster.json("POST", "/api/v1/namespaces/default/pods", pod)
    wait_until(lambda: _phase(cluster, "hello") == "Succeeded", 60, what="pod hello Succeeded")
    got = cluster.pod("hello")
    assert got is not None
    assert got["spec"]["nodeName"] == "gpu-node-1"  # bound by the real kube-scheduler
    state = got["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] == 0
    assert kubelet.log("hello").split() == ["hi", "s3cret-value", "file-token",
                                            "bar-s3cret-value"]


def test_pod_exit_code_is_reported(cluster: Cluster, kubelet: FakeKubelet) -> None:
    cluster.json("POST", "/api/v1/namespaces/default/pods",
                 _pod("fails", ["sh", "-c", "exit 3"], 1))
    wait_until(lambda: _phase(cluster, "fails") == "Failed", 60, what="pod fails Failed")
    got = cluster.pod("fails")
    assert got is not None
    assert got["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_missing_secret_keeps_the_pod_pending_until_it_exists(cluster: Cluster,
                                                              kubelet: FakeKubelet) -> None:
    pod = _pod("waits", ["sh", "-c", "echo $TOKEN"], 1, env=[
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "later", "key": "token"}}}])
    cluster.json("POST", "/api/v1/namespaces/default/pods", pod)

    def waiting_reason() -> str | None:
        got = cluster.pod("waits") or {}
        statuses = got.get("status", {}).get("containerStatuses") or [{}]
        reason = statuses[0].get("state", {}).get("waiting", {}).get("reason")
        return None if reason is None else str(reason)

    assert wait_until(waiting_reason, 60, what="waiting") == "CreateContainerConfigError"
    assert _phase(cluster, "waits") == "Pending"
    cluster.create_secret("later", {"token": "now-here"})
    wait_until(lambda: _phase(cluster, "waits") == "Succeeded", 60, what="pod waits Succeeded")
    assert kubelet.log("waits").split() == ["now-here"]


def test_restart_policy_on_failure_restarts(cluster: Cluster, kubelet: FakeKubelet) -> None:
    pod = _pod("flaky", ["sh", "-c", "test -f marker || { touch marker; exit 1; }; echo ok"], 1)
    pod["spec"]["restartPolicy"] = "OnFailure"
    cluster.json("POST", "/api/v1/namespaces/default/pods", pod)
    wait_until(lambda: _phase(cluster, "flaky") == "Succeeded", 60, what="pod flaky Succeeded")
    got = cluster.pod("flaky")
    assert got is not None
    assert got["status"]["containerStatuses"][0]["restartCount"] == 1
    assert kubelet.log("flaky").split() == ["ok"]


def test_too_many_gpus_stay_pending(cluster: Cluster, kubelet: FakeKubelet) -> None:
    cluster.json("POST", "/api/v1/namespaces/default/pods", _pod("greedy", ["true"], 16))

    def unschedulable() -> dict[str, Any] | None:
        pod = cluster.pod("greedy")
        conds = {c["type"]: c for c in (pod or {}).get("status", {}).get("conditions", [])}
        cond = conds.get("PodScheduled")
        return cond if cond and cond["status"] == "False" else None

    cond = wait_until(unschedulable, 60, what="PodScheduled=False")
    assert cond["reason"] == "Unschedulable"
    assert "nvidia.com/gpu" in cond["message"]
    pod = cluster.pod("greedy")
    assert pod is not None
    assert pod["status"]["phase"] == "Pending"
    assert not pod["spec"].get("nodeName")
    cluster.json("DELETE", "/api/v1/namespaces/default/pods/greedy")  # unbound: gone at once
    assert cluster.pod("greedy") is None


def test_deleting_a_running_pod_kills_its_process(cluster: Cluster,
                                                  kubelet: FakeKubelet) -> None:
    cluster.json("POST", "/api/v1/namespaces/default/pods", _pod("sleeper", ["sleep", "300"], 2))
    wait_until(lambda: _phase(cluster, "sleeper") == "Running", 60, what="pod sleeper Running")
    rec = kubelet.find("sleeper")
    assert rec is not None
    assert rec.proc is not None
    pid = rec.proc.pid
    assert pid in kubelet.processes()
    t0 = time.monotonic()
    cluster.json("DELETE", "/api/v1/namespaces/default/pods/sleeper")  # grace 30 s
    wait_until(lambda: cluster.pod("sleeper") is None, 60, what="pod sleeper gone")
    assert time.monotonic() - t0 < 15  # SIGTERM ended it; no 30 s wait
    assert pid not in kubelet.processes()
    assert rec.proc.returncode == -15


def test_pods_of_a_node_without_kubelet_are_bound_but_never_run(cluster: Cluster) -> None:
    register_node(cluster, "idle-node", {"nvidia.com/gpu": 4}, labels={"pool": "idle"},
                  taints=[{"key": "pool", "value": "idle", "effect": "NoSchedule"}])
    pod = _pod("parked", ["true"], 4)
    pod["spec"]["nodeSelector"] = {"pool": "idle"}
    pod["spec"]["tolerations"] = [{"key": "pool", "operator": "Equal", "value": "idle",
                                   "effect": "NoSchedule"}]
    cluster.json("POST", "/api/v1/namespaces/default/pods", pod)
    wait_until(lambda: (cluster.pod("parked") or {}).get("spec", {}).get("nodeName"), 60,
               what="pod parked bound")
    assert _phase(cluster, "parked") == "Pending"
    # no kubelet finishes a graceful deletion: it stays Terminating until forced
    cluster.json("DELETE", "/api/v1/namespaces/default/pods/parked")
    pod_now = cluster.pod("parked")
    assert pod_now is not None
    assert pod_now["metadata"].get("deletionTimestamp")
    cluster.json("DELETE", "/api/v1/namespaces/default/pods/parked",
                 {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    assert cluster.pod("parked") is None
    cluster.json("DELETE", "/api/v1/nodes/idle-node")
