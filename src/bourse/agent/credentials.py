"""The node credential: obtained once with a one-time enrolment token, kept in the work dir."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import httpx

from bourse.core.errors import BourseError, InvalidInput


class EnrolmentFailed(BourseError):
    exit_code = 2


@dataclass(frozen=True)
class NodeCredential:
    server: str
    node_id: str
    credential: str


def credential_path(work_dir: Path) -> Path:
    return work_dir / "node.json"


def load(work_dir: Path) -> NodeCredential | None:
    path = credential_path(work_dir)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return NodeCredential(data["server"], data["node_id"], data["credential"])


def save(work_dir: Path, cred: NodeCredential) -> None:
    path = credential_path(work_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"server": cred.server, "node_id": cred.node_id,
                   "credential": cred.credential}, handle)
    os.replace(tmp, path)


def enroll(server: str, token: str, name: str, work_dir: Path) -> NodeCredential:
    """Spend the enrolment token; store and return the node credential."""
    try:
        response = httpx.post(f"{server}/api/v1/agent/enroll", json={"name": name},
                              headers={"Authorization": f"Bearer {token}"}, timeout=30)
    except httpx.HTTPError as exc:
        raise EnrolmentFailed(f"cannot reach the exchange at {server}: {exc}") from exc
    if response.status_code != 201:
        detail = response.json().get("error") if response.headers.get(
            "content-type", "").startswith("application/json") else response.text[:200]
        raise EnrolmentFailed(f"enrolment refused ({response.status_code}): {detail}",
                              hint="create a new token with `bourse nodes enroll`")
    body = response.json()
    cred = NodeCredential(server, body["node_id"], body["credential"])
    save(work_dir, cred)
    return cred


def ensure(server: str, token: str | None, name: str, work_dir: Path) -> NodeCredential:
    """The stored credential; a new one when a token is given for a different exchange.

    Without a token, a credential stored for another URL is kept and pointed at the new one:
    the exchange may have moved (a new port, a new address); if it is really another
    exchange, it refuses the credential and the agent says so.
    """
    cred = load(work_dir)
    if cred is not None and (cred.server == server or not token):
        if cred.server != server:
            cred = NodeCredential(server, cred.node_id, cred.credential)
            save(work_dir, cred)
        return cred
    if not token:
        raise InvalidInput(f"this node is not enrolled with {server}", field="--token",
                           hint="pass --token with an enrolment token from "
                                "`bourse nodes enroll`")
    return enroll(server, token, name, work_dir)
