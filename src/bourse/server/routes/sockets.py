"""Audit records of WebSocket sessions (agent sessions, `bourse exec`): the audit
middleware sees only HTTP requests, so socket routes record their own start and end. Also how
a socket is refused."""

from __future__ import annotations

import logging
from typing import Any

from starlette.websockets import WebSocket

from bourse.core.errors import BourseError, TooMany
from bourse.server.audit.middleware import actor_of, source_of
from bourse.server.errors import error_response
from bourse.server.routes.deps import get_state
from bourse.server.services import audit

log = logging.getLogger(__name__)
CLOSE_TRY_AGAIN = 1013
DENIAL = "websocket.http.response"  # the ASGI extension that answers a handshake over HTTP


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


async def refuse(ws: WebSocket, exc: BourseError, code: int) -> None:
    """Refuse a socket not accepted yet: a limit that frees up is answered as over HTTP (429
    with Retry-After) where the server can send an answer to a handshake; anything else, or
    without that, closes it with ``code`` (1013 for a limit)."""
    if isinstance(exc, TooMany) and DENIAL in ws.scope.get("extensions", {}):
        await ws.send_denial_response(error_response(exc))
        return
    await ws.close(code=refusal_code(exc, code), reason=exc.message[:120])


def refusal_code(exc: BourseError, default: int) -> int:
    """The close code of a WebSocket refused with ``exc``: 1013 (try again later) for a limit
    that frees up, else ``default``."""
    return CLOSE_TRY_AGAIN if isinstance(exc, TooMany) else default
