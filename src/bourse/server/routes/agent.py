"""The agent side: enrolment with a one-time token, and the agent WebSocket."""

from __future__ import annotations

from fastapi import APIRouter, Request, WebSocket

from bourse.core.errors import BourseError
from bourse.protocol.api import EnrollRequest, EnrollResponse
from bourse.server.agents.socket import SocketChannel
from bourse.server.errors import responses
from bourse.server.routes.deps import State, bearer, get_state, principal_of
from bourse.server.routes.sockets import record_socket
from bourse.server.services import tokens

router = APIRouter(prefix="/api/v1/agent", tags=["agent"])
CLOSE_UNAUTHORIZED = 4401


@router.post("/enroll", status_code=201, responses=responses(400, 401, 413, 422))
async def enroll(body: EnrollRequest, request: Request, state: State) -> EnrollResponse:
    async with state.db.write() as session:
        node_id, credential = await tokens.enroll_node(
            session, bearer(request) or "", body.name, state.config.keep_alive_s, state.clock())
    return EnrollResponse(node_id=node_id, credential=credential)


@router.websocket("/ws")
async def agent_socket(ws: WebSocket) -> None:
    """One agent session; its start and end (or its refusal) go to the audit trail."""
    try:
        principal = await principal_of(ws, "node")
    except BourseError as exc:
        await _audit(ws, f"refused: {exc.message}")
        await ws.close(code=CLOSE_UNAUTHORIZED, reason=exc.message[:120])
        return
    assert principal.node_id is not None
    await _audit(ws, "connected")
    await ws.accept()
    try:
        await get_state(ws).hub.serve(SocketChannel(ws), principal.node_id,
                                      peer=ws.client.host if ws.client else None)
    finally:
        await _audit(ws, "ended")


async def _audit(ws: WebSocket, outcome: str) -> None:
    await record_socket(ws, "agent session", outcome)
