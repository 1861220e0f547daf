"""The loop that ends app runs whose driver has gone silent (``bourse run app.py`` killed
outright, or its machine gone): every ``every_s`` it cancels the runs whose lease lapsed
(``services.runs.expire_runs``) and, once that is committed, asks the nodes to stop their
jobs. ``run_once(now)`` is one pass, for tests."""

from __future__ import annotations

import asyncio
import logging

from bourse.server.services.runs import expire_runs
from bourse.server.state import ServerState

log = logging.getLogger(__name__)


class DriverWatch:
    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.every_s = max(0.5, state.config.driver_lease / 6)

    async def run_once(self, now: float | None = None) -> list[str]:
        """Cancel the runs whose lease lapsed before ``now``; their ids."""
        now = self.state.clock() if now is None else now
        async with self.state.db.write() as session:
            expired, commands = await expire_runs(session, now)
        if expired:
            self.state.hub.send(commands)
            self.state.notifier.notify()
            log.info("cancelled %d app run(s) whose driver went silent: %s", len(expired),
                     ", ".join(expired))
        return expired

    async def run(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:
                log.exception("ending runs whose driver went silent failed; retrying later")
            await asyncio.sleep(self.every_s)
