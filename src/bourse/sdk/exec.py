"""``exec``: run a command beside a running job, over ``/api/v1/jobs/{id}/exec`` (a WebSocket;
the message format is in ``bourse.server.routes.execs``).

    async with ExecSession.open(url, token, job_id, ExecTarget(argv=["pwd"])) as session:
        await session.eof()
        async for fd, data in session.output():
            ...
        print(session.exit_code)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection

from bourse.core.errors import BourseError
from bourse.protocol.stream import ExecTarget
from bourse.sdk import core
from bourse.sdk.config import resolve_credentials
from bourse.sdk.errors import Unreachable

MAX_MESSAGE = 1024 * 1024


class ExecFailed(BourseError):
    """The exchange or the node could not run the command."""

    exit_code = 1


def exec_url(url: str, job_id: str) -> str:
    root = core.root_url(url)
    root = root.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    return f"{root}/api/v1/jobs/{job_id}/exec"


class ExecSession:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.exit_code: int | None = None

    @classmethod
    @asynccontextmanager
    async def open(cls, url: str | None, token: str | None, job_id: str,
                   target: ExecTarget) -> AsyncIterator[ExecSession]:
        credentials = resolve_credentials(url, token)
        address = exec_url(credentials.url, job_id)
        try:
            ws = await websockets.connect(address, additional_headers=core.headers(
                credentials.token), max_size=MAX_MESSAGE, open_timeout=30, compression=None)
        except (OSError, websockets.WebSocketException, TimeoutError) as exc:
            raise Unreachable(f"cannot open {address} ({type(exc).__name__}: {exc})",
                              hint="is the exchange running and BOURSE_URL right?") from None
        try:
            await ws.send(target.model_dump_json())
            session = cls(ws)
            await session._started()
            yield session
        finally:
            await ws.close()

    async def _started(self) -> None:
        message = await self.ws.recv()
        control = _control(message)
        if control.get("type") != "started":
            raise _failure(control)

    async def send(self, data: bytes) -> None:
        """Bytes for the command's stdin (or its terminal)."""
        await self.ws.send(data)

    async def eof(self) -> None:
        """The command's stdin has ended."""
        await self.ws.send(json.dumps({"type": "eof"}))

    async def resize(self, rows: int, cols: int) -> None:
        await self.ws.send(json.dumps({"type": "resize", "rows": rows, "cols": cols}))

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        """(fd, bytes) as the command writes them; ends when it has exited (``exit_code``)."""
        try:
            async for message in self.ws:
                if isinstance(message, bytes):
                    if message:
                        yield message[0], message[1:]
                    continue
                control = _control(message)
                if control.get("type") == "exit":
                    self.exit_code = control.get("code")
                    return
                raise _failure(control)
        except websockets.ConnectionClosed:
            pass
        raise ExecFailed("the connection to the exchange ended before the command did",
                         hint="the node or the exchange may have restarted; run it again")


def _control(message: str | bytes) -> dict[str, Any]:
    if isinstance(message, bytes):
        raise ExecFailed("the exchange sent output before the command started")
    value = json.loads(message)
    return value if isinstance(value, dict) else {}


def _failure(control: dict[str, Any]) -> ExecFailed:
    return ExecFailed(str(control.get("message") or "the command could not be run"),
                      hint=control.get("hint"))
