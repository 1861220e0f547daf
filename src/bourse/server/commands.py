"""Commands for agents, produced by services inside a transaction and sent after it commits
(no network call ever happens inside a database transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bourse.protocol.common import Wire


@dataclass(frozen=True)
class Command:
    node_id: str
    message: Wire


COMMANDS_INFO = "commands_after_commit"  # session.info: commands sent once it commits


def note_commands(info: dict[str, Any], commands: Sequence[Command]) -> None:
    """Commands decided deep inside a transaction, where nothing is returned to a caller
    that sends (a gang member's end stopping the others): ``Dispatch.after_commit`` sends
    them once the transaction has committed."""
    info.setdefault(COMMANDS_INFO, []).extend(commands)


def noted_commands(info: dict[str, Any]) -> list[Command]:
    found: list[Command] = info.pop(COMMANDS_INFO, [])
    return found
