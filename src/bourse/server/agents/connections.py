"""The agent connections this coordinator holds: one per node (a newer one replaces it), and a
few per node waiting for their hello."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator

from bourse.server.agents.frames import Connection

log = logging.getLogger(__name__)
CLOSE_MALFORMED, CLOSE_POLICY, CLOSE_TRY_AGAIN, CLOSE_REPLACED = 1003, 1008, 1013, 4000
# A node holds one session (a newer one replaces it: an agent reconnecting after its old TCP
# connection went half-open must not wait for that one to time out), and this many
# connections waiting for their hello (each may wait HELLO_TIMEOUT_S).
MAX_WAITING_PER_NODE = 4


class Connections:
    """Node id -> its live connection; iterating yields the node ids connected here."""

    def __init__(self) -> None:
        self._live: dict[str, Connection] = {}
        self._waiting: Counter[str] = Counter()  # connections per node awaiting their hello
        self._heard: dict[str, float] = {}  # node -> when a frame of it was last read

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._live))

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._live

    def __getitem__(self, node_id: str) -> Connection:
        return self._live[node_id]

    def get(self, node_id: str) -> Connection | None:
        return self._live.get(node_id)

    def wait(self, node_id: str) -> bool:
        """Count a connection awaiting its hello; False (count nothing) past the limit."""
        if self._waiting[node_id] >= MAX_WAITING_PER_NODE:
            return False
        self._waiting[node_id] += 1
        return True

    def waited(self, node_id: str) -> None:
        self._waiting[node_id] -= 1
        if not self._waiting[node_id]:
            del self._waiting[node_id]

    def heard(self, node_id: str, at: float) -> None:
        """A frame of the node was read (``take_heard``)."""
        self._heard[node_id] = at

    def take_heard(self, now: float) -> dict[str, float]:
        """When each node was last heard here since the last call, for its silence to be
        judged by what its socket says rather than by how far the database has got with its
        messages: a node whose connection waits for its hello to be handled, or whose messages
        wait for room in the intake, is heard ``now``. Overload slows acknowledgements; it
        never makes a talking node look silent."""
        heard, self._heard = self._heard, {}
        heard |= dict.fromkeys(self._waiting, now)
        heard |= {n: now for n, c in self._live.items() if c.busy}
        return heard

    def add(self, connection: Connection) -> Connection | None:
        """Make ``connection`` its node's; returns the one it replaces, if any."""
        previous = self._live.get(connection.node_id)
        self._live[connection.node_id] = connection
        return previous

    def remove(self, connection: Connection) -> None:
        """Forget ``connection`` unless a newer one has replaced it."""
        if self._live.get(connection.node_id) is connection:
            del self._live[connection.node_id]

    async def close(self, node_id: str, reason: str) -> None:
        """End the node's connection (its agent will reconnect), if it has one here."""
        connection = self._live.pop(node_id, None)
        if connection is not None:
            await connection.channel.close(CLOSE_POLICY, reason)
