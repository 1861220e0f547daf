"""The coordinator's app in process, with a cookie-keeping httpx client, for the plain HTTP tests
of the UI (the browser tests start real processes: ``ui_exchange.py``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

import bourse.server.config as server_config
from bourse.server.app import create_app
from bourse.server.config import ServerConfig
from bourse.server.dataplane import DataPlane
from bourse.server.services import tokens
from bourse.server.state import ServerState

BASE_URL = "http://bourse.test"
START = 1_700_000_000.0


def without_store(config: ServerConfig) -> ServerConfig:
    """No object store where the coordinator has one: the UI shows data, it does not move it."""
    store = getattr(server_config, "StoreConfig", None)
    return replace(config, store=store.none()) if store is not None else config


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Site:
    """The app with its lifespan run, an admin token, and a cookie-keeping client without one."""

    app: FastAPI
    client: httpx.AsyncClient
    admin_token: str
    clock: Clock

    @property
    def state(self) -> ServerState:
        state: ServerState = self.app.state.bourse
        return state

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.admin_token}", **kwargs.pop("headers", {})}
        return self.client.request(method, path, headers=headers, **kwargs)

    async def submit(self, **spec: Any) -> dict[str, Any]:
        body = {"command": ["python", "-c", "pass"], "compute": {"cpus": 1}, **spec}
        response = await self.api("POST", "/api/v1/jobs", json=body)
        assert response.status_code == 201, response.text
        job: dict[str, Any] = response.json()
        return job

    async def login(self, token: str | None = None) -> httpx.Response:
        response: httpx.Response = await self.client.post(
            "/ui/login", data={"token": token or self.admin_token},
            headers={"Origin": BASE_URL})
        return response

    async def user_token(self, **extra: Any) -> str:
        async with self.state.db.write() as session:
            return await tokens.create_token(session, "user", self.clock(), name="u", **extra)


@asynccontextmanager
async def open_site(tmp_path: Path, dataplane: DataPlane | None = None) -> AsyncIterator[Site]:
    """The app with its lifespan run (no scheduler loop: nothing is placed) and a client; with
    a data plane, jobs may name data."""
    config = without_store(ServerConfig(
        data_dir=tmp_path / "data", credentials_path=tmp_path / "cred.json",
        allow_unverified=True))
    clock = Clock()
    app = create_app(config, clock=clock, run_scheduler=False, dataplane=dataplane)
    async with app.router.lifespan_context(app):
        token = json.loads((tmp_path / "cred.json").read_text())["token"]
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            yield Site(app, client, token, clock)
