"""The metrics keeper: rolls raw resource samples into minute means and drops old ones, every
``compact_every_s`` (``run_once(now)`` is one pass, for tests)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from bourse.server.config import MetricsConfig
from bourse.server.db.database import Database
from bourse.server.services.metrics import ROLLUP_BATCH, compact_metrics

log = logging.getLogger(__name__)


class MetricsKeeper:
    def __init__(self, db: Database, config: MetricsConfig,
                 clock: Callable[[], float] = time.time) -> None:
        self.db, self.config, self.clock = db, config, clock

    async def run_once(self, now: float | None = None) -> int:
        """Roll up until no batch is full; returns the raw samples rolled up."""
        now = self.clock() if now is None else now
        total = 0
        while True:
            async with self.db.write() as session:
                done = await compact_metrics(session, now, self.config)
            total += done
            if done < ROLLUP_BATCH // 2:
                return total

    async def run(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:
                log.exception("rolling up metrics failed; retrying later")
            await asyncio.sleep(self.config.compact_every_s)
