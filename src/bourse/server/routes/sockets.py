"""Audit records of WebSocket sessions (agent sessions, `bourse exec`): the audit
middleware sees only HTTP requests, so socket routes record their own start and end."""

from __future__ import annotations

import logging
from typing import Any

from starlette.websockets import WebSocket

from bourse.server.auditing import actor_of, source_of
from bourse.server.routes.deps import get_state
from bourse.server.services import audit

log = logging.getLogger(__name__)


async def record_socket(ws: WebSocket, action: str, outcome: str,
                        params: dict[str, Any] | None = None) -> None:
    """Append one record for this socket; a failure is logged loudly and the session goes
    on."""
    state = get_state(ws)
    actor, kind, project = actor_of(ws.scope)
    entry = audit.Entry(time=state.clock(), actor=actor, actor_kind=kind, project_id=project,
                        source=source_of(ws.scope), action=action, target=ws.url.path,
                        outcome=outcome, params=audit.masked(params or {}))
    try:
        await state.record_audit(entry)
    except Exception:
        log.exception("could not write the audit record of a %s (%s)", action, outcome)
