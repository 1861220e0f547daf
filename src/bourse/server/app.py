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
from bourse.server import errors, openapi, routes, ui
from bourse.server.audit.middleware import AuditMiddleware
from bourse.server.config import ServerConfig, StoreConfig
from bourse.server.dataplane import DataPlane, open_dataplane
from bourse.server.drivers import DriverWatch
from bourse.server.files import datadir, keys
from bourse.server.http.limits import BodyLimit
from bourse.server.metrics.keeper import MetricsKeeper
from bourse.server.services import audit, projects, tokens
from bourse.server.services.jobs import active_attempts
from bourse.server.services.liveness import grace_after_start
from bourse.server.serving.keeper import ServiceKeeper
from bourse.server.state import ServerState

log = logging.getLogger(__name__)


async def bootstrap(state: ServerState) -> str | None:
    """On the first start, create the admin token; write it once to the credentials file
    (mode 0600) or, without one, to ``<data dir>/admin-token``. Returns it when created."""
    config = state.config
    async with state.db.write() as session:
        await projects.ensure_defaults(session, state.clock())
        await audit.ensure_head(session)
    async with state.db.write() as session:
        if await tokens.has_user_tokens(session):
            return None
        secret = await tokens.create_token(session, "user", state.clock(), name="admin",
                                           role="admin")
    target = config.credentials_path or config.data_dir / "admin-token"
    tokens.write_credentials(target, config.url, secret)
    log.warning("first start: admin token written to %s (mode 0600)", target)
    return secret


async def start_dataplane(state: ServerState, dataplane: DataPlane | None) -> None:
    """Wire the data plane in and take over the credentials of attempts that were active when
    the coordinator stopped (read first; the store is asked after the read has ended)."""
    state.use_dataplane(dataplane)
    if dataplane is None:
        return
    async with state.db.read() as session:
        active = await active_attempts(session)
    adopted = await dataplane.recover(active)
    if adopted:
        log.info("took over the store credentials of %d active attempt(s)", adopted)
    await dataplane.renew_due()


def secure_data_dir(config: ServerConfig) -> None:
    """The data dir private to the coordinator's user (``datadir``), saying what an earlier
    version left open."""
    tightened = datadir.secure(config.data_dir, keep=(keys.KEY_FILE,))
    if tightened:
        shown = ", ".join(str(p.relative_to(config.data_dir)) for p in tightened[:10])
        more = f" and {len(tightened) - 10} more" if len(tightened) > 10 else ""
        log.warning("data dir %s was open to other users: made %d path(s) private (%s%s)",
                    config.data_dir, len(tightened), shown, more)


async def _stop(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def create_app(config: ServerConfig, clock: Callable[[], float] = time.time,
               run_scheduler: bool = True, dataplane: DataPlane | None = None) -> FastAPI:
    """The coordinator. ``dataplane`` replaces the one ``config.store`` describes (tests give
    one over in-memory parts)."""
    state = ServerState.build(config, clock)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        secure_data_dir(config)
        state.open_key()
        await state.db.migrate(state.key)
        await bootstrap(state)
        await state.open_audit_seal()
        if config.allow_unverified:
            log.warning("ALLOW-UNVERIFIED: work will be placed on nodes that have not passed "
                        "verification. Use this for development only.")
        store = config.store if dataplane is None else StoreConfig.none()
        async with open_dataplane(store, config.store_dir, state.notifier.closing) as opened:
            await start_dataplane(state, dataplane or opened)
            # last, just before the server accepts agents: each node's loss window runs
            # from when it can reconnect, not from before a store that takes seconds to start
            async with state.db.write() as session:
                await grace_after_start(session, state.clock(), config.start_lease_s)
            async with _running(state, run_scheduler):
                yield

    app = FastAPI(title="bourse", version=__version__, lifespan=lifespan,
                  description=openapi.DESCRIPTION,
                  generate_unique_id_function=openapi.operation_id)
    app.state.bourse = state
    errors.install(app)
    app.add_middleware(BodyLimit)  # an oversized body is refused before a route reads it
    app.add_middleware(AuditMiddleware, record=state.record_audit, clock=state.clock)
    for router in routes.ROUTERS:
        app.include_router(router)
    app.include_router(ui.router)

    @app.get("/healthz", tags=["health"])
    async def liveness() -> dict[str, bool]:
        """Liveness: answers without a token and says nothing else."""
        return {"ok": True}

    return app


@asynccontextmanager
async def _running(state: ServerState, run_scheduler: bool) -> AsyncIterator[None]:
    """The scheduler and the data plane's loop while the app serves. On the way out: agents
    are disconnected first, pending revocations get a few seconds, the database closes; the
    embedded store stops after this (it takes seconds)."""
    scheduler = asyncio.create_task(state.scheduler.run()) if run_scheduler else None
    plane = state.dataplane
    renewer = asyncio.create_task(plane.run()) if plane is not None and run_scheduler else None
    archiver = (asyncio.create_task(state.logs.run())
                if state.logs is not None and run_scheduler else None)
    pruner = (asyncio.create_task(state.retention.run())
              if state.retention is not None and run_scheduler else None)
    keeper = asyncio.create_task(MetricsKeeper(state.db, state.config.metrics,
                                               state.clock).run()) if run_scheduler else None
    drivers = asyncio.create_task(DriverWatch(state).run()) if run_scheduler else None
    launcher = (asyncio.create_task(state.launcher.run())
                if state.launcher is not None and run_scheduler else None)
    services = asyncio.create_task(ServiceKeeper(state).run()) if run_scheduler else None
    try:
        yield
    finally:
        state.notifier.close()  # `bourse server` did already, before draining connections
        await _stop(scheduler)
        await _stop(renewer)
        await _stop(archiver)
        await _stop(pruner)
        await _stop(keeper)
        await _stop(drivers)
        await _stop(launcher)
        await _stop(services)
        for node_id in list(state.hub.connections):
            await state.hub.close_node(node_id, "coordinator shutting down")
        await state.hub.close()
        await state.direct.close()
        if plane is not None:
            await plane.drain()
        await state.db.close()
        state.audit_writer.close()
