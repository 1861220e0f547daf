"""In-process wake-ups for whoever waits on job changes (log followers, waiters).

Waiters re-read the database when woken, so a broadcast is enough and nothing is lost if a
wake-up comes before the wait starts: ``wait`` takes the version it last saw.
"""

from __future__ import annotations

import asyncio


class Notifier:
    def __init__(self) -> None:
        self.version = 0
        self._changed = asyncio.Event()

    def notify(self) -> None:
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait(self, seen: int, timeout: float) -> bool:
        """Wait until the version moves past ``seen``; False on timeout."""
        if self.version != seen:
            return True
        changed = self._changed
        try:
            await asyncio.wait_for(changed.wait(), timeout)
        except TimeoutError:
            return False
        return True
