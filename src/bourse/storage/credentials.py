"""Job-scoped credentials: the seam between the coordinator and whatever issues store keys.

A job attempt never sees the store's root key. The coordinator asks a `CredentialIssuer` for a
key that can read the attempt's inputs and write its outputs and checkpoint prefix, and that
expires; it renews the key while the attempt runs and revokes it when the attempt ends.
Implementations: `SeaweedIssuer` (embedded SeaweedFS, IAM users), `StsIssuer` (AWS, STS
AssumeRole with a session policy) and `MemoryIssuer` (tests). All three scope access with the
same IAM policy document, built here by `scope_policy`.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import string
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bourse.core.uri import StoreURI, parse_uri
from bourse.storage.errors import CredentialError
from bourse.storage.settings import AccessKey

DEFAULT_TTL = timedelta(hours=2)
IDENTITY_PREFIX = "bourse"
_SAFE_JOB = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
Prefixes = Iterable[str | StoreURI]


@dataclass(frozen=True, slots=True)
class Scope:
    """What an attempt may touch: read ``read``; read, write and delete below ``write``."""

    read: tuple[StoreURI, ...] = ()
    write: tuple[StoreURI, ...] = ()

    @classmethod
    def of(cls, read: Iterable[str | StoreURI] = (),
           write: Iterable[str | StoreURI] = ()) -> Scope:
        return cls(tuple(parse_uri(u, field="read") for u in read),
                   tuple(parse_uri(u, field="write") for u in write))


@dataclass(frozen=True, slots=True)
class ScopedCredentials:
    """Credentials for one job attempt. ``repr`` shows the key id, never the secret."""

    job_id: str
    attempt: int
    identity: str  # the SeaweedFS user or the STS role session name
    access_key: AccessKey
    expires_at: datetime
    scope: Scope

    def env(self) -> dict[str, str]:
        return self.access_key.env()


class CredentialIssuer(ABC):
    @abstractmethod
    async def issue(self, job_id: str, attempt: int, read_prefixes: Prefixes,
                    write_prefixes: Prefixes, ttl: timedelta = DEFAULT_TTL, *,
                    now: datetime | None = None) -> ScopedCredentials:
        """New credentials that can read ``read_prefixes`` and read, write and delete below
        ``write_prefixes``, expiring ``ttl`` after ``now``."""

    @abstractmethod
    async def renew(self, credentials: ScopedCredentials, ttl: timedelta = DEFAULT_TTL, *,
                    now: datetime | None = None) -> ScopedCredentials:
        """Credentials for the same attempt and scope valid until ``now + ttl``. SeaweedFS
        extends the same key; STS returns a new one (the agent must hand it to the job)."""

    @abstractmethod
    async def revoke(self, job_id: str, attempt: int) -> int:
        """Make every credential of the attempt stop working now; returns how many."""

    @abstractmethod
    async def sweep(self, now: datetime | None = None) -> int:
        """Delete credentials past their expiry; returns how many (one-shot step of the
        coordinator's sweeper loop)."""

    async def adopt(self, job_id: str, attempt: int, scope: Scope) -> ScopedCredentials | None:
        """The attempt's live credentials as issued before a coordinator restart, *without
        their secret* (``secret_access_key`` empty): enough to renew and revoke them, not to
        hand them out again. None when there are none, or when the issuer cannot renew in
        place (STS: a renewal is a new key, which only the agent could pass on)."""
        return None


# -- naming: the expiry travels in the identity's name, so a sweeper needs no other state ------

def job_key(job_id: str) -> str:
    return job_id if _SAFE_JOB.match(job_id) else "h" + hashlib.sha256(
        job_id.encode()).hexdigest()[:24]


def identity_name(job_id: str, attempt: int, expires_at: datetime) -> str:
    """``bourse.<job>.<attempt>.<expiry epoch>``: at most 64 characters of ``[A-Za-z0-9._-]``,
    valid as an IAM user name and as an STS role session name."""
    return f"{IDENTITY_PREFIX}.{job_key(job_id)}.{attempt}.{int(expires_at.timestamp())}"


def attempt_prefix(job_id: str, attempt: int) -> str:
    return f"{IDENTITY_PREFIX}.{job_key(job_id)}.{attempt}."


def identity_expiry(name: str) -> datetime | None:
    """The expiry encoded in a name made by `identity_name`; None for other names."""
    parts = name.split(".")
    if len(parts) != 4 or parts[0] != IDENTITY_PREFIX or not parts[3].isdigit():
        return None
    return datetime.fromtimestamp(int(parts[3]), UTC)


# -- the policy ----------------------------------------------------------------------------------

def _objects(uri: StoreURI, partition: str) -> list[str]:
    base = f"arn:{partition}:s3:::{uri.bucket}/"
    if uri.is_prefix:
        return [f"{base}{uri.key}*"]
    return [f"{base}{uri.key}", f"{base}{uri.key}/*"]


def _list_prefixes(uri: StoreURI) -> list[str]:
    return [f"{uri.key}*"] if uri.is_prefix else [uri.key, f"{uri.key}/*"]


def _list_statements(scope: Scope, partition: str) -> list[dict[str, Any]]:
    by_bucket: dict[str, list[str]] = {}
    for uri in (*scope.read, *scope.write):
        by_bucket.setdefault(uri.bucket, []).extend(_list_prefixes(uri))
    statements = []
    for bucket, prefixes in by_bucket.items():
        statement: dict[str, Any] = {"Effect": "Allow", "Action": ["s3:ListBucket"],
                                     "Resource": [f"arn:{partition}:s3:::{bucket}"]}
        if "*" not in prefixes:  # a whole bucket needs no condition
            statement["Condition"] = {"StringLike": {"s3:prefix": sorted(set(prefixes))}}
        statements.append(statement)
    return statements


def scope_policy(scope: Scope, *, partition: str = "aws") -> dict[str, Any]:
    """The IAM policy document granting exactly ``scope`` (S3 only). The action set is the
    one SeaweedFS 4.48 accepts (it rejects e.g. ``s3:ListMultipartUploadParts``); on AWS,
    ``s3:PutObject`` also covers UploadPart and CompleteMultipartUpload."""
    for uri in (*scope.read, *scope.write):
        if uri.scheme != "s3":
            raise CredentialError(f"cannot scope credentials to {uri}: only s3:// is supported",
                                  hint="gs:// and az:// inputs need credentials of their own")
    statements: list[dict[str, Any]] = []
    if scope.read:
        statements.append({"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [
            r for uri in scope.read for r in _objects(uri, partition)]})
    if scope.write:
        statements.append({"Effect": "Allow", "Action": [
            "s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"],
            "Resource": [r for uri in scope.write for r in _objects(uri, partition)]})
    statements += _list_statements(scope, partition)
    if not statements:
        raise CredentialError("a credential scope must name at least one prefix")
    return {"Version": "2012-10-17", "Statement": statements}


def random_access_key() -> AccessKey:
    alphabet = string.ascii_uppercase + string.digits
    return AccessKey("BJ" + "".join(secrets.choice(alphabet) for _ in range(18)),
                     secrets.token_urlsafe(30))


class MemoryIssuer(CredentialIssuer):
    """An issuer for tests of the coordinator and agent: it records what it issued and answers
    `allows` the way the real stores enforce the policy."""

    def __init__(self) -> None:
        self.active: dict[str, ScopedCredentials] = {}  # by access key id

    async def issue(self, job_id: str, attempt: int, read_prefixes: Prefixes,
                    write_prefixes: Prefixes, ttl: timedelta = DEFAULT_TTL, *,
                    now: datetime | None = None) -> ScopedCredentials:
        scope = Scope.of(read_prefixes, write_prefixes)
        scope_policy(scope)  # same validation as the real issuers
        expires = (now or datetime.now(UTC)) + ttl
        credentials = ScopedCredentials(job_id, attempt, identity_name(job_id, attempt, expires),
                                        random_access_key(), expires, scope)
        self.active[credentials.access_key.access_key_id] = credentials
        return credentials

    async def renew(self, credentials: ScopedCredentials, ttl: timedelta = DEFAULT_TTL, *,
                    now: datetime | None = None) -> ScopedCredentials:
        if credentials.access_key.access_key_id not in self.active:
            raise CredentialError(f"credentials {credentials.identity} were revoked")
        expires = (now or datetime.now(UTC)) + ttl
        renewed = replace(credentials, expires_at=expires, identity=identity_name(
            credentials.job_id, credentials.attempt, expires))
        self.active[credentials.access_key.access_key_id] = renewed
        return renewed

    async def revoke(self, job_id: str, attempt: int) -> int:
        doomed = [k for k, c in self.active.items() if (c.job_id, c.attempt) == (job_id, attempt)]
        for key in doomed:
            del self.active[key]
        return len(doomed)

    async def sweep(self, now: datetime | None = None) -> int:
        now = now or datetime.now(UTC)
        doomed = [k for k, c in self.active.items() if c.expires_at <= now]
        for key in doomed:
            del self.active[key]
        return len(doomed)

    async def adopt(self, job_id: str, attempt: int, scope: Scope) -> ScopedCredentials | None:
        found = [c for c in self.active.values() if (c.job_id, c.attempt) == (job_id, attempt)]
        if not found:
            return None
        latest = max(found, key=lambda c: c.expires_at)
        return replace(latest, access_key=AccessKey(latest.access_key.access_key_id, ""))

    def allows(self, access_key_id: str, action: str, uri: str | StoreURI, *,
               now: datetime | None = None) -> bool:
        """Whether ``action`` (``"read"`` or ``"write"``) on ``uri`` is allowed."""
        credentials = self.active.get(access_key_id)
        if credentials is None or credentials.expires_at <= (now or datetime.now(UTC)):
            return False
        target = parse_uri(uri)
        grants = credentials.scope.write if action == "write" else (
            *credentials.scope.read, *credentials.scope.write)
        return any(_covers(grant, target) for grant in grants)


def _covers(grant: StoreURI, target: StoreURI) -> bool:
    if grant.bucket != target.bucket:
        return False
    if grant.is_prefix:
        return target.key.startswith(grant.key)
    return target.key == grant.key or target.key.startswith(grant.key + "/")
