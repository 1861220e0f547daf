"""The agent's end of the agent channel over a WebSocket it dials (``bourse.channel``).

Pings every keep-alive keep idle-dropping middleboxes from closing the connection (a load
balancer that cuts idle TCP after 20 minutes); a peer silent for two keep-alives ends it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from bourse.channel import CLOSE_NORMAL, ChannelClosed
from bourse.protocol.agent import MAX_FRAME_BYTES


class WebSocketChannel:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, text: str) -> None:
        try:
            await self.ws.send(text)
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def receive(self) -> str:
        try:
            frame = await self.ws.recv()
        except ConnectionClosed as exc:
            raise _closed(exc) from None
        return frame if isinstance(frame, str) else frame.decode("utf-8", "replace")

    async def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        await self.ws.close(code, reason)


def _closed(exc: ConnectionClosed) -> ChannelClosed:
    received = exc.rcvd
    return ChannelClosed(received.code if received else 1006, received.reason if received else "")


@contextlib.asynccontextmanager
async def dial(url: str, credential: str, keep_alive_s: float) -> AsyncIterator[WebSocketChannel]:
    """Connect to the coordinator's agent endpoint (``ws(s)://…/api/v1/agent/ws``) as the node
    whose credential this is."""
    async with websockets.connect(
            url, additional_headers={"Authorization": f"Bearer {credential}"},
            ping_interval=keep_alive_s, ping_timeout=keep_alive_s * 2,
            max_size=MAX_FRAME_BYTES, open_timeout=15, compression=None) as ws:
        yield WebSocketChannel(ws)
