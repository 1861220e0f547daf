"""``/api/v1/nodes`` and enrolment tokens."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from bourse import __version__
from bourse.core.errors import Forbidden
from bourse.protocol.api import (
    DrainResult,
    EnrollmentCreate,
    EnrollmentToken,
    NodeList,
    NodeTags,
    NodeView,
    ProviderReliabilityList,
    ReclaimRequest,
    ReclaimResult,
)
from bourse.protocol.common import ID_PATTERN
from bourse.server.errors import responses
from bourse.server.routes.deps import Admin, Provider, State, User
from bourse.server.services import nodes, projects, reclaim, tokens

router = APIRouter(prefix="/api/v1", tags=["nodes"])


@router.get("/nodes", responses=responses(401))
async def list_nodes(state: State, user: User) -> NodeList:
    async with state.db.read() as session:
        return NodeList(nodes=await nodes.list_nodes(session, user.scope,
                                                     set(state.hub.connections),
                                                     state.clock()))


@router.get("/providers", responses=responses(401))
async def list_providers(state: State, user: User) -> ProviderReliabilityList:
    """What the exchange measured of each provider's nodes together (those the caller sees):
    availability, interruptions, score, and the SLA they declared."""
    async with state.db.read() as session:
        return ProviderReliabilityList(providers=await nodes.provider_views(
            session, user.scope, state.clock()))


@router.get("/nodes/{node_id}", responses=responses(401, 404, 422))
async def show_node(node_id: Annotated[str, Path(pattern=ID_PATTERN, max_length=64)],
                    state: State, user: User) -> NodeView:
    async with state.db.read() as session:
        return await nodes.get_node(session, node_id, user.scope, set(state.hub.connections),
                                    state.clock())


@router.put("/nodes/{node_id}/tags", responses=responses(400, 401, 403, 404, 413, 422))
async def set_node_tags(node_id: Annotated[str, Path(pattern=ID_PATTERN, max_length=64)],
                        body: NodeTags, state: State, admin: Admin) -> NodeView:
    """Set a node's compliance tags (admins: they vouch for the machine). Projects that
    require a tag have their jobs placed only on nodes carrying it."""
    async with state.db.write() as session:
        await nodes.set_tags(session, node_id, body.tags, state.clock())
    async with state.db.read() as session:
        return await nodes.get_node(session, node_id, admin.scope, set(state.hub.connections))


@router.post("/nodes/{node_id}/reclaim", responses=responses(400, 401, 403, 404, 413, 422))
async def reclaim_node(node_id: Annotated[str, Path(pattern=ID_PATTERN, max_length=64)],
                       body: ReclaimRequest, state: State, _admin: Admin) -> ReclaimResult:
    """Give a node's jobs a preemption notice (admin only): they are retried elsewhere."""
    async with state.db.write() as session:
        result, commands = await reclaim.reclaim_node(session, node_id, body, state.clock())
    state.hub.send(commands)
    state.notifier.notify()
    state.scheduler.kick()
    return result


@router.post("/nodes/{node_id}/drain", responses=responses(401, 403, 404, 422))
async def drain_node(node_id: Annotated[str, Path(pattern=ID_PATTERN, max_length=64)],
                     state: State, owner: Provider) -> DrainResult:
    """Give a node no new work (its provider, or an admin); what runs there finishes.
    Idempotent: said again, it counts what still runs."""
    async with state.db.write() as session:
        result = await nodes.drain_node(session, node_id, owner.scope, state.clock())
    state.scheduler.kick()
    return result


@router.post("/enrollments", status_code=201, responses=responses(400, 401, 403, 404, 413, 422))
async def create_enrollment(body: EnrollmentCreate, state: State,
                            owner: Provider) -> EnrollmentToken:
    """A one-time token that enrols a node into the caller's project (an admin may name
    another)."""
    now = state.clock()
    expires_at = now + body.expires_in_s
    if body.project is not None and body.project != owner.project_id and not owner.admin:
        raise Forbidden("a provider enrols nodes into its own project only",
                        hint="leave out `project`")
    async with state.db.write() as session:
        project = await projects.get_project(session, body.project or owner.project_id,
                                             owner.scope)
        secret = await tokens.create_token(session, "enroll", now, name=body.name,
                                           expires_at=expires_at, project_id=project.id,
                                           price=body.price_per_hour)
    return EnrollmentToken(token=secret, expires_at=expires_at, agent_version=__version__)
