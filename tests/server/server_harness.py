"""Helpers of the coordinator tests: an injectable clock, the app with its lifespan run and an
in-process ASGI client (``Exchange``), and the same app behind a real uvicorn server on a free
loopback port (``Live``) for agents that speak the WebSocket protocol."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fake_agent import WAIT_S, FakeAgent
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from bourse.protocol.common import Capabilities, GpuInfo
from bourse.server.app import create_app
from bourse.server.config import ServerConfig, StoreConfig
from bourse.server.dataplane import DataPlane
from bourse.server.db.schema import Attempt, Job, Node
from bourse.server.http.limits import MAX_FRAME_BYTES
from bourse.server.scheduler import PlacementReport
from bourse.server.services import tokens
from bourse.server.state import ServerState
from bourse.storage import MemoryStore
from bourse.storage.memory import MemoryStores

START = 1_700_000_000.0
NOTHING_CONNECTED = re.compile(r"^no (verified )?node is connected$")  # a pending reason
A100 = GpuInfo(model="a100-80gb", name="NVIDIA A100-SXM4-80GB", memory_mib=81920)


class Clock:
    """The coordinator's clock, moved only by the test."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def capabilities(cpus: int = 2, memory_gib: float = 8.0, gpus: int = 0,
                 gpu: GpuInfo = A100, *, network: str | None = None,
                 address: str | None = None, provider: str | None = None) -> Capabilities:
    return Capabilities(hostname="test-host", cpus=cpus, memory_gib=memory_gib,
                        disk_free_gib=100.0, gpus=[gpu] * gpus,
                        driver="550.54.15" if gpus else None, os="Linux", python="3.11",
                        agent_version="test", network=network, address=address,
                        provider=provider)


def job_spec(command: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """A job spec as a client sends it; ``compute`` defaults to one CPU."""
    return {"command": command or ["python", "-c", "pass"],
            "compute": extra.pop("compute", {"cpus": 1}), **extra}


def api_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path) of every HTTP route the app serves, included routers flattened."""
    return sorted((method, route.path) for route in _walk(app.routes)
                  for method in route.methods)


def _walk(routes: Iterable[BaseRoute]) -> Iterator[APIRoute]:
    for route in routes:
        nested = getattr(getattr(route, "original_router", None), "routes", None)
        if nested is not None:  # FastAPI >= 0.16x keeps included routers as one route each
            yield from _walk(nested)
        elif isinstance(route, APIRoute):
            yield route


@dataclass
class Exchange:
    app: FastAPI
    config: ServerConfig
    clock: Clock
    client: httpx.AsyncClient
    admin_token: str

    @property
    def state(self) -> ServerState:
        state: ServerState = self.app.state.bourse
        return state

    async def user_token(self, *, role: str | None = None,
                         expires_at: float | None = None) -> str:
        async with self.state.db.write() as session:
            return await tokens.create_token(session, "user", self.clock(), name="someone",
                                             role=role, expires_at=expires_at)

    async def project_token(self, project: str, role: str = "member") -> str:
        """A token of ``project`` (created with the API if it is new)."""
        made = await self.client.post("/api/v1/projects", json={"name": project})
        assert made.status_code in (201, 409), made.text
        token = await self.client.post("/api/v1/tokens", json={"project": project, "role": role})
        assert token.status_code == 201, token.text
        secret: str = token.json()["token"]
        return secret

    async def submit(self, **spec: Any) -> dict[str, Any]:
        response = await self.client.post("/api/v1/jobs", json=job_spec(**spec))
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    async def job(self, job_id: str) -> dict[str, Any]:
        response = await self.client.get(f"/api/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def events(self, job_id: str) -> list[dict[str, Any]]:
        response = await self.client.get(f"/api/v1/jobs/{job_id}/events")
        assert response.status_code == 200, response.text
        found: list[dict[str, Any]] = response.json()["events"]
        return found

    async def enroll(self, name: str = "node") -> tuple[str, str]:
        """A new node: (node id, node credential)."""
        made = await self.client.post("/api/v1/enrollments", json={"name": name})
        assert made.status_code == 201, made.text
        enrolled = await self.client.post(
            "/api/v1/agent/enroll", json={"name": name},
            headers={"Authorization": f"Bearer {made.json()['token']}"})
        assert enrolled.status_code == 201, enrolled.text
        return enrolled.json()["node_id"], enrolled.json()["credential"]

    async def tick(self, now: float | None = None) -> PlacementReport:
        return await self.state.scheduler.tick(self.clock() if now is None else now)

    async def place(self, now: float | None = None) -> PlacementReport:
        """The quick pass a submit or a freed slot causes (no reasons, no lost nodes)."""
        return await self.state.scheduler.place(self.clock() if now is None else now)

    async def row(self, model: type[Any], key: Any) -> Any:
        async with self.state.db.read() as session:
            return await session.get(model, key)

    async def job_row(self, job_id: str) -> Job:
        job: Job = await self.row(Job, job_id)
        return job

    async def attempt_row(self, job_id: str, number: int) -> Attempt:
        attempt: Attempt = await self.row(Attempt, (job_id, number, 0))
        return attempt

    async def node_row(self, node_id: str) -> Node:
        node: Node = await self.row(Node, node_id)
        return node


def server_config(data_dir: Path, database_url: str, **overrides: Any) -> ServerConfig:
    """Test settings. Fake agents send no probe reports, so placement accepts unverified nodes
    unless a test (of verification) says otherwise. The loss window is the shortest there is
    (three keep-alives) unless a test of the window says otherwise."""
    config = ServerConfig(data_dir=data_dir / "data", database_url=database_url,
                          credentials_path=data_dir / "cred.json", keep_alive_s=20.0,
                          loss_window_s=1.0,
                          start_lease_s=30.0, bundle_max_bytes=64 * 1024,
                          allow_unverified=True, store=StoreConfig.none())
    return replace(config, **overrides)



@contextlib.asynccontextmanager
async def memory_store_exchange(tmp_path: Path, database_url: str,
                                store: MemoryStore) -> AsyncIterator[Exchange]:
    """``open_exchange`` with a data plane over an in-memory store (bucket ``bourse``; every
    other bucket an empty one of its own) and an issuer that hands out keys without a store
    behind them."""
    async with open_exchange(tmp_path, database_url, dataplane=memory_dataplane(store)) as opened:
        yield opened


def memory_dataplane(store: MemoryStore) -> DataPlane:
    """A data plane over an in-memory store (bucket ``bourse``) with an issuer that hands out
    keys without a store behind them."""
    from bourse.storage import MemoryIssuer, StoreSettings

    return DataPlane(StoreSettings(endpoint="http://store.test:8333"), "bourse",
                     MemoryIssuer(), store=store, opener=MemoryStores(store))


@contextlib.asynccontextmanager
async def open_exchange(tmp_path: Path, database_url: str, *, run_scheduler: bool = False,
                        clock: Clock | None = None, dataplane: DataPlane | None = None,
                        **overrides: Any) -> AsyncIterator[Exchange]:
    """The app with its lifespan run and a client; without the scheduler loop (tests tick it)
    unless asked; without a data plane unless one is given."""
    config, clock = server_config(tmp_path, database_url, **overrides), clock or Clock()
    app = create_app(config, clock=clock, run_scheduler=run_scheduler, dataplane=dataplane)
    async with app.router.lifespan_context(app):
        assert config.credentials_path is not None
        token = json.loads(config.credentials_path.read_text())["token"]
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://bourse.test",
                                     headers={"Authorization": f"Bearer {token}"}) as client:
            yield Exchange(app, config, clock, client, token)


@dataclass
class Live:
    """The exchange's app served by uvicorn on a loopback port, in the test's event loop."""

    exchange: Exchange
    port: int

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/api/v1/agent/ws"


@contextlib.asynccontextmanager
async def serve(exchange: Exchange) -> AsyncIterator[Live]:
    """uvicorn's startup and shutdown without its main loop (which polls for the exit flag
    every 100 ms) or its signal handlers; the app's lifespan is the exchange's."""
    config = uvicorn.Config(exchange.app, host="127.0.0.1", port=0, lifespan="off",
                            log_level="warning", timeout_graceful_shutdown=2,
                            ws_max_size=MAX_FRAME_BYTES)  # as `bourse server`
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup()
    try:
        yield Live(exchange, server.servers[0].sockets[0].getsockname()[1])
    finally:
        await _stop(server)


async def _stop(server: uvicorn.Server) -> None:
    """``Server.shutdown`` minus its fixed 100 ms pause: stop listening, ask every connection
    to close, and wait for the app's tasks (agent sockets, streams) to end."""
    for listener in server.servers:
        listener.close()
    for connection in list(server.server_state.connections):
        connection.shutdown()
    if server.server_state.tasks:
        await asyncio.wait(set(server.server_state.tasks), timeout=5)


async def until(check: Callable[[], Awaitable[bool]], timeout: float = WAIT_S) -> None:
    """Wait for a condition that another task brings about and signals to no one (polled)."""
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.005)


async def until_disconnected(exchange: Exchange, node_id: str) -> None:
    """Wait until the hub has handled a closed socket's goodbye (after the client saw it)."""
    async def forgotten() -> bool:
        return not exchange.state.hub.connected(node_id) and (
            await exchange.node_row(node_id)).session is None

    await until(forgotten)


async def place_job(exchange: Exchange, agent: FakeAgent, **spec: Any) -> tuple[str, int]:
    """Submit a job, tick, and take the agent's start_job: (job id, attempt number)."""
    job = await exchange.submit(**spec)
    await exchange.tick()
    start = await agent.expect("start_job", job_id=job["id"])
    return job["id"], int(start["attempt"])
