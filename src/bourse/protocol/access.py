"""REST bodies of tenancy: projects, API tokens, secrets and the audit trail."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from bourse.protocol.common import Wire

PROJECT_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
MAX_TOKEN_LIFETIME_S = 5 * 365 * 24 * 3600.0  # five years
TAG_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,31}$"
SECRET_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
Role = Literal["admin", "member", "provider"]
MAX_SECRET_BYTES = 64 * 1024


class ProjectCreate(Wire):
    name: str = Field(pattern=PROJECT_PATTERN)
    required_tags: list[str] = Field(default_factory=list, max_length=16)


class ProjectView(Wire):
    name: str
    required_tags: list[str] = Field(default_factory=list)
    created_at: float


class ProjectList(Wire):
    projects: list[ProjectView]


class TokenCreate(Wire):
    project: str = Field(default="default", pattern=PROJECT_PATTERN)
    role: Role = "member"
    name: str | None = Field(default=None, max_length=128, pattern=r"^[^\x00]*$")
    expires_in_s: float | None = Field(default=None, gt=0, le=MAX_TOKEN_LIFETIME_S,
                                       strict=True)  # `true` is not one second


class TokenView(Wire):
    """A token as listed: never its secret, never its hash."""

    id: str
    name: str | None = None
    project: str
    role: str
    created_at: float
    expires_at: float | None = None
    revoked_at: float | None = None


class TokenCreated(TokenView):
    token: str  # shown once: only its SHA-256 is kept


class TokenList(Wire):
    tokens: list[TokenView]


class SecretSet(Wire):
    value: str = Field(min_length=1, max_length=MAX_SECRET_BYTES, pattern=r"^[^\x00]*$")


class SecretView(Wire):
    """A secret as listed: its name and times, never its value."""

    name: str
    created_at: float
    updated_at: float


class SecretList(Wire):
    secrets: list[SecretView]


class AuditView(Wire):
    id: int
    time: float
    actor: str
    actor_kind: str
    project: str | None = None
    source: str
    action: str
    target: str
    params: dict[str, Any] = Field(default_factory=dict)
    outcome: str


class AuditList(Wire):
    records: list[AuditView]
    cursor: int = Field(description="Pass back as `after` for the next page.")


class AuditVerdict(Wire):
    ok: bool
    checked: int
    problems: list[str] = Field(default_factory=list)
    # the row the coordinator's seal vouches for (None: no seal could be read, or an older
    # coordinator): records up to it cannot be removed from the end unseen
    sealed: int | None = None
