"""Job-scoped credentials on SeaweedFS: one IAM user per attempt, through the IAM API that
SeaweedFS serves on its S3 port (``weed mini -s3.iam.readOnly=false``).

Each user gets one access key and one inline policy (`scope_policy`), which SeaweedFS 4.48
enforces per prefix, listing included. Revocation deletes the user; it takes effect on the next
request. SeaweedFS access keys have no expiry of their own, so the expiry lives in the user
name (`identity_name`) and `sweep` deletes users past it; renewal renames the user, keeping the
key the job already holds.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from bourse.storage.credentials import (
    DEFAULT_TTL,
    IDENTITY_PREFIX,
    CredentialIssuer,
    Prefixes,
    Scope,
    ScopedCredentials,
    attempt_prefix,
    identity_expiry,
    identity_name,
    scope_policy,
)
from bourse.storage.errors import CredentialError, aws_reason
from bourse.storage.redact import quiet_botocore
from bourse.storage.settings import AccessKey

if TYPE_CHECKING:
    from types_boto3_iam import IAMClient

log = logging.getLogger(__name__)
POLICY_NAME = "bourse-scope"


def iam_client(endpoint: str, root: AccessKey, region: str = "us-east-1") -> IAMClient:
    import boto3
    from botocore.config import Config

    quiet_botocore()
    return boto3.client("iam", endpoint_url=endpoint, region_name=region,
                        aws_access_key_id=root.access_key_id,
                        aws_secret_access_key=root.secret_access_key,
                        config=Config(retries={"max_attempts": 3, "mode": "standard"}))


class SeaweedIssuer(CredentialIssuer):
    """Issues credentials on the SeaweedFS at ``endpoint``, acting as its root identity."""

    def __init__(self, endpoint: str, root: AccessKey) -> None:
        self._iam = iam_client(endpoint, root)
        self._lock = asyncio.Lock()  # boto3 clients are thread-safe; this orders IAM writes

    async def issue(self, job_id: str, attempt: int, read_prefixes: Prefixes,
                    write_prefixes: Prefixes, ttl: timedelta = DEFAULT_TTL, *,
                    now: datetime | None = None) -> ScopedCredentials:
        scope = Scope.of(read_prefixes, write_prefixes)
        policy = json.dumps(scope_policy(scope))
        expires = (now or datetime.now(UTC)) + ttl
        name = identity_name(job_id, attempt, expires)
        async with self._lock:
            key = await asyncio.to_thread(self._create, name, policy)
        log.info("issued credentials %s (key %s) for job %s attempt %d until %s", name,
                 key.access_key_id, job_id, attempt, expires.isoformat())
        return ScopedCredentials(job_id, attempt, name, key, expires, scope)

    async def renew(self, credentials: ScopedCredentials, ttl: timedelta = DEFAULT_TTL, *,
                    now: datetime | None = None) -> ScopedCredentials:
        expires = (now or datetime.now(UTC)) + ttl
        name = identity_name(credentials.job_id, credentials.attempt, expires)
        async with self._lock:
            try:
                await asyncio.to_thread(self._iam.update_user, UserName=credentials.identity,
                                        NewUserName=name)
            except Exception as exc:
                raise CredentialError(f"could not renew credentials {credentials.identity}: "
                                      f"{aws_reason(exc)}", hint="issue new ones") from None
        return replace(credentials, identity=name, expires_at=expires)

    async def revoke(self, job_id: str, attempt: int) -> int:
        prefix = attempt_prefix(job_id, attempt)
        async with self._lock:
            names = [n for n in await asyncio.to_thread(self._users) if n.startswith(prefix)]
            for name in names:
                await asyncio.to_thread(self._delete, name)
        log.info("revoked %d credential(s) of job %s attempt %d", len(names), job_id, attempt)
        return len(names)

    async def sweep(self, now: datetime | None = None) -> int:
        now = now or datetime.now(UTC)
        async with self._lock:
            names = await asyncio.to_thread(self._users)
            expired = [n for n in names if (e := identity_expiry(n)) is not None and e <= now]
            for name in expired:
                await asyncio.to_thread(self._delete, name)
        if expired:
            log.info("swept %d expired credential(s)", len(expired))
        return len(expired)

    async def adopt(self, job_id: str, attempt: int, scope: Scope) -> ScopedCredentials | None:
        """The attempt's user (the latest, if a restart issued twice); its key id only."""
        prefix = attempt_prefix(job_id, attempt)
        async with self._lock:
            names = [n for n in await asyncio.to_thread(self._users) if n.startswith(prefix)]
        dated = [(e, n) for n in names if (e := identity_expiry(n)) is not None]
        if not dated:
            return None
        expires, name = max(dated)
        key_id = await asyncio.to_thread(self._key_id, name)
        return ScopedCredentials(job_id, attempt, name, AccessKey(key_id, ""), expires, scope)

    # -- blocking IAM calls (run in a worker thread) ---------------------------------------

    def _create(self, name: str, policy: str) -> AccessKey:
        try:
            self._iam.create_user(UserName=name)
            # the policy before the key: a key must never exist with the wrong permissions
            self._iam.put_user_policy(UserName=name, PolicyName=POLICY_NAME,
                                      PolicyDocument=policy)
            created = self._iam.create_access_key(UserName=name)["AccessKey"]
        except Exception as exc:
            self._delete(name)
            raise CredentialError(f"SeaweedFS refused to create credentials {name}: "
                                  f"{aws_reason(exc)}") from None
        return AccessKey(created["AccessKeyId"], created["SecretAccessKey"])

    def _key_id(self, name: str) -> str:
        try:
            keys = self._iam.list_access_keys(UserName=name)["AccessKeyMetadata"]
        except Exception as exc:
            log.warning("could not list the keys of %s: %s", name, aws_reason(exc))
            return ""
        return str(keys[0]["AccessKeyId"]) if keys else ""

    def _users(self) -> list[str]:
        names: list[str] = []
        for page in self._iam.get_paginator("list_users").paginate():
            names += [u["UserName"] for u in page["Users"]
                      if u["UserName"].startswith(IDENTITY_PREFIX + ".")]
        return names

    def _delete(self, name: str) -> None:
        """Keys first (that is what cuts access), then policies, then the user; tolerant of
        parts already gone."""
        steps: list[tuple[Any, dict[str, str]]] = []
        try:
            keys = self._iam.list_access_keys(UserName=name)["AccessKeyMetadata"]
            policies = self._iam.list_user_policies(UserName=name)["PolicyNames"]
        except self._iam.exceptions.NoSuchEntityException:
            return
        except Exception as exc:
            log.warning("could not inspect credentials %s: %s", name, aws_reason(exc))
            keys, policies = [], [POLICY_NAME]
        steps += [(self._iam.delete_access_key, {"UserName": name,
                                                 "AccessKeyId": k["AccessKeyId"]}) for k in keys]
        steps += [(self._iam.delete_user_policy, {"UserName": name, "PolicyName": p})
                  for p in policies]
        steps.append((self._iam.delete_user, {"UserName": name}))
        for call, arguments in steps:
            try:
                call(**arguments)
            except self._iam.exceptions.NoSuchEntityException:
                continue

