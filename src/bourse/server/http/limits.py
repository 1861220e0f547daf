"""The size limit of request bodies (bundles have their own, ``bundle_max_bytes``) and of
WebSocket messages (``MAX_FRAME_BYTES``: uvicorn refuses a larger one with close code 1009
before it is assembled, and the hub checks again whatever server runs the app).

A body announced larger than the limit is refused before it is read; one that grows past it
while it streams (chunked, or a lying ``Content-Length``) is cut off with the same 413.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bourse.core.errors import TooLarge
from bourse.core.units import format_bytes

MAX_BODY_BYTES = 16 * 1024 * 1024  # a batch of 1,000 job specs fits many times over
MAX_FRAME_BYTES = MAX_BODY_BYTES  # one WebSocket message, from an agent or a user
EXEMPT_PREFIX = "/api/v1/bundles/"


def _refusal(limit: int) -> TooLarge:
    return TooLarge(f"the request body is larger than the limit of {format_bytes(limit)}",
                    hint="split it (a batch holds at most 1,000 jobs); put data in the store")


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(EXEMPT_PREFIX):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        seen, refused = 0, False

        async def counted() -> Message:
            """The body's parts; past the limit, the 413 is sent and the app is told that the
            client went away (whatever it answers then is dropped)."""
            nonlocal seen, refused
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes and not refused:
                refused = True
                await self._refuse(send)
            return {"type": "http.disconnect"} if refused else message

        async def guarded(message: Message) -> None:
            if not refused:
                await send(message)

        await self.app(scope, counted, guarded)

    async def _refuse(self, send: Send) -> None:
        error = _refusal(self.max_bytes)
        body = json.dumps({"error": error.message, "field": None, "hint": error.hint}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
