"""Who may see what: every read of a project's rows goes through a ``Scope``.

A scope is the caller's project, or every project for an admin. ``Scope.filter`` narrows a
query to the rows the caller may see; ``Scope.sees`` answers for one row. A row of another
project is reported as missing (404), never as forbidden, so that its existence is not
revealed either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import InstrumentedAttribute

ROLES = ("admin", "member", "provider")
Q = TypeVar("Q", bound=Select[*tuple[Any, ...]])


@dataclass(frozen=True)
class Scope:
    project_id: str | None  # None: every project (an admin)

    @property
    def everything(self) -> bool:
        return self.project_id is None

    def sees(self, project_id: str | None) -> bool:
        return self.project_id is None or self.project_id == project_id

    def filter(self, query: Q, column: InstrumentedAttribute[Any]) -> Q:
        return query if self.project_id is None else query.where(column == self.project_id)


ALL = Scope(None)  # the coordinator's own reads (scheduler, hub), and admins
