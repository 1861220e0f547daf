"""A Kubernetes cluster behind the provider seam: its GPU nodes are offers, a launch is a pod
that runs the agent for the job.

The offers come from the cluster itself (``GET /api/v1/nodes``, ``kube_nodes``), listed again
on every reconcile pass, not from a shipped catalogue; their prices are the operator's
(``--kube-gpu-price``). A launch makes the boot Secret and the pod (``kube_pods``) in the
namespace and returns the pod as a pending instance; the agent in it dials out and enrols like
any launched machine. A pod the scheduler cannot place (no node has the GPUs free, the
autoscaler does not scale) stays Pending: past ``pending_timeout_s`` the launcher's boot
timeout for this provider ends it, blocks the offer for a while, and asks :meth:`explain`
for the scheduler's own words, which the job's timeline shows; the job then moves on to the
next offer. Terminating deletes the pod and its Secret.

The coordinator's credentials need, in the namespace: create/get/list/delete pods and
secrets; cluster-wide: list nodes (docs/clouds.md has the Role).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from bourse.clouds.base import (
    TAG_EXCHANGE,
    CloudCheck,
    CloudError,
    CloudState,
    Instance,
    LaunchSpec,
)
from bourse.clouds.kube_api import KubeApi
from bourse.clouds.kube_config import KubeTarget
from bourse.clouds.kube_nodes import PROVIDER, Listing, Shape, listing
from bourse.clouds.kube_pods import LABELS, instance_of, name_of, pending_reason, pod, secret
from bourse.core.launch import Failure
from bourse.core.offer import Offer

PENDING_TIMEOUT_S = 600.0
GRACE_S = 30  # a running pod's grace before it is killed
VERBS = (("create", "pods"), ("delete", "pods"), ("list", "pods"), ("create", "secrets"),
         ("delete", "secrets"))


class KubeProvider:
    """One cluster (``target``: from ``kube_config.load``). ``prices``: $/GPU-hour by GPU model
    id, ``*`` for any other; ``image``: the pods' image."""

    name = PROVIDER

    def __init__(self, target: KubeTarget, *, prices: Mapping[str, float],
                 image: str | None = None, api: KubeApi | None = None,
                 pending_timeout_s: float = PENDING_TIMEOUT_S) -> None:
        self.target, self.prices, self.image = target, dict(prices), image
        self.namespace, self.cluster = target.namespace, target.cluster
        self.pending_timeout_s = pending_timeout_s  # a pod Pending this long is ended
        self._api = api or KubeApi(target)
        self._listing = Listing()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"KubeProvider({self._api!r}, namespace={self.namespace!r})"

    # the seam

    def check(self) -> CloudCheck:
        """Whether the cluster answers, the credentials may list nodes and make pods and
        Secrets in the namespace; the notes say which nodes are not offered and why."""
        try:
            version = self._api.get("/version") or {}
            missing = [f"{verb} {kind}" for verb, kind in VERBS if not self._may(verb, kind)]
            found = self._list()
        except CloudError as exc:
            return CloudCheck(self.name, False, f"{exc.code}: {exc.message}")
        if missing:
            return CloudCheck(self.name, False, f"the credentials of context "
                              f"{self.target.context!r} may not {', '.join(missing)} in "
                              f"namespace {self.namespace!r} (docs/clouds.md has the Role)")
        notes = "; ".join(found.notes[:5]) or None
        return CloudCheck(self.name, True, notes, (self.cluster,),
                          f"context {self.target.context} ({version.get('gitVersion', '?')}),"
                          f" namespace {self.namespace}, {len(found.offers)} offers")

    def offers(self) -> list[Offer]:
        """The cluster's offers now (nodes listed again)."""
        return list(self._list().offers)

    def notes(self) -> list[str]:
        return list(self._listing.notes)

    def launch(self, spec: LaunchSpec) -> Instance:
        where = f"{self.cluster}/{spec.instance_type}"
        if spec.spot:
            raise CloudError(Failure.UNSUPPORTED, "SpotUnsupported", "a cluster's pods are "
                             "not sold as spot", where=where)
        shape = self._shape(spec, where)
        base = f"/api/v1/namespaces/{self.namespace}"
        self._create(f"{base}/secrets", secret(spec, self.namespace), where)
        try:
            made = self._create(f"{base}/pods", pod(spec, shape, self.namespace,
                                                    image=self.image), where)
        except CloudError:
            self._api.delete(f"{base}/secrets/{name_of(spec.launch_id)}")
            raise
        return instance_of(made, self.cluster)

    def tagged(self, exchange_id: str, regions: Sequence[str]) -> list[Instance]:
        if regions and self.cluster not in regions:
            return []
        out = []
        for obj in self._pods(exchange_id):
            found = instance_of(obj, self.cluster)
            if found.tags.get(TAG_EXCHANGE) != exchange_id:
                continue
            if found.state == CloudState.TERMINATED.value:
                self._delete(found.id, obj)  # a finished pod is not kept
            elif found.alive:
                out.append(found)
        return out

    def terminate(self, region: str, instance_ids: Sequence[str]) -> None:
        base = f"/api/v1/namespaces/{self.namespace}"
        for name in dict.fromkeys(instance_ids):
            self._delete(name, self._api.get_or_none(f"{base}/pods/{name}"))

    def _delete(self, name: str, pod_obj: Mapping[str, Any] | None) -> None:
        """Delete the pod (as last read) and its Secret: a running pod with 30 s of grace (its
        agent stops its jobs), one that never started at once (on a node whose kubelet is gone
        it would stay Terminating for ever)."""
        base = f"/api/v1/namespaces/{self.namespace}"
        if pod_obj is not None:
            started = (pod_obj.get("status") or {}).get("phase") not in (None, "Pending")
            self._api.delete(f"{base}/pods/{name}",
                             {"gracePeriodSeconds": GRACE_S if started else 0})
        self._api.delete(f"{base}/secrets/{name}")

    def explain(self, region: str, instance_id: str) -> str | None:
        """Why the pod is not running yet (the scheduler's message), if it says."""
        try:
            found = self._api.get(f"/api/v1/namespaces/{self.namespace}/pods/{instance_id}")
        except CloudError:
            return None
        return pending_reason(found) if isinstance(found, Mapping) else None

    # helpers

    def _list(self) -> Listing:
        data = self._api.get("/api/v1/nodes")
        items = data.get("items", []) if isinstance(data, Mapping) else []
        found = listing([i for i in items if isinstance(i, Mapping)], cluster=self.cluster,
                        prices=self.prices)
        with self._lock:
            self._listing = found
        return found

    def _shape(self, spec: LaunchSpec, where: str) -> Shape:
        key = (spec.instance_type, spec.zone)
        shape = self._listing.shapes.get(key) or self._list().shapes.get(key)
        if shape is None:
            raise CloudError(Failure.CAPACITY, "NoSuchNodes", f"no Ready node of the cluster "
                             f"has {spec.instance_type} now", where=where)
        return shape

    def _create(self, path: str, body: Mapping[str, Any], where: str) -> Any:
        try:
            return self._api.post(path, body)
        except CloudError as exc:
            if exc.code != "AlreadyExists":
                exc.where = exc.where or where
                raise
        name = body["metadata"]["name"]
        return self._api.get(f"{path}/{name}")  # the first try's: a retry makes nothing new

    def _pods(self, exchange_id: str) -> list[Mapping[str, Any]]:
        data = self._api.get(f"/api/v1/namespaces/{self.namespace}/pods",
                             {"labelSelector": f"{LABELS[TAG_EXCHANGE]}={exchange_id}"})
        items = data.get("items", []) if isinstance(data, Mapping) else []
        return [p for p in items if isinstance(p, Mapping)]

    def _may(self, verb: str, resource: str) -> bool:
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"namespace": self.namespace, "verb": verb,
                                                  "resource": resource}}}
        answer = self._api.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                review)
        return bool((answer or {}).get("status", {}).get("allowed"))


class Unreachable:
    """A cluster whose kubeconfig cannot be used: disabled, saying why (``bourse clouds``),
    like a cloud without credentials; it launches nothing and lists nothing."""

    name = PROVIDER

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def check(self) -> CloudCheck:
        return CloudCheck(self.name, False, self.reason)

    def launch(self, spec: LaunchSpec) -> Instance:
        raise CloudError(Failure.AUTH, "NotConfigured", self.reason)

    def tagged(self, exchange_id: str, regions: Sequence[str]) -> list[Instance]:
        return []

    def terminate(self, region: str, instance_ids: Sequence[str]) -> None:
        raise CloudError(Failure.AUTH, "NotConfigured", self.reason)
