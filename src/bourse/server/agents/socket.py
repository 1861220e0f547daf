"""The coordinator's end of the agent channel over Starlette's WebSocket (``bourse.channel``).

A binary frame, or a text frame over the protocol's limit, is malformed (the hub closes the
connection); the other end going away is ``ChannelClosed``."""

from __future__ import annotations

import contextlib

from starlette.websockets import WebSocket, WebSocketDisconnect

from bourse.channel import CLOSE_NORMAL, ChannelClosed
from bourse.server.agents.frames import Malformed
from bourse.server.http.limits import MAX_FRAME_BYTES


class SocketChannel:
    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws

    async def send(self, text: str) -> None:
        try:
            await self.ws.send_text(text)
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            raise ChannelClosed(reason=str(exc)[:120]) from None

    async def receive(self) -> str:
        try:
            message = await self.ws.receive()
        except (WebSocketDisconnect, RuntimeError) as exc:
            raise ChannelClosed(reason=str(exc)[:120]) from None
        if message["type"] == "websocket.disconnect":
            raise ChannelClosed(message.get("code", CLOSE_NORMAL), message.get("reason") or "")
        text = message.get("text")
        if text is None:
            raise Malformed("binary frames are not part of the protocol")
        if len(text) > MAX_FRAME_BYTES:  # characters: a lower bound of its bytes
            raise Malformed(f"a frame of {len(text)} characters is larger than the limit of "
                            f"{MAX_FRAME_BYTES} bytes")
        return str(text)

    async def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):  # closed already
            await self.ws.close(code=code, reason=reason)
