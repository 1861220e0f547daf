"""A replayed Lambda Cloud API: an ASGI app with the documented requests, answers and errors,
served on 127.0.0.1, with fault injection.

Every shape here is from Lambda's Cloud API OpenAPI document, v1.8.3 (its production server
https://cloud.lambda.ai/, spec at https://cloud.lambda.ai/api/v1/openapi.json, reference at
https://docs-api.lambda.ai/api/cloud): ``{"data": ...}`` on success and ``{"error": {"code",
"message", "suggestion"?}}`` on failure; ``GET /instance-types`` (``InstanceTypes``: type ->
``instance_type`` + ``regions_with_capacity_available``), ``POST
/instance-operations/launch`` (``InstanceLaunchRequest``: ``region_name``,
``instance_type_name``, ``ssh_key_names`` with exactly one key, ``name`` of at most 64
characters, ``user_data``, ``quantity``; 400 ``insufficient-capacity`` /
``invalid-parameters`` / ``quota-exceeded``, 404 ``object-does-not-exist``), ``GET
/instances`` (``Instance``: ``id``, ``name``, ``status`` of ``booting``, ``active``,
``unhealthy``, ``terminating``, ``terminated``, ``preempted``, ``region``,
``instance_type``...), ``POST /instance-operations/terminate`` (404 for an unknown id), ``GET
/ssh-keys``, and 401 ``global/invalid-api-key`` without a valid bearer key. The messages are
the document's defaults. Nothing here was captured from a live account.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

KEY = "secret_lambda_key_do_not_log_0123456789"
MESSAGES = {  # the OpenAPI document's default messages
    "instance-operations/launch/insufficient-capacity":
        "Not enough capacity to fulfill launch request.",
    "global/quota-exceeded": "Quota exceeded.",
    "global/invalid-api-key": "API key was invalid, expired, or deleted.",
    "global/invalid-parameters": "Invalid request data.",
    "global/object-does-not-exist": "Specified instance does not exist.",
    "global/account-inactive": "Your account is inactive.",
    "global/internal-error": "An internal server error occurred.",
}
TYPES = {  # instance types of the shipped catalogue, specs as Lambda lists them
    "gpu_1x_a10": ("1x A10 (24 GB PCIe)", "A10 (24 GB PCIe)", 75, 30, 200, 1400, 1),
    "gpu_1x_a100_sxm4": ("1x A100 (40 GB SXM4)", "A100 (40 GB SXM4)", 129, 30, 200, 512, 1),
    "gpu_8x_a100_80gb_sxm4": ("8x A100 (80 GB SXM4)", "A100 (80 GB SXM4)", 1432, 240, 1800,
                              19500, 8),
    "gpu_8x_h100_sxm5": ("8x H100 (80 GB SXM5)", "H100 (80 GB SXM5)", 2392, 208, 1800, 24780, 8),
}


@dataclass
class Fault:
    method: str
    path: str
    status: int
    code: str | None
    times: int
    body: Any = None  # a raw body in place of Lambda's error object


@dataclass
class LambdaSim:
    keys: set[str] = field(default_factory=lambda: {KEY}, repr=False)
    ssh_keys: list[str] = field(default_factory=lambda: ["bourse-ops"])
    capacity: dict[str, set[str]] = field(default_factory=dict)  # type -> regions
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    user_data: dict[str, str] = field(default_factory=dict)  # instance id -> its user data
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    auth_headers: list[str] = field(default_factory=list, repr=False)
    faults: list[Fault] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def fail(self, method: str, path: str, status: int, code: str | None = None, *,
             times: int = 1, body: Any = None) -> None:
        self.faults.append(Fault(method, path, status, code, times, body))

    def launches(self) -> list[dict[str, Any]]:
        return [b for m, p, b in self.calls if p == "/instance-operations/launch"]

    def alive(self) -> list[dict[str, Any]]:
        return [i for i in self.instances.values() if i["status"] not in ("terminated",)]

    def settle(self) -> None:
        """Terminating instances end, booting ones become active (time passes)."""
        for inst in self.instances.values():
            inst["status"] = {"terminating": "terminated", "booting": "active"}.get(
                inst["status"], inst["status"])

    # the API

    def _fault(self, method: str, path: str) -> JSONResponse | None:
        for fault in self.faults:
            if fault.times > 0 and fault.method == method and fault.path == path:
                fault.times -= 1
                body = fault.body if fault.body is not None else {"error": {
                    "code": fault.code, "message": MESSAGES.get(fault.code or "", "scripted")}}
                return JSONResponse(body, status_code=fault.status)
        return None

    async def handle(self, request: Request) -> JSONResponse:
        path = "/" + request.path_params["path"]
        body = await request.json() if request.method == "POST" else None
        self.calls.append((request.method, path, body))
        self.auth_headers.append(request.headers.get("authorization", ""))
        if request.headers.get("authorization", "").removeprefix("Bearer ") not in self.keys:
            return _error(401, "global/invalid-api-key")
        found = self._fault(request.method, path)
        if found is not None:
            return found
        route = ROUTES.get((request.method, path))
        return route(self, body) if route else _error(404, "global/not-found")

    def instance_types(self, _body: Any) -> JSONResponse:
        return _data({name: {"instance_type": _type(name), "regions_with_capacity_available": [
            _region(r) for r in sorted(self.capacity.get(name, ()))]} for name in TYPES})

    def list_instances(self, _body: Any) -> JSONResponse:
        return _data([i for i in self.instances.values() if i["status"] != "terminated"])

    def ssh_key_list(self, _body: Any) -> JSONResponse:
        return _data([{"id": f"{n:0>32}"[-32:], "name": n, "public_key": "ssh-ed25519 AAAA x"}
                      for n in self.ssh_keys])

    def launch(self, body: Any) -> JSONResponse:
        bad = _invalid_launch(body)
        if bad:
            return _error(400, "global/invalid-parameters", bad)
        if body["ssh_key_names"][0] not in self.ssh_keys:
            return _error(404, "global/object-does-not-exist",
                          f"SSH key {body['ssh_key_names'][0]!r} was not found.")
        if body["region_name"] not in self.capacity.get(body["instance_type_name"], set()):
            return _error(400, "instance-operations/launch/insufficient-capacity")
        iid = f"{next(self._ids):032x}"
        self.instances[iid] = {
            "id": iid, "name": body.get("name", ""), "ip": "198.51.100.2",
            "private_ip": "10.0.2.100", "status": "booting",
            "ssh_key_names": body["ssh_key_names"], "file_system_names": [],
            "region": _region(body["region_name"]),
            "instance_type": _type(body["instance_type_name"]), "hostname": f"h-{iid[-6:]}",
            "actions": {a: {"available": True} for a in
                        ("migrate", "rebuild", "restart", "cold_reboot", "terminate")}}
        self.user_data[iid] = body.get("user_data", "")
        return _data({"instance_ids": [iid]})

    def terminate(self, body: Any) -> JSONResponse:
        ids = body.get("instance_ids") if isinstance(body, dict) else None
        if not isinstance(ids, list):
            return _error(400, "global/invalid-parameters")
        if any(i not in self.instances or self.instances[i]["status"] == "terminated"
               for i in ids):
            return _error(404, "global/object-does-not-exist")
        for iid in ids:
            self.instances[iid]["status"] = "terminating"
        return _data({"terminated_instances": [self.instances[i] for i in ids]})


ROUTES: dict[tuple[str, str], Any] = {
    ("GET", "/instance-types"): LambdaSim.instance_types,
    ("GET", "/instances"): LambdaSim.list_instances,
    ("GET", "/ssh-keys"): LambdaSim.ssh_key_list,
    ("POST", "/instance-operations/launch"): LambdaSim.launch,
    ("POST", "/instance-operations/terminate"): LambdaSim.terminate,
}


_LAUNCH_RULES: list[tuple[Any, str]] = [  # InstanceLaunchRequest's constraints
    (lambda b: all(k in b for k in ("region_name", "instance_type_name", "ssh_key_names")),
     "region_name, instance_type_name and ssh_key_names are required"),
    (lambda b: b["instance_type_name"] in TYPES, "unknown instance type"),
    (lambda b: isinstance(b["ssh_key_names"], list) and len(b["ssh_key_names"]) == 1,
     "exactly one SSH key must be specified"),
    (lambda b: len(b.get("name", "")) <= 64, "name must be 64 characters or fewer"),
    (lambda b: b.get("quantity", 1) == 1, "this replay launches one instance a call"),
]


def _invalid_launch(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    return next((why for rule, why in _LAUNCH_RULES if not rule(body)), None)


def _data(payload: Any) -> JSONResponse:
    return JSONResponse({"data": payload})


def _error(status: int, code: str, message: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message or MESSAGES.get(code, code),
                                   "suggestion": "scripted suggestion"}}, status_code=status)


def _region(name: str) -> dict[str, str]:
    return {"name": name, "description": f"{name} (replayed)"}


def _type(name: str) -> dict[str, Any]:
    desc, gpu, cents, vcpus, mem, disk, gpus = TYPES[name]
    return {"name": name, "description": desc, "gpu_description": gpu,
            "price_cents_per_hour": cents,
            "specs": {"vcpus": vcpus, "memory_gib": mem, "storage_gib": disk, "gpus": gpus}}


def app(sim: LambdaSim) -> Starlette:
    return Starlette(routes=[Route("/api/v1/{path:path}", sim.handle, methods=["GET", "POST"])])


@contextlib.contextmanager
def serve(sim: LambdaSim) -> Iterator[str]:
    """The replayed API on a free loopback port; yields its base URL (``.../api/v1``)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app(sim), host="127.0.0.1", port=port, log_level="warning",
                            lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/api/v1"
    finally:
        server.should_exit = True
        thread.join(5)
        sock.close()
