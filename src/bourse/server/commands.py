"""Commands for agents, produced by services inside a transaction and sent after it commits
(no network call ever happens inside a database transaction)."""

from __future__ import annotations

from dataclasses import dataclass

from bourse.protocol.common import Wire


@dataclass(frozen=True)
class Command:
    node_id: str
    message: Wire
