"""The I/O-free calls of tenancy (projects, tokens, secrets, the audit trail), sent by
``Client`` and ``AsyncClient`` like those of :mod:`bourse.sdk.core`."""

from __future__ import annotations

from urllib.parse import quote

from bourse.protocol.access import (
    AuditList,
    AuditVerdict,
    ProjectCreate,
    ProjectList,
    ProjectView,
    SecretList,
    SecretSet,
    SecretView,
    TokenCreate,
    TokenCreated,
    TokenList,
    TokenView,
)
from bourse.protocol.api import NodeTags, NodeView
from bourse.sdk.core import Call, model


def projects() -> Call[list[ProjectView]]:
    return Call("GET", "/projects", lambda r: model(ProjectList)(r).projects)


def create_project(name: str, required_tags: list[str]) -> Call[ProjectView]:
    body = ProjectCreate(name=name, required_tags=required_tags)
    return Call("POST", "/projects", model(ProjectView), json=body.model_dump(mode="json"))


def tokens() -> Call[list[TokenView]]:
    return Call("GET", "/tokens", lambda r: model(TokenList)(r).tokens)


def create_token(body: TokenCreate) -> Call[TokenCreated]:
    return Call("POST", "/tokens", model(TokenCreated), json=body.model_dump(mode="json"))


def revoke_token(token_id: str) -> Call[TokenView]:
    return Call("DELETE", f"/tokens/{quote(token_id, safe='')}", model(TokenView))


def secrets() -> Call[list[SecretView]]:
    return Call("GET", "/secrets", lambda r: model(SecretList)(r).secrets)


def set_secret(name: str, value: str) -> Call[SecretView]:
    """The value travels in the body, never in the URL (which proxies log)."""
    return Call("PUT", f"/secrets/{quote(name, safe='')}", model(SecretView),
                json=SecretSet(value=value).model_dump(mode="json"))


def delete_secret(name: str) -> Call[SecretView]:
    return Call("DELETE", f"/secrets/{quote(name, safe='')}", model(SecretView))


def audit(since: float | None, after: int, limit: int) -> Call[AuditList]:
    params: dict[str, str | int] = {"after": after, "limit": limit}
    if since is not None:
        params["since"] = f"{since:.6f}"
    return Call("GET", "/audit", model(AuditList), params=params)


def verify_audit() -> Call[AuditVerdict]:
    return Call("GET", "/audit/verify", model(AuditVerdict))


def set_node_tags(node_id: str, tags: list[str]) -> Call[NodeView]:
    return Call("PUT", f"/nodes/{quote(node_id, safe='')}/tags", model(NodeView),
                json=NodeTags(tags=tags).model_dump(mode="json"))
