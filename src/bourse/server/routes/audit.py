"""``/api/v1/audit``: the audit trail (a project's own rows; every row for an admin) and its
verification (admins)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from bourse.protocol.access import AuditList, AuditVerdict
from bourse.server import openapi
from bourse.server.errors import responses
from bourse.server.routes.deps import Admin, State, User
from bourse.server.services import audit

router = APIRouter(prefix="/api/v1/audit", tags=["audit"])
MAX_ID = 2**63 - 1


@router.get("", responses=responses(401, 422))
async def list_records(state: State, user: User,
                       since: Annotated[float | None, Query(ge=0, le=1e11)] = None,
                       after: Annotated[int, Query(ge=0, le=MAX_ID,
                                                   description=openapi.AFTER_CURSOR)] = 0,
                       limit: Annotated[int, Query(ge=1, le=10000)] = 1000) -> AuditList:
    """Records after the cursor ``after`` (and at or after the time ``since``), oldest
    first."""
    async with state.db.read() as session:
        rows = await audit.list_records(session, user.scope, since, after, limit)
    return AuditList(records=[audit.view(r) for r in rows],
                     cursor=rows[-1].id if rows else after)


@router.get("/verify", responses=responses(401, 403))
async def verify(state: State, _admin: Admin) -> AuditVerdict:
    """Recompute the hash chain: an edited, deleted or inserted row is reported."""
    async with state.db.read() as session:
        return await audit.verify_chain(session, state.audit_key, state.audit_writer.seal)
