"""In-process wake-ups for whoever waits on job changes (log followers, waiters).

Waiters re-read the database when woken, so a broadcast is enough and nothing is lost if a
wake-up comes before the wait starts: ``wait`` takes the version it last saw.

`close` says the coordinator is stopping: every waiter wakes at once, and open streams end
instead of holding the shutdown until their jobs do; ``closing`` is set for those (the store's
supervisor) that must stop what they do before the app's own shutdown runs.
"""

from __future__ import annotations

import asyncio


class Notifier:
    def __init__(self) -> None:
        self.version = 0
        self._changed = asyncio.Event()
        self.closing = asyncio.Event()

    @property
    def closed(self) -> bool:
        return self.closing.is_set()

    def notify(self) -> None:
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def close(self) -> None:
        """The coordinator is stopping: wake every waiter, now and from now on."""
        self.closing.set()
        self._changed.set()

    async def wait(self, seen: int, timeout: float) -> bool:
        """Wait until the version moves past ``seen`` (or the notifier closes); False on
        timeout."""
        if self.version != seen or self.closed:
            return True
        changed = self._changed
        try:
            await asyncio.wait_for(changed.wait(), timeout)
        except TimeoutError:
            return False
        return True
