"""The coordinator's ASGI app."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from bourse import __version__
from bourse.server import errors
from bourse.server.config import ServerConfig
from bourse.server.routes import agent, bundles, jobs, nodes, offers
from bourse.server.services import tokens
from bourse.server.services.placement import grace_after_start
from bourse.server.state import ServerState

log = logging.getLogger(__name__)


async def bootstrap(state: ServerState) -> str | None:
    """On the first start, create the admin token; write it once to the credentials file
    (mode 0600) or, without one, to ``<data dir>/admin-token``. Returns it when created."""
    config = state.config
    async with state.db.write() as session:
        if await tokens.has_user_tokens(session):
            return None
        secret = await tokens.create_token(session, "user", state.clock(), name="admin",
                                           role="admin")
    target = config.credentials_path or config.data_dir / "admin-token"
    tokens.write_credentials(target, config.url, secret)
    log.warning("first start: admin token written to %s (mode 0600)", target)
    return secret


def create_app(config: ServerConfig, clock: Callable[[], float] = time.time,
               run_scheduler: bool = True) -> FastAPI:
    state = ServerState.build(config, clock)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        config.data_dir.mkdir(parents=True, exist_ok=True)
        await state.db.migrate()
        await bootstrap(state)
        async with state.db.write() as session:
            await grace_after_start(session, state.clock(), config.start_lease_s)
        if config.allow_unverified:
            log.warning("ALLOW-UNVERIFIED: work will be placed on nodes that have not passed "
                        "verification. Use this for development only.")
        task = asyncio.create_task(state.scheduler.run()) if run_scheduler else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for node_id in list(state.hub.connections):
                await state.hub.close_node(node_id, "coordinator shutting down")
            await state.hub.close()
            await state.db.close()

    app = FastAPI(title="bourse", version=__version__, lifespan=lifespan,
                  description="An open, self-hostable exchange for GPU compute.")
    app.state.bourse = state
    errors.install(app)
    for module in (jobs, nodes, agent, bundles, offers):
        app.include_router(module.router)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, bool]:
        """Liveness: answers without a token and says nothing else."""
        return {"ok": True}

    return app
