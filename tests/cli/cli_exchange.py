"""An in-memory stand-in for the exchange's REST API, as an ``httpx.MockTransport`` handler.

The CLI tests point the CLI's one seam (``bourse.cli.client.open_client``) at it. It keeps just
enough state to answer what the CLI asks; the real server is tested end to end elsewhere.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable
from typing import Any

import httpx

URL = "http://exchange.test:8000"
TOKEN = "cli-token"
NOW = time.time()
Route = Callable[..., httpx.Response]


def job_view(job_id: str, state: str = "PENDING", command: list[str] | None = None,
             **extra: Any) -> dict[str, Any]:
    return {"id": job_id, "state": state, "spec": {"command": command or ["python", "t.py"]},
            "created_at": NOW - 300, "updated_at": NOW - 10, "attempt": 0, **extra}


def chunk(cursor: int, data: str | bytes, stream: str = "stdout",
          attempt: int = 1, rank: int = 0) -> dict[str, Any]:
    raw = data.encode() if isinstance(data, str) else data
    return {"cursor": cursor, "attempt": attempt, "rank": rank, "seq": cursor, "stream": stream,
            "offset": 0, "data": base64.b64encode(raw).decode()}


def sse(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


def error(status: int, message: str, **extra: Any) -> httpx.Response:
    return httpx.Response(status, json={"error": message, **extra})


class FakeExchange:
    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.attempts: dict[str, list[dict[str, Any]]] = {}
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.chunks: dict[str, list[dict[str, Any]]] = {}
        self.follow: dict[str, list[str]] = {}  # SSE text parts per job
        self.pruned: set[str] = set()  # jobs whose logs the exchange's retention deleted
        self.metrics: dict[str, dict[str, Any]] = {}  # MetricsView per job
        self.nodes: list[dict[str, Any]] = []
        self.offers: dict[str, Any] = {"offers": []}  # an OfferList
        self.clouds: dict[str, Any] = {"clouds": []}  # a CloudList
        self.bundles: dict[str, bytes] = {}
        self.secrets: list[str] = []  # the project's secrets' names
        self.requests: list[httpx.Request] = []
        self.on_follow: Callable[[], None] | None = None
        self._routes: list[tuple[str, re.Pattern[str], Route]] = [
            ("POST", re.compile(r"/jobs"), self._submit),
            ("GET", re.compile(r"/jobs"), self._list),
            ("GET", re.compile(r"/jobs/(?P<id>[^/]+)"), self._job),
            ("POST", re.compile(r"/jobs/(?P<id>[^/]+)/cancel"), self._cancel),
            ("GET", re.compile(r"/jobs/(?P<id>[^/]+)/events"), self._events),
            ("GET", re.compile(r"/jobs/(?P<id>[^/]+)/logs"), self._logs),
            ("GET", re.compile(r"/jobs/(?P<id>[^/]+)/logs/follow"), self._follow),
            ("GET", re.compile(r"/jobs/(?P<id>[^/]+)/metrics"), self._metrics),
            ("GET", re.compile(r"/nodes"), self._nodes),
            ("POST", re.compile(r"/offers"), self._offers),
            ("GET", re.compile(r"/clouds"), self._clouds),
            ("GET", re.compile(r"/nodes/(?P<id>[^/]+)"), self._node),
            ("HEAD", re.compile(r"/bundles/(?P<sha>[0-9a-f]+)"), self._has_bundle),
            ("PUT", re.compile(r"/bundles/(?P<sha>[0-9a-f]+)"), self._put_bundle),
            ("DELETE", re.compile(r"/tokens/(?P<id>[^/]+)"), self._revoke_token),
            ("GET", re.compile(r"/secrets"), self._secrets),
            ("DELETE", re.compile(r"/secrets/(?P<name>[^/]+)"), self._delete_secret),
        ]

    def add_job(self, view: dict[str, Any]) -> None:
        self.jobs[view["id"]] = view

    def submitted(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests
                if r.method == "POST" and r.url.path == "/api/v1/jobs"]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return error(401, "missing or bad token")
        path = request.url.path.removeprefix("/api/v1")
        for method, pattern, route in self._routes:
            found = pattern.fullmatch(path)
            if method == request.method and found:
                return route(request, **found.groupdict())
        return error(404, f"no route {request.method} {path}")

    def _secrets(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"secrets": [
            {"name": n, "created_at": 1.0, "updated_at": 1.0} for n in self.secrets]})

    def _submit(self, request: httpx.Request) -> httpx.Response:
        spec = json.loads(request.content)
        job_id = f"j{len(self.jobs) + 1}"
        self.jobs[job_id] = job_view(job_id, spec=spec, name=spec.get("name"),
                                     pending_reason="no node has an a100 free")
        return httpx.Response(201, json=self.jobs[job_id])

    def _list(self, request: httpx.Request) -> httpx.Response:
        state = request.url.params.get("state")
        limit = int(request.url.params.get("limit", 100))
        views = [j for j in reversed(self.jobs.values()) if not state or j["state"] == state]
        return httpx.Response(200, json={"jobs": views[:limit]})

    def _found(self, job_id: str) -> dict[str, Any] | None:
        return self.jobs.get(job_id)

    def _job(self, request: httpx.Request, id: str) -> httpx.Response:
        view = self._found(id)
        if view is None:
            return error(404, f"no job {id}", hint="list jobs with `bourse jobs`")
        return httpx.Response(200, json={**view, "attempts": self.attempts.get(id, [])})

    def _cancel(self, request: httpx.Request, id: str) -> httpx.Response:
        view = self._found(id)
        if view is None:
            return error(404, f"no job {id}")
        if view["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return error(409, f"job {id} already ended ({view['state']})")
        view.update(cancel_requested=True)
        return httpx.Response(200, json=view)

    def _events(self, request: httpx.Request, id: str) -> httpx.Response:
        return httpx.Response(200, json={"events": self.events.get(id, [])})

    def _bad_rank(self, request: httpx.Request, id: str) -> httpx.Response | None:
        """As the exchange refuses a rank the job lacks (its members: compute.num_nodes)."""
        rank = request.url.params.get("rank")
        members = self.jobs[id]["spec"].get("compute", {}).get("num_nodes", 1)
        if rank is None or int(rank) < members:
            return None
        return error(422, f"rank {rank} is not a member of job {id}", field="rank")

    def _logs(self, request: httpx.Request, id: str) -> httpx.Response:
        after = int(request.url.params["after"])
        limit = int(request.url.params["limit"])
        if (refused := self._bad_rank(request, id)) is not None:
            return refused
        rank = request.url.params.get("rank")
        page = [c for c in self.chunks.get(id, []) if c["cursor"] > after
                and (rank is None or c["rank"] == int(rank))][:limit]
        cursor = page[-1]["cursor"] if page else after
        done = self.jobs[id]["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") and not page
        return httpx.Response(200, json={"chunks": page, "cursor": cursor, "done": done,
                                         "pruned": id in self.pruned})

    def _follow(self, request: httpx.Request, id: str) -> httpx.Response:
        if self.on_follow is not None:
            self.on_follow()
        if id not in self.follow:
            return error(404, f"no job {id}")
        if (refused := self._bad_rank(request, id)) is not None:
            return refused
        rank = request.url.params.get("rank")
        parts = [p for p in self.follow[id] if rank is None or not p.startswith("event: chunk")
                 or json.loads(p.split("data: ", 1)[1])["rank"] == int(rank)]
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content="".join(parts).encode())

    def _metrics(self, request: httpx.Request, id: str) -> httpx.Response:
        if id not in self.metrics:
            return error(404, f"no job {id}")
        view = self.metrics[id]
        limit = int(request.url.params["limit"])
        return httpx.Response(200, json={**view, "samples": view["samples"][-limit:]})

    def _nodes(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"nodes": self.nodes})

    def _offers(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=self.offers)

    def _clouds(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=self.clouds)

    def _node(self, request: httpx.Request, id: str) -> httpx.Response:
        found = [n for n in self.nodes if n["id"] == id]
        return httpx.Response(200, json=found[0]) if found else error(404, f"no node {id}")

    def _has_bundle(self, request: httpx.Request, sha: str) -> httpx.Response:
        return httpx.Response(200 if sha in self.bundles else 404)

    def _put_bundle(self, request: httpx.Request, sha: str) -> httpx.Response:
        self.bundles[sha] = request.content
        return httpx.Response(201, json={"sha256": sha, "size": len(request.content)})

    def _revoke_token(self, request: httpx.Request, id: str) -> httpx.Response:
        return httpx.Response(200, json={"id": id, "project": "default", "role": "member",
                                         "created_at": NOW - 60, "revoked_at": NOW})

    def _delete_secret(self, request: httpx.Request, name: str) -> httpx.Response:
        return httpx.Response(200, json={"name": name, "created_at": NOW - 60,
                                         "updated_at": NOW - 60})
