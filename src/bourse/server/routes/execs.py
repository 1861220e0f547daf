"""``/api/v1/jobs/{id}/exec``: a WebSocket to a command run beside a running job on its node.

The client's first message is an ``ExecTarget`` (argv, tty, rows, cols) as JSON text. Then:

- client -> coordinator: binary frames are stdin; text frames are ``{"type": "resize", "rows",
  "cols"}`` or ``{"type": "eof"}`` (stdin ended);
- coordinator -> client: binary frames are output, their first byte the fd (1 stdout, 2 stderr);
  text frames are ``{"type": "started"}``, then ``{"type": "exit", "code": N}`` at the end, or
  ``{"type": "error", "message", "hint"}`` instead.

Authenticated by a bearer user token that may see the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from bourse.core.errors import BourseError, InvalidInput
from bourse.protocol.stream import ExecTarget, StreamResize
from bourse.server.routes.deps import get_state, principal_of
from bourse.server.routes.jobs import JobIdPath
from bourse.server.routes.sockets import record_socket, refusal_code
from bourse.server.services.streams import running_job
from bourse.server.streams.tunnels import Unreachable
from bourse.tunnel.stream import Stream, StreamClosed

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])
FIRST_MESSAGE_TIMEOUT_S = 30.0


@router.websocket("/{job_id}/exec")
async def exec_socket(ws: WebSocket, job_id: JobIdPath) -> None:
    await ws.accept()
    asked: dict[str, Any] = {}
    try:
        stream = await _open(ws, job_id, asked)
    except BourseError as exc:
        await record_socket(ws, "exec", f"refused: {exc.message}", asked)
        await _send_json(ws, {"type": "error", "message": exc.message, "hint": exc.hint})
        await _close(ws, refusal_code(exc, 1000))
        return
    await record_socket(ws, "exec", "started", asked)
    tunnels = get_state(ws).hub.tunnels
    try:
        await _send_json(ws, {"type": "started"})
        await _relay(ws, stream)
    finally:
        tunnels.close(stream)
        await _close(ws)
        await record_socket(ws, "exec", "ended", asked)


async def _open(ws: WebSocket, job_id: str, asked: dict[str, Any]) -> Stream:
    """The stream to the command; ``asked`` gets what the caller asked for (for the audit
    trail)."""
    principal = await principal_of(ws, "user")
    target = await _first_message(ws)
    asked.update(argv=target.argv, tty=target.tty)
    state = get_state(ws)
    async with state.db.read() as session:
        running = await running_job(session, job_id, principal.scope)
    carrier = state.hub.connections.get(running.node_id)
    if carrier is None:
        raise Unreachable(f"node {running.node_id}, where job {job_id} runs, is not connected",
                          hint="retry when its agent has reconnected")
    return await state.hub.tunnels.open(carrier, running.job_id, running.attempt, target)


async def _first_message(ws: WebSocket) -> ExecTarget:
    try:
        text = await asyncio.wait_for(ws.receive_text(), FIRST_MESSAGE_TIMEOUT_S)
        return ExecTarget.model_validate_json(text)
    except (ValidationError, KeyError, TimeoutError) as exc:
        raise InvalidInput("the first message must be the command, as JSON: "
                           '{"argv": [...], "tty": false, "rows": 24, "cols": 80}',
                           field="exec") from exc


async def _relay(ws: WebSocket, stream: Stream) -> None:
    upward = asyncio.create_task(_from_client(ws, stream))
    try:
        while True:
            fd, data = await stream.read()
            if not data:
                break
            await ws.send_bytes(bytes([fd]) + data)
        closed = stream.closed
        if closed is not None and closed.error:
            await _send_json(ws, {"type": "error", "message": closed.error, "hint": None})
        else:
            await _send_json(ws, {"type": "exit",
                                  "code": closed.exit_code if closed is not None else None})
    except (WebSocketDisconnect, RuntimeError, StreamClosed):
        pass
    finally:
        upward.cancel()
        await asyncio.gather(upward, return_exceptions=True)


async def _from_client(ws: WebSocket, stream: Stream) -> None:
    with contextlib.suppress(WebSocketDisconnect, StreamClosed):
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                break
            if message.get("bytes") is not None:
                await stream.write(message["bytes"], 0)
            elif message.get("text") is not None:
                _control(stream, message["text"])
    get_state(ws).hub.tunnels.close(stream)  # the user went away: the command ends


def _control(stream: Stream, text: str) -> None:
    with contextlib.suppress(ValueError, TypeError, ValidationError):
        message: dict[str, Any] = json.loads(text)
        if message.get("type") == "resize":
            stream.send(StreamResize(stream=stream.id, rows=message["rows"],
                                     cols=message["cols"]))
        elif message.get("type") == "eof":
            stream.write_eof()


async def _send_json(ws: WebSocket, value: dict[str, Any]) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        await ws.send_text(json.dumps(value))


async def _close(ws: WebSocket, code: int = 1000) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        await ws.close(code)
