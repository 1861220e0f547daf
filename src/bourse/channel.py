"""The agent channel seam: what coordinator and agent need of the connection between them.

Three calls — send a text frame, receive one, close — over a WebSocket in production (the
coordinator's adapter is ``server.agents.socket``, the agent's ``agent.socket``), and over an
in-memory pipe that ships here (like httpx's ``MockTransport``), so that a hub and an agent, or
a thousand simulated agents, can talk in one process without sockets::

    coordinator_end, agent_end = memory_pair()
    asyncio.create_task(hub.serve(coordinator_end, node_id))
    await agent_end.send(hello_frame)

Frames are whole JSON texts; the protocol is ``bourse.protocol.agent``.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

CLOSE_NORMAL = 1000


class ChannelClosed(Exception):
    """The other end closed the channel (or it broke): ``code`` and ``reason`` as sent."""

    def __init__(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        super().__init__(f"channel closed ({code}{': ' + reason if reason else ''})")
        self.code, self.reason = code, reason


class Channel(Protocol):
    async def send(self, text: str) -> None:
        """Send one frame; ChannelClosed once the channel is closed."""

    async def receive(self) -> str:
        """The next frame; ChannelClosed when the other end has closed."""

    async def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        """Close the channel (a no-op when closed already)."""


_CLOSED = object()


class MemoryChannel:
    """One end of an in-memory pipe (``memory_pair``)."""

    def __init__(self, inbox: asyncio.Queue[object], outbox: asyncio.Queue[object]) -> None:
        self._inbox, self._outbox = inbox, outbox
        self.closed: ChannelClosed | None = None  # why this end is closed, once it is
        self.peer: MemoryChannel | None = None

    async def send(self, text: str) -> None:
        if self.closed is not None:
            raise self.closed
        self._outbox.put_nowait(text)

    async def receive(self) -> str:
        if self.closed is not None and self._inbox.empty():
            raise self.closed
        item = await self._inbox.get()
        if isinstance(item, ChannelClosed):
            self.closed = self.closed or item
            raise item
        assert isinstance(item, str)
        return item

    async def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        if self.closed is not None:
            return
        self.closed = ChannelClosed(code, reason)
        self._outbox.put_nowait(ChannelClosed(code, reason))  # the peer reads it last
        self._inbox.put_nowait(self.closed)  # and so does a reader waiting on this end


def memory_pair() -> tuple[MemoryChannel, MemoryChannel]:
    """Two connected ends: what one sends, the other receives, in order (unbounded: no
    backpressure, unlike a socket)."""
    one: asyncio.Queue[object] = asyncio.Queue()
    two: asyncio.Queue[object] = asyncio.Queue()
    a, b = MemoryChannel(one, two), MemoryChannel(two, one)
    a.peer, b.peer = b, a
    return a, b
