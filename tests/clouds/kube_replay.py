"""A replayed Kubernetes API server for the provider's tests (httpx's MockTransport): nodes,
pods and Secrets in namespaces and access reviews, answered in the API's documented shapes
(core/v1 objects; failures as ``Status`` objects,
https://kubernetes.io/docs/reference/using-api/api-concepts/#response-status-kind)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

NODES = json.loads((Path(__file__).parent / "kube" / "nodes.json").read_text())
TOKEN = "sa-token-abc123"


def status(code: int, reason: str, message: str) -> httpx.Response:
    return httpx.Response(code, json={"kind": "Status", "apiVersion": "v1", "metadata": {},
                                      "status": "Failure", "message": message,
                                      "reason": reason, "code": code})


class FakeApi:
    """Just enough of an API server: nodes, pods and secrets in namespaces, access reviews."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.denied: set[tuple[str, str]] = set()
        self.fail_create: httpx.Response | None = None
        self.calls: list[str] = []
        self.nodes: dict[str, Any] = json.loads(json.dumps(NODES))  # a copy a test may change

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        path, method = request.url.path, request.method
        self.calls.append(f"{method} {path}")
        fixed = {"/version": {"gitVersion": "v1.20.2"}, "/api/v1/nodes": self.nodes}
        if path in fixed:
            return httpx.Response(200, json=fixed[path])
        if path.endswith("/selfsubjectaccessreviews"):
            attrs = json.loads(request.content)["spec"]["resourceAttributes"]
            allowed = (attrs["verb"], attrs["resource"]) not in self.denied
            return httpx.Response(201, json={"status": {"allowed": allowed}})
        handler = {"POST": self._create, "GET": self._get, "DELETE": self._delete}[method]
        return handler(request, path)

    def _create(self, request: httpx.Request, path: str) -> httpx.Response:
        if self.fail_create is not None and path.endswith("/pods"):
            return self.fail_create
        body = json.loads(request.content)
        key = f"{path}/{body['metadata']['name']}"
        if key in self.objects:
            return status(409, "AlreadyExists", f"{body['kind'].lower()}s "
                          f"\"{body['metadata']['name']}\" already exists")
        body["status"] = {"phase": "Pending"} if body["kind"] == "Pod" else {}
        self.objects[key] = body
        return httpx.Response(201, json=body)

    def _get(self, request: httpx.Request, path: str) -> httpx.Response:
        if path in self.objects:
            return httpx.Response(200, json=self.objects[path])
        if not path.endswith("/pods"):
            return status(404, "NotFound", f"{path} not found")
        key, _, value = request.url.params.get("labelSelector", "").partition("=")
        items = [o for k, o in self.objects.items() if k.startswith(path + "/")
                 and o["metadata"]["labels"].get(key) == value]
        return httpx.Response(200, json={"kind": "PodList", "items": items})

    def _delete(self, request: httpx.Request, path: str) -> httpx.Response:
        if self.objects.pop(path, None) is None:
            return status(404, "NotFound", "not found")
        return httpx.Response(200, json={"kind": "Status", "status": "Success"})

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.objects[f"/api/v1/namespaces/{namespace}/pods/{name}"]
