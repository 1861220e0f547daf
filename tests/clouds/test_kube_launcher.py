"""The launcher over a Kubernetes cluster (a replayed API server, a real coordinator and
database): the cluster's nodes are the offers, a job that no node can take becomes a pod that
asks its shape, a pod that no node takes is ended at the pending timeout in the scheduler's
words and the job moves on, and the reconciler cleans up. tests/k8s runs it against a real
kube-apiserver."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))

from kube_replay import TOKEN, FakeApi
from launch_harness import launching

from bourse.clouds.kube_api import KubeApi
from bourse.clouds.kube_config import KubeTarget
from bourse.clouds.kubernetes import KubeProvider
from bourse.server.db.database import sqlite_url

pytestmark = pytest.mark.anyio
NS = "gpu"


def _cluster(api: FakeApi, pending_timeout_s: float = 120.0) -> KubeProvider:
    target = KubeTarget(server="https://127.0.0.1:6443", context="lab", namespace=NS,
                        token=TOKEN)
    return KubeProvider(target, prices={"a100-80gb": 2.0, "*": 1.0}, pending_timeout_s=
                        pending_timeout_s, api=KubeApi(target, transport=httpx.MockTransport(api)))


def _pods(api: FakeApi) -> list[str]:
    return sorted(k.rsplit("/", 1)[1] for k in api.objects if "/pods/" in k)


async def test_a_job_becomes_a_pod_of_its_shape_and_an_unschedulable_one_moves_on(
        tmp_path: Path) -> None:
    api = FakeApi()
    other = json.loads(json.dumps(api.nodes["items"][1]))  # dgx-2's twin in another rack
    other["metadata"]["name"] = "dgx-3"
    other["metadata"]["labels"]["topology.kubernetes.io/zone"] = "rack-b"
    api.nodes["items"].append(other)
    async with launching(tmp_path, sqlite_url(tmp_path / "bourse.db"), cloud=_cluster(api),  # type: ignore[arg-type]
                         provider="kubernetes", regions=()) as run:
        job = await run.exchange.submit(compute={"gpu": "a100-80gb:2"})
        await run.cycle()
        [first] = _pods(api)
        spec = api.pod(NS, first)["spec"]
        assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
        reason = (await run.exchange.job(job["id"]))["pending_reason"]
        assert reason.startswith("launching kubernetes lab (rack-a) a100-80gb.x2 on-demand")
        assert run.user_data[0]["price"] == 4.0  # 2 GPUs at the operator's $2/GPU-hour

        api.pod(NS, first)["status"] = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/9 nodes are available: 2 Insufficient nvidia.com/gpu."}]}
        await run.tick()
        assert _pods(api) == [first]  # within the pending timeout it waits
        run.exchange.clock.advance(121)
        report = await run.tick()
        assert first not in _pods(api)  # deleted, with its Secret
        assert f"/api/v1/namespaces/{NS}/secrets/{first}" not in api.objects
        async with run.exchange.state.db.read() as session:
            from sqlalchemy import select

            from bourse.server.db.schema import Launch, LaunchBlockRow
            ended = await session.scalar(select(Launch).where(Launch.instance_id == first))
            blocks = (await session.scalars(select(LaunchBlockRow))).all()
        assert ended is not None and ended.reason is not None
        assert "pending timeout (2m)" in ended.reason
        assert "0/9 nodes are available: 2 Insufficient nvidia.com/gpu." in ended.reason
        assert any("Insufficient nvidia.com/gpu" in b.reason for b in blocks)
        assert report.launched  # the job moved on: the next offer, in the other rack
        [second] = _pods(api)
        terms = api.pod(NS, second)["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert {"key": "topology.kubernetes.io/zone", "operator": "In",
                "values": ["rack-b"]} in terms[0]["matchExpressions"]


async def test_a_running_pod_is_not_ended_by_the_pending_timeout(tmp_path: Path) -> None:
    api = FakeApi()
    async with launching(tmp_path, sqlite_url(tmp_path / "bourse.db"), cloud=_cluster(api),  # type: ignore[arg-type]
                         provider="kubernetes", regions=()) as run:
        await run.exchange.submit(compute={"gpu": "t4:1"})
        await run.cycle()
        [pod] = _pods(api)
        api.pod(NS, pod)["status"] = {"phase": "Running"}  # its agent installs, enrols
        run.exchange.clock.advance(300)
        await run.tick()
        assert _pods(api) == [pod]  # the boot timeout (15 min), not the pending one, applies
