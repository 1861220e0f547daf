"""Credential scoping (pure), the in-memory issuer, and the AWS STS issuer against moto and
botocore's Stubber (AWS itself cannot be reached from here)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from bourse.storage import CredentialError, MemoryIssuer, Scope, StsIssuer, scope_policy
from bourse.storage.credentials import identity_expiry, identity_name, job_key
from bourse.storage.redact import redact
from bourse.storage.sts import revocation_policy

pytestmark = pytest.mark.anyio
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_scope_policy_grants_exactly_the_prefixes() -> None:
    policy = scope_policy(Scope.of(["s3://datasets/digits/", "s3://models/m.pt"],
                                   ["s3://bourse/jobs/j1/"]))
    read, write, *lists = policy["Statement"]
    assert read == {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [
        "arn:aws:s3:::datasets/digits/*", "arn:aws:s3:::models/m.pt",
        "arn:aws:s3:::models/m.pt/*"]}
    assert write["Action"] == ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload",
                               "s3:DeleteObject"]
    assert write["Resource"] == ["arn:aws:s3:::bourse/jobs/j1/*"]
    assert [s["Resource"] for s in lists] == [["arn:aws:s3:::datasets"],
                                              ["arn:aws:s3:::models"], ["arn:aws:s3:::bourse"]]
    assert lists[0]["Condition"] == {"StringLike": {"s3:prefix": ["digits/*"]}}
    assert lists[1]["Condition"] == {"StringLike": {"s3:prefix": ["m.pt", "m.pt/*"]}}


def test_scope_policy_of_a_whole_bucket_and_other_partitions() -> None:
    policy = scope_policy(Scope.of(["s3://datasets"]), partition="aws-cn")
    assert policy["Statement"][0]["Resource"] == ["arn:aws-cn:s3:::datasets/*"]
    assert "Condition" not in policy["Statement"][1]


@pytest.mark.parametrize(("read", "message"), [
    (["gs://bucket/x/"], "only s3:// is supported"), ([], "at least one prefix")])
def test_scope_policy_refuses(read: list[str], message: str) -> None:
    with pytest.raises(CredentialError, match=message):
        scope_policy(Scope.of(read))


def test_identity_names_carry_the_expiry() -> None:
    name = identity_name("job-42", 3, NOW)
    assert name == f"bourse.job-42.3.{int(NOW.timestamp())}"
    assert identity_expiry(name) == NOW
    assert identity_expiry("alice") is None and identity_expiry("bourse.x.1.soon") is None
    long = identity_name("a" * 200 + "/weird", 12345, NOW)
    assert len(long) <= 64 and job_key("a" * 200 + "/weird").startswith("h")
    assert identity_expiry(long) == NOW


async def test_memory_issuer_scopes_expires_and_revokes() -> None:
    issuer = MemoryIssuer()
    creds = await issuer.issue("a", 1, ["s3://data/a/in/"], ["s3://data/a/out/"],
                               timedelta(hours=2), now=NOW)
    key = creds.access_key.access_key_id
    assert issuer.allows(key, "read", "s3://data/a/in/x", now=NOW)
    assert issuer.allows(key, "write", "s3://data/a/out/y", now=NOW)
    assert not issuer.allows(key, "write", "s3://data/a/in/x", now=NOW)
    assert not issuer.allows(key, "read", "s3://data/b/in/x", now=NOW)
    assert not issuer.allows(key, "read", "s3://data/a/in/x", now=NOW + timedelta(hours=3))
    renewed = await issuer.renew(creds, timedelta(hours=2), now=NOW + timedelta(hours=1))
    assert renewed.access_key == creds.access_key
    assert issuer.allows(key, "read", "s3://data/a/in/x", now=NOW + timedelta(hours=2.5))
    assert await issuer.sweep(NOW + timedelta(hours=1)) == 0
    assert await issuer.revoke("a", 1) == 1
    assert not issuer.allows(key, "read", "s3://data/a/in/x", now=NOW)
    with pytest.raises(CredentialError, match="revoked"):
        await issuer.renew(creds)


async def test_credentials_never_show_their_secret() -> None:
    creds = await MemoryIssuer().issue("a", 1, ["s3://data/a/"], [])
    assert creds.access_key.secret_access_key not in repr(creds)
    assert creds.access_key.access_key_id in repr(creds)
    assert creds.env()["AWS_SECRET_ACCESS_KEY"] == creds.access_key.secret_access_key


# -- AWS STS ---------------------------------------------------------------------------------

ROLE_TRUST = json.dumps({"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
    "Action": "sts:AssumeRole"}]})


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        role = boto3.client("iam").create_role(RoleName="bourse-jobs",
                                               AssumeRolePolicyDocument=ROLE_TRUST)
        yield role["Role"]["Arn"]


async def test_sts_issue_renew_revoke_with_moto(aws: str) -> None:
    issuer = StsIssuer(aws, region="us-east-1")
    creds = await issuer.issue("job-7", 2, ["s3://datasets/digits/"], ["s3://bourse/jobs/7/"],
                               timedelta(hours=2))
    assert creds.access_key.session_token and creds.identity.startswith("bourse.job-7.2.")
    assert creds.expires_at > datetime.now(UTC) + timedelta(minutes=100)
    renewed = await issuer.renew(creds)
    assert renewed.access_key.access_key_id != creds.access_key.access_key_id
    await issuer.revoke("job-7", 2)
    await issuer.revoke("job-8", 1)
    document = boto3.client("iam").get_role_policy(
        RoleName="bourse-jobs", PolicyName="bourse-revoked-sessions")["PolicyDocument"]
    statement = (json.loads(document) if isinstance(document, str) else document)["Statement"][0]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"]["StringLike"]["aws:userid"] == [
        "*:bourse.job-7.2.*", "*:bourse.job-8.1.*"]
    assert await issuer.sweep() == 0


async def test_sts_sends_the_session_policy_and_duration() -> None:
    sts = boto3.client("sts", region_name="us-east-1", aws_access_key_id="k",
                       aws_secret_access_key="s")
    expected_policy = json.dumps(scope_policy(Scope.of(["s3://datasets/d/"], ["s3://out/j/"])),
                                 separators=(",", ":"))
    with Stubber(sts) as stub:
        stub.add_response("assume_role", {"Credentials": {
            "AccessKeyId": "ASIAEXAMPLEEXAMPLE12", "SecretAccessKey": "secret",
            "SessionToken": "token",
            "Expiration": NOW + timedelta(hours=12)}}, {
            "RoleArn": "arn:aws:iam::123456789012:role/r", "RoleSessionName": ANY,
            "DurationSeconds": 43200, "Policy": expected_policy})
        issuer = StsIssuer("arn:aws:iam::123456789012:role/r", sts=sts, iam=boto3.client(
            "iam", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"))
        creds = await issuer.issue("j", 1, ["s3://datasets/d/"], ["s3://out/j/"],
                                   timedelta(days=2), now=NOW)  # clamped to 12 h
        stub.assert_no_pending_responses()
    assert creds.expires_at == NOW + timedelta(hours=12)


async def test_sts_errors_say_what_to_check() -> None:
    sts = boto3.client("sts", region_name="us-east-1", aws_access_key_id="k",
                       aws_secret_access_key="s")
    with Stubber(sts) as stub:
        stub.add_client_error("assume_role", "AccessDenied", "not authorized")
        issuer = StsIssuer("arn:aws:iam::1:role/r", sts=sts, iam=boto3.client(
            "iam", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"))
        with pytest.raises(CredentialError, match="AccessDenied: not authorized"):
            await issuer.issue("j", 1, ["s3://datasets/d/"], [])


def test_revocation_policy_groups_by_hour_and_forgets_expired_sessions() -> None:
    first = revocation_policy(None, "*:bourse.a.1.*", NOW)
    same_hour = revocation_policy(first, "*:bourse.b.1.*", NOW + timedelta(minutes=5))
    assert len(same_hour["Statement"]) == 1
    later = revocation_policy(same_hour, "*:bourse.c.1.*", NOW + timedelta(hours=2))
    assert len(later["Statement"]) == 2
    much_later = revocation_policy(later, "*:bourse.d.1.*", NOW + timedelta(hours=14))
    assert [s["Condition"]["StringLike"]["aws:userid"] for s in much_later["Statement"]] == [
        ["*:bourse.c.1.*"], ["*:bourse.d.1.*"]]


def test_revocation_policy_stays_under_the_size_limit() -> None:
    policy: dict[str, Any] | None = None
    for hour in range(12):
        for n in range(60):
            policy = revocation_policy(policy, f"*:bourse.job-{hour}-{n:04d}.1.*",
                                       NOW + timedelta(hours=hour))
    assert policy is not None and len(json.dumps(policy)) < 10_240
    assert "job-11-0059" in json.dumps(policy)  # the newest revocations are kept


async def test_sts_secrets_never_reach_the_logs(aws: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    creds = await StsIssuer(aws, region="us-east-1").issue("j", 1, ["s3://datasets/d/"], [])
    assert "Response body" in caplog.text  # botocore did log the body...
    assert creds.access_key.secret_access_key not in caplog.text  # ...without the secret
    assert creds.access_key.session_token not in caplog.text  # type: ignore[operator]


def test_redact() -> None:
    xml = b"<A><AccessKeyId>AK</AccessKeyId><SecretAccessKey>s3cr3t</SecretAccessKey></A>"
    assert redact(xml) == b"<A><AccessKeyId>AK</AccessKeyId><SecretAccessKey>[redacted]" \
        b"</SecretAccessKey></A>"
    assert redact(b'{"SessionToken": "tok", "x": 1}') == b'{"SessionToken": "[redacted]", "x": 1}'
