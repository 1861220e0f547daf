"""The scheduler loop: lost nodes, expired placement leases, then placement.

``tick(now)`` is one pass, for tests to drive without sleeping; ``run()`` ticks whenever
something may have changed (a submit, a node connecting, an attempt ending) and at least every
``tick_interval_s``. Commands for agents are sent after the transaction commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.server.agents.connections import Connections
from bourse.server.agents.dispatch import Dispatch
from bourse.server.commands import Command
from bourse.server.config import ServerConfig
from bourse.server.db.database import Database
from bourse.server.launcher.launcher import Launcher
from bourse.server.notifier import Notifier
from bourse.server.services import reliability
from bourse.server.services.capacity import Memo
from bourse.server.services.liveness import (
    detect_lost_nodes,
    expire_start_leases,
    note_heard,
)
from bourse.server.services.placement import PlacementReport, place_pending

log = logging.getLogger(__name__)
PLACEMENT_BATCH = 200
KICK_GATHER_S = 0.005  # kicks arriving within this are served by one placement pass


class Scheduler:
    def __init__(self, db: Database, dispatch: Dispatch, connections: Connections,
                 notifier: Notifier, config: ServerConfig, *,
                 clock: Callable[[], float] = time.time,
                 launcher: Launcher | None = None) -> None:
        self.db, self.dispatch, self.connections = db, dispatch, connections
        self.notifier, self.config, self.clock = notifier, config, clock
        self._wake = asyncio.Event()
        self.memo = Memo()  # what placement passes keep between them
        self._scored_at = -math.inf  # when the nodes' reliability scores were last stored
        self.launcher = launcher  # with clouds: kicked when jobs are left waiting
        if launcher is not None:
            self.memo.launchable, self.memo.note = launcher.clouds.launchable, launcher.note

    def kick(self) -> None:
        self._wake.set()

    async def tick(self, now: float | None = None) -> PlacementReport:
        """One full pass: lost nodes, expired placement leases, the nodes' reliability scores
        (each minute), then placement."""
        now = self.clock() if now is None else now
        async with self.db.write() as session:
            await note_heard(session, self.connections.take_heard(now))
            lost = await detect_lost_nodes(session, now, self.config.loss_window_s)
            expired = await expire_start_leases(session, now)
            if now - self._scored_at >= reliability.SCORE_EVERY_S:
                await reliability.refresh_scores(session, now)
                self._scored_at = now
            report = await place_pending(session, now, self.config.start_lease_s,
                                         batch=PLACEMENT_BATCH,
                                         allow_unverified=self.config.allow_unverified,
                                         data_region=self.config.store.region,
                                         memo=self.memo)
        report.lost_nodes = lost
        for node_id in lost:
            log.warning("node %s lost: silent for longer than its loss window", node_id)
            await self.connections.close(node_id, "declared lost")
        self._after(report, changed=bool(lost or expired))
        return report

    async def place(self, now: float | None = None) -> PlacementReport:
        """Placement only: what a submit or a freed slot calls for."""
        now = self.clock() if now is None else now
        async with self.db.write() as session:
            report = await place_pending(session, now, self.config.start_lease_s,
                                         batch=PLACEMENT_BATCH,
                                         allow_unverified=self.config.allow_unverified,
                                         data_region=self.config.store.region, full=False,
                                         memo=self.memo)
        self._after(report, changed=False)
        return report

    async def place_in(self, session: AsyncSession, now: float) -> list[Command]:
        """Placement inside a caller's transaction; the caller sends the commands after its
        commit."""
        report = await place_pending(session, now, self.config.start_lease_s,
                                     batch=PLACEMENT_BATCH,
                                     allow_unverified=self.config.allow_unverified,
                                     data_region=self.config.store.region, full=False,
                                     memo=self.memo)
        if report.more:
            self.kick()
        self._launch(report)
        return report.commands

    def _launch(self, report: PlacementReport) -> None:
        if self.launcher is not None and report.unplaced:
            self.launcher.kick()

    def _after(self, report: PlacementReport, changed: bool) -> None:
        self.dispatch.send(report.commands)
        if changed or report.placed or report.failed:
            self.notifier.notify()
        if report.more:
            self.kick()  # there may be more pending jobs than one pass takes
        self._launch(report)

    async def run(self) -> None:
        """Place on every kick (gathering kicks for a few milliseconds), and run a full tick
        at least every ``tick_interval_s``."""
        next_full = 0.0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.config.tick_interval_s)
            await asyncio.sleep(KICK_GATHER_S)
            self._wake.clear()
            try:
                if self.clock() >= next_full:
                    next_full = self.clock() + self.config.tick_interval_s
                    await self.tick()
                else:
                    await self.place()
            except Exception:
                log.exception("scheduler pass failed; retrying on the next one")
                await asyncio.sleep(self.config.tick_interval_s)
