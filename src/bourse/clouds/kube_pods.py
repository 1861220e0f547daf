"""A launch on Kubernetes as API objects, and pods read back (pure).

A launch is a Secret holding the boot script (the user data, with its one-time enrolment
token: a Secret, so the token is in no pod spec, no ``kubectl describe`` and no process list)
and a pod that runs it in the foreground (``BOURSE_BOOT_FOREGROUND=1``: the agent is the
container's main process, so the pod lives as long as the node). Both are named after the
launch (``bourse-<launch id>``): creating them again answers 409, and the provider then reads
back what the first try made, so a retried launch never makes two pods. Their labels carry the
exchange's tags (``bourse.dev/exchange``...), which is how the reconciler lists them.

The pod asks exactly the offer's shape: ``nvidia.com/gpu`` as a limit (the device plugin's
rule), CPUs and memory as requests and limits, a memory-backed ``/dev/shm`` (a container's
default is 64 MiB, too small for PyTorch's data loaders) of half the memory, node affinity to
the group's GPU labels and zone, and tolerations for the group's taints.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bourse.clouds.base import (
    TAG_EXCHANGE,
    TAG_GANG,
    TAG_JOB,
    TAG_LAUNCH,
    TAG_NODE,
    TAG_PROJECT,
    CloudState,
    Instance,
    LaunchSpec,
)
from bourse.clouds.kube_nodes import GPU_RESOURCE, ZONE, Shape

LABELS = {TAG_EXCHANGE: "bourse.dev/exchange", TAG_LAUNCH: "bourse.dev/launch",
          TAG_NODE: "bourse.dev/node", TAG_JOB: "bourse.dev/job",
          TAG_PROJECT: "bourse.dev/project", TAG_GANG: "bourse.dev/gang"}
TAGS = {label: tag for tag, label in LABELS.items()}
BOOT_DIR = "/etc/bourse-boot"
BOOT_KEY = "boot.sh"
DEFAULT_IMAGE = "python:3.12-slim"
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
PHASES = {"Pending": CloudState.PENDING, "Running": CloudState.RUNNING,
          "Succeeded": CloudState.TERMINATED, "Failed": CloudState.TERMINATED,
          "Unknown": CloudState.RUNNING}  # Unknown: its node is unreachable, still billed


def name_of(launch_id: str) -> str:
    """The pod's and the Secret's name: a DNS-1123 label."""
    text = re.sub(r"[^a-z0-9-]+", "-", launch_id.lower()).strip("-")
    return f"bourse-{text}"[:63].rstrip("-")


def labels_of(spec: LaunchSpec) -> dict[str, str]:
    """The exchange's tags as labels (a value Kubernetes refuses is left out)."""
    return {LABELS[tag]: value for tag, value in spec.tags().items()
            if len(value) <= 63 and _LABEL_VALUE.match(value)}


def secret(spec: LaunchSpec, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name_of(spec.launch_id), "namespace": namespace,
                         "labels": labels_of(spec)},
            "data": {BOOT_KEY: base64.b64encode(spec.user_data.encode()).decode()}}


def pod(spec: LaunchSpec, shape: Shape, namespace: str, *, image: str | None = None,
        service_account: str | None = None) -> dict[str, Any]:
    """The pod of one launch."""
    name = name_of(spec.launch_id)
    memory = f"{max(1, int(shape.memory_gib * 1024))}Mi"
    shm = f"{max(1, int(shape.memory_gib * 512))}Mi"
    resources = {"requests": {"cpu": f"{shape.cpus:g}", "memory": memory},
                 "limits": {GPU_RESOURCE: str(shape.gpus), "cpu": f"{shape.cpus:g}",
                            "memory": memory}}
    container = {
        "name": "agent", "image": spec.image or image or DEFAULT_IMAGE,
        "command": ["/bin/sh", f"{BOOT_DIR}/{BOOT_KEY}"],
        "env": [{"name": "BOURSE_BOOT_FOREGROUND", "value": "1"},
                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
                {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": resources,
        "volumeMounts": [{"name": "boot", "mountPath": BOOT_DIR, "readOnly": True},
                         {"name": "shm", "mountPath": "/dev/shm"}]}
    body: dict[str, Any] = {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
        "automountServiceAccountToken": False, "enableServiceLinks": False,
        "containers": [container],
        "volumes": [{"name": "boot", "secret": {"secretName": name, "defaultMode": 0o400}},
                    {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": _terms(shape)}}}}
    if shape.tolerations:
        body["tolerations"] = [{"key": t["key"], "operator": "Equal" if t.get("value")
                                else "Exists", **({"value": t["value"]} if t.get("value")
                                                  else {}), "effect": t["effect"]}
                               for t in shape.tolerations if t.get("key")]
    if service_account:
        body["serviceAccountName"] = service_account
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels_of(spec),
                         "annotations": {"bourse.dev/instance-type": spec.instance_type}},
            "spec": body}


def _terms(shape: Shape) -> list[dict[str, Any]]:
    zone = [{"key": ZONE, "operator": "In", "values": [shape.zone]}] if shape.zone else []
    return [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)},
                                  *zone]} for key, values in shape.selectors]


def instance_of(obj: Mapping[str, Any], region: str) -> Instance:
    """A pod as the seam's instance (its tags read from its labels)."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    labels = meta.get("labels") or {}
    state = PHASES.get(str(status.get("phase")), CloudState.PENDING)
    if meta.get("deletionTimestamp"):
        state = CloudState.SHUTTING_DOWN
    started = _time(meta.get("creationTimestamp"))
    tags = {TAGS[k]: str(v) for k, v in labels.items() if k in TAGS}
    return Instance(id=str(meta.get("name", "")), region=region,
                    instance_type=str((meta.get("annotations") or {}).get(
                        "bourse.dev/instance-type", "")),
                    state=state.value, launched_at=started, tags=tags)


def pending_reason(obj: Mapping[str, Any]) -> str | None:
    """Why a pod is not running yet, in the scheduler's or the kubelet's words (or where it
    waits, when they say nothing); None once it runs or ended."""
    status = obj.get("status") or {}
    if status.get("phase") not in (None, "Pending"):
        return None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('reason', 'Unschedulable')}: {cond.get('message', '')}".strip()
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return f"{waiting['reason']}: {waiting.get('message', '')}".strip(": ")
    node = (obj.get("spec") or {}).get("nodeName")
    return (f"Pending on node {node}: its kubelet has not started it" if node
            else "Pending: not scheduled yet")


def _time(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
