"""A cluster's nodes as offers, and a launch as a Secret and a pod (pure: kube_nodes, kube_pods)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from bourse.clouds.base import LaunchSpec
from bourse.clouds.kube_nodes import gpu_of, listing, model_of, quantity, shape_counts
from bourse.clouds.kube_pods import instance_of, name_of, pending_reason, pod, secret

NODES = json.loads((Path(__file__).parent / "kube" / "nodes.json").read_text())["items"]
PRICES = {"a100-80gb": 2.0, "t4": 0.35, "*": 1.0}


@pytest.mark.parametrize(("value", "memory", "model"), [
    ("A100-SXM4-40GB", 40536, "a100-40gb"),  # GFD before 0.5: no vendor word
    ("NVIDIA-A100-SXM4-80GB", 81920, "a100-80gb"),
    ("NVIDIA-H100-80GB-HBM3", 81559, "h100-80gb"),
    ("NVIDIA-H100-80GB-HBM3-SHARED", 81559, "h100-80gb"),  # time-sliced GPUs
    ("Tesla-T4", 15360, "t4"),
    ("Tesla-V100-SXM2-16GB", 16160, "v100-16gb"),
    ("NVIDIA-GeForce-RTX-3090", 24576, "rtx-3090"),
    ("NVIDIA-A10G", 23028, "a10g"),
    ("nvidia-tesla-t4", None, "t4"),  # GKE's spellings
    ("nvidia-tesla-a100", None, "a100-40gb"),
    ("nvidia-a100-80gb", None, "a100-80gb"),
    ("nvidia-h100-80gb", None, "h100-80gb"),
    ("nvidia-l4", None, "l4"),
    ("nvidia-tesla-v100", None, "v100-16gb"),  # EKS's
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", 4864, None),
    ("Acme-Tensor-9000", None, None),
])
def test_vendors_spellings_of_one_gpu_are_one_model(value: str, memory: int | None,
                                                     model: str | None) -> None:
    assert model_of(value, memory) == model


def test_quantities_are_read_as_kubernetes_writes_them() -> None:
    assert quantity("255500m") == 255.5
    assert quantity("2113357384Ki") == 2113357384 * 1024
    assert quantity("1Ti") == 2.0**40
    assert quantity("8") == 8
    assert quantity("12Zi") is None and quantity("lots") is None


def test_an_unknown_label_is_kept_and_a_known_one_wins() -> None:
    both = gpu_of({"nvidia.com/gpu.product": "Acme-9000", "cloud.google.com/gke-accelerator":
                   "nvidia-l4"})
    assert both is not None and (both.key, both.model) == ("cloud.google.com/gke-accelerator",
                                                          "l4")
    unknown = gpu_of({"nvidia.com/gpu.product": "Acme-9000"})
    assert unknown is not None and unknown.model is None and unknown.value == "Acme-9000"
    assert gpu_of({"kubernetes.io/hostname": "x"}) is None
    by_type = gpu_of({"node.kubernetes.io/instance-type": "p4d.24xlarge"})
    assert by_type is not None and by_type.model == "a100-40gb"


def test_shapes_are_powers_of_two_and_the_largest() -> None:
    assert shape_counts(1) == [1]
    assert shape_counts(8) == [1, 2, 4, 8]
    assert shape_counts(6) == [1, 2, 4, 6]


def test_nodes_become_offers_of_the_operators_price_and_say_what_was_left_out() -> None:
    found = listing(NODES, cluster="lab", prices=PRICES)
    by_id = {o.id: o for o in found.offers}
    a100 = by_id["kubernetes/lab/rack-a/a100-80gb.x4"]
    # dgx-1 (8 GPUs, 255.5 CPUs) and dgx-2 (4 GPUs, 128 CPUs) both have 4: the smaller share
    assert (a100.gpu, a100.gpu_count, a100.price, a100.available) == ("a100-80gb", 4, 8.0, 2)
    assert a100.cpus == 127.7 and a100.memory_gib == 1007.0 and a100.gpu_memory_mib == 81920
    assert by_id["kubernetes/lab/rack-a/a100-80gb.x8"].available == 1  # dgx-1 only
    assert by_id["kubernetes/lab/us-central1-a/t4.x1"].price == 0.35
    assert by_id["kubernetes/lab/us-east-1b/v100-16gb.x2"].price == 2.0  # the * price
    assert by_id["kubernetes/lab/us-east-1a/a10g.x1"].gpu == "a10g"  # by its instance type
    assert all(o.provider == "kubernetes" and o.region == "lab" and not o.spot_price
               for o in found.offers)
    notes = "\n".join(found.notes)
    for name, why in (("unlabelled", "no GPU label"), ("mig-node", "MIG slice"),
                      ("cordoned", "cordoned"), ("not-ready", "not Ready")):
        assert f"node {name}: " in notes and why in notes, notes
    assert "cpu-only" not in notes  # a node without GPUs is no news


def test_a_model_without_a_price_is_not_offered_and_the_note_says_how_to_price_it() -> None:
    found = listing(NODES, cluster="lab", prices={"t4": 0.0})
    assert [o.instance_type for o in found.offers] == ["t4.x1"]
    assert found.offers[0].price == 0.0  # free, when the operator says so
    assert any(n.startswith("a100-80gb (2 node(s): dgx-1, dgx-2) has no price") and
               "--kube-gpu-price a100-80gb=USD" in n for n in found.notes), found.notes


def _spec(**overrides: Any) -> LaunchSpec:
    values: dict[str, Any] = dict(
        launch_id="L_Abc123", exchange_id="ex1", node_id="n1", project_id="p1", region="lab",
        instance_type="a100-80gb.x2", user_data="#!/bin/sh\necho bse_e_secret\n",
        client_token="t", zone="rack-a", job_id="j1")
    values.update(overrides)
    return LaunchSpec(**values)


def test_the_pod_asks_the_shape_on_the_groups_nodes_and_the_token_is_only_in_the_secret() -> None:
    found = listing(NODES, cluster="lab", prices=PRICES)
    shape = found.shapes[("a100-80gb.x2", "rack-a")]
    body = pod(_spec(), shape, "gpu-jobs", image="registry.local/bourse-agent:1")
    assert body["metadata"]["name"] == name_of("L_Abc123") == "bourse-l-abc123"
    assert body["metadata"]["labels"]["bourse.dev/exchange"] == "ex1"
    container = body["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["resources"]["requests"] == {"cpu": "63.8", "memory": f"{503 * 1024}Mi"}
    assert container["image"] == "registry.local/bourse-agent:1"
    terms = body["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["rack-a"]}]}]
    assert body["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal",
                                            "value": "present", "effect": "NoSchedule"}]
    assert body["spec"]["restartPolicy"] == "Never"
    assert "bse_e_secret" not in json.dumps(body)
    held = secret(_spec(), "gpu-jobs")
    assert base64.b64decode(held["data"]["boot.sh"]).decode() == _spec().user_data
    assert held["metadata"]["name"] == body["metadata"]["name"]


def test_a_pod_read_back_is_an_instance_and_says_why_it_waits() -> None:
    obj = {"metadata": {"name": "bourse-l1", "creationTimestamp": "2026-12-01T10:00:00Z",
                        "labels": {"bourse.dev/exchange": "ex1", "bourse.dev/launch": "L1"},
                        "annotations": {"bourse.dev/instance-type": "t4.x1"}},
           "status": {"phase": "Pending", "conditions": [
               {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]}}
    inst = instance_of(obj, "lab")
    assert (inst.id, inst.state, inst.launch_id, inst.instance_type) == (
        "bourse-l1", "pending", "L1", "t4.x1")
    assert pending_reason(obj) == ("Unschedulable: 0/3 nodes are available: 3 Insufficient "
                                   "nvidia.com/gpu.")
    pulling = {"status": {"phase": "Pending", "containerStatuses": [{"state": {"waiting": {
        "reason": "ImagePullBackOff", "message": "Back-off pulling image \"nope\""}}}]}}
    assert pending_reason(pulling) == 'ImagePullBackOff: Back-off pulling image "nope"'
    assert pending_reason({"status": {"phase": "Running"}}) is None
    bound = {"spec": {"nodeName": "gpu-b"}, "status": {"phase": "Pending"}}
    assert pending_reason(bound) == "Pending on node gpu-b: its kubelet has not started it"
    assert pending_reason({"status": {"phase": "Pending"}}) == "Pending: not scheduled yet"
    done = instance_of({"metadata": {"name": "x"}, "status": {"phase": "Succeeded"}}, "lab")
    assert not done.alive
    going = instance_of({"metadata": {"name": "x", "deletionTimestamp": "2026-12-01T10:00:00Z"},
                         "status": {"phase": "Running"}}, "lab")
    assert going.state == "shutting-down" and not going.alive
