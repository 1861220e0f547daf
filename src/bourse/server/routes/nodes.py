"""``/api/v1/nodes`` and enrolment tokens."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from bourse.protocol.api import (
    EnrollmentCreate,
    EnrollmentToken,
    NodeList,
    NodeView,
    ReclaimRequest,
    ReclaimResult,
)
from bourse.protocol.common import ID_PATTERN
from bourse.server.routes.deps import Admin, State, User
from bourse.server.services import nodes, reclaim, tokens

router = APIRouter(prefix="/api/v1", tags=["nodes"])


@router.get("/nodes")
async def list_nodes(state: State, _user: User) -> NodeList:
    async with state.db.read() as session:
        return NodeList(nodes=await nodes.list_nodes(session, set(state.hub.connections)))


@router.get("/nodes/{node_id}")
async def show_node(node_id: Annotated[str, Path(pattern=ID_PATTERN, max_length=64)],
                    state: State, _user: User) -> NodeView:
    async with state.db.read() as session:
        return await nodes.get_node(session, node_id, set(state.hub.connections))


@router.post("/nodes/{node_id}/reclaim")
async def reclaim_node(node_id: Annotated[str, Path(pattern=ID_PATTERN, max_length=64)],
                       body: ReclaimRequest, state: State, _admin: Admin) -> ReclaimResult:
    """Give a node's jobs a preemption notice (admin only): they are retried elsewhere."""
    async with state.db.write() as session:
        result, commands = await reclaim.reclaim_node(session, node_id, body, state.clock())
    state.hub.send(commands)
    state.notifier.notify()
    state.scheduler.kick()
    return result


@router.post("/enrollments", status_code=201)
async def create_enrollment(body: EnrollmentCreate, state: State, _admin: Admin) -> EnrollmentToken:
    now = state.clock()
    expires_at = now + body.expires_in_s
    async with state.db.write() as session:
        secret = await tokens.create_token(session, "enroll", now, name=body.name,
                                           expires_at=expires_at)
    return EnrollmentToken(token=secret, expires_at=expires_at)
