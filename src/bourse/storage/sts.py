"""Job-scoped credentials on AWS: STS AssumeRole of a role that can reach the exchange's
buckets, narrowed per attempt by an inline session policy (`scope_policy`); the effective
permissions are the intersection of the role's and the session policy.

STS credentials expire by themselves (15 min to the role's maximum session duration), so
`sweep` has nothing to delete. They cannot be deleted either: `revoke` adds the attempt's
session names to a Deny statement in an inline policy of the role (matching ``aws:userid``,
which is ``<role id>:<session name>``), grouped by the hour of revocation and pruned once
every session that could match has expired.

Not exercised against AWS here (no access): tested with moto and botocore's Stubber.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from bourse.storage.credentials import (
    DEFAULT_TTL,
    CredentialIssuer,
    Prefixes,
    Scope,
    ScopedCredentials,
    attempt_prefix,
    identity_name,
    scope_policy,
)
from bourse.storage.errors import CredentialError, aws_reason
from bourse.storage.redact import quiet_botocore
from bourse.storage.settings import AccessKey

if TYPE_CHECKING:
    from types_boto3_iam import IAMClient
    from types_boto3_sts import STSClient

log = logging.getLogger(__name__)
REVOKED_POLICY = "bourse-revoked-sessions"
MIN_TTL, MAX_TTL = timedelta(minutes=15), timedelta(hours=12)
POLICY_LIMIT = 10_240  # characters, all inline policies of a role together


def clamp_ttl(ttl: timedelta) -> int:
    return int(min(max(ttl, MIN_TTL), MAX_TTL).total_seconds())


def revocation_policy(existing: dict[str, Any] | None, pattern: str, now: datetime,
                      max_session: timedelta = MAX_TTL) -> dict[str, Any]:
    """``existing`` with ``pattern`` (an ``aws:userid`` glob) denied, in the statement of the
    current hour; statements older than ``max_session`` are dropped (nothing they name can
    still be valid), and so are the oldest ones while the document exceeds the size limit."""
    hour = int(now.timestamp()) // 3600 * 3600
    cutoff = (now - max_session - timedelta(hours=1)).timestamp()
    statements = {s["Sid"]: s for s in (existing or {}).get("Statement", [])
                  if s.get("Sid", "").startswith("R") and int(s["Sid"][1:]) >= cutoff}
    sid = f"R{hour}"
    current = statements.setdefault(sid, {
        "Sid": sid, "Effect": "Deny", "Action": "*", "Resource": "*",
        "Condition": {"StringLike": {"aws:userid": []}}})
    patterns = current["Condition"]["StringLike"]["aws:userid"]
    if pattern not in patterns:
        patterns.append(pattern)
    ordered = [statements[k] for k in sorted(statements, key=lambda s: int(s[1:]))]
    while len(ordered) > 1 and len(json.dumps({"Statement": ordered})) > POLICY_LIMIT - 100:
        dropped = ordered.pop(0)
        log.warning("revocation list full: dropping revocations of hour %s", dropped["Sid"])
    return {"Version": "2012-10-17", "Statement": ordered}


class StsIssuer(CredentialIssuer):
    """Assumes ``role_arn`` for each attempt. ``sts``/``iam`` clients may be given (tests);
    otherwise they come from boto3's default credential chain."""

    def __init__(self, role_arn: str, *, region: str | None = None, partition: str = "aws",
                 sts: STSClient | None = None, iam: IAMClient | None = None) -> None:
        import boto3

        quiet_botocore()
        self.role_arn, self.partition = role_arn, partition
        self.role_name = role_arn.rsplit("/", 1)[-1]
        self._sts = sts or boto3.client("sts", region_name=region)
        self._iam = iam or boto3.client("iam", region_name=region)
        self._lock = asyncio.Lock()

    async def issue(self, job_id: str, attempt: int, read_prefixes: Prefixes,
                    write_prefixes: Prefixes, ttl: timedelta = DEFAULT_TTL, *,
                    now: datetime | None = None) -> ScopedCredentials:
        scope = Scope.of(read_prefixes, write_prefixes)
        return await self._assume(job_id, attempt, scope, ttl, now or datetime.now(UTC))

    async def renew(self, credentials: ScopedCredentials, ttl: timedelta = DEFAULT_TTL, *,
                    now: datetime | None = None) -> ScopedCredentials:
        return await self._assume(credentials.job_id, credentials.attempt, credentials.scope,
                                  ttl, now or datetime.now(UTC))

    async def _assume(self, job_id: str, attempt: int, scope: Scope, ttl: timedelta,
                      now: datetime) -> ScopedCredentials:
        seconds = clamp_ttl(ttl)
        name = identity_name(job_id, attempt, now + timedelta(seconds=seconds))
        policy = json.dumps(scope_policy(scope, partition=self.partition),
                            separators=(",", ":"))
        try:
            response = await asyncio.to_thread(
                self._sts.assume_role, RoleArn=self.role_arn, RoleSessionName=name,
                DurationSeconds=seconds, Policy=policy)
        except Exception as exc:
            raise CredentialError(f"STS AssumeRole of {self.role_arn} failed: {aws_reason(exc)}",
                                  hint="check the role's trust policy and the caller's "
                                       "sts:AssumeRole permission") from None
        c = response["Credentials"]
        key = AccessKey(c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"])
        log.info("assumed %s as %s for job %s attempt %d until %s", self.role_arn, name,
                 job_id, attempt, c["Expiration"].isoformat())
        return ScopedCredentials(job_id, attempt, name, key, c["Expiration"], scope)

    async def revoke(self, job_id: str, attempt: int) -> int:
        pattern = f"*:{attempt_prefix(job_id, attempt)}*"
        async with self._lock:
            await asyncio.to_thread(self._deny, pattern, datetime.now(UTC))
        log.info("revoked sessions of job %s attempt %d", job_id, attempt)
        return 1

    async def sweep(self, now: datetime | None = None) -> int:
        return 0  # STS credentials expire on their own

    def _deny(self, pattern: str, now: datetime) -> None:
        try:
            document: Any = self._iam.get_role_policy(
                RoleName=self.role_name, PolicyName=REVOKED_POLICY)["PolicyDocument"]
            existing = json.loads(document) if isinstance(document, str) else document
        except self._iam.exceptions.NoSuchEntityException:
            existing = None
        policy = revocation_policy(existing, pattern, now)
        try:
            self._iam.put_role_policy(RoleName=self.role_name, PolicyName=REVOKED_POLICY,
                                      PolicyDocument=json.dumps(policy))
        except Exception as exc:
            raise CredentialError(f"could not revoke sessions on {self.role_arn}: "
                                  f"{aws_reason(exc)}", hint="the exchange needs "
                                  "iam:PutRolePolicy on its own role") from None

