"""Bringing up the coordinator's store: the embedded SeaweedFS (the default) or an external S3
endpoint, and the credential issuer that goes with it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from bourse.core.errors import InvalidInput
from bourse.server.config import StoreConfig
from bourse.server.dataplane.plane import DataPlane
from bourse.storage.credentials import CredentialIssuer
from bourse.storage.errors import StorageError, aws_reason
from bourse.storage.seaweed import SeaweedServer
from bourse.storage.seaweed_iam import SeaweedIssuer
from bourse.storage.settings import AccessKey, StoreSettings
from bourse.storage.sts import StsIssuer

log = logging.getLogger(__name__)
SUPERVISE_S = 1.0


@contextlib.asynccontextmanager
async def open_dataplane(config: StoreConfig, store_dir: Path,
                         stopping: asyncio.Event | None = None,
                         ) -> AsyncIterator[DataPlane | None]:
    """The data plane for ``config`` (None for ``none``), closed (and the embedded store
    stopped) on exit. Once ``stopping`` is set (the coordinator was asked to stop), the
    embedded store is no longer restarted if it dies."""
    if config.kind == "none":
        yield None
        return
    if config.kind == "embedded":
        async with _embedded(config, store_dir, stopping or asyncio.Event()) as plane:
            yield plane
        return
    plane = await asyncio.to_thread(external, config)
    yield plane


def _ttl(config: StoreConfig) -> timedelta:
    return timedelta(seconds=config.credential_ttl_s)


@contextlib.asynccontextmanager
async def _embedded(config: StoreConfig, store_dir: Path,
                    stopping: asyncio.Event) -> AsyncIterator[DataPlane]:
    server = SeaweedServer(store_dir, host=config.host)
    await asyncio.to_thread(server.start)  # ~1 s; blocking, so off the event loop
    supervisor = asyncio.create_task(_supervise(server, stopping))
    try:
        settings = server.settings()
        await asyncio.to_thread(ensure_bucket, settings, config.bucket, create=True)
        issuer = SeaweedIssuer(server.endpoint, server.root_key)
        yield DataPlane(settings, config.bucket, issuer, ttl=_ttl(config))
    finally:
        stopping.set()
        await supervisor
        await asyncio.to_thread(server.stop)  # SIGTERM; weed takes a few seconds
        log.info("SeaweedFS stopped")


async def _supervise(server: SeaweedServer, stopping: asyncio.Event) -> None:
    """Restart the store when it dies. A tick runs in a thread; stopping waits for it to end
    (cancelling would leave it running next to `stop`)."""
    while not stopping.is_set():
        try:  # `stopping.is_set` is read again in the thread, right before a restart
            await asyncio.to_thread(server.tick, None, stopping.is_set)
        except Exception:
            log.exception("SeaweedFS supervision step failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), SUPERVISE_S)


def external(config: StoreConfig, environ: dict[str, str] | None = None) -> DataPlane:
    """An S3 endpoint run by someone else; the root key from the environment."""
    key = AccessKey.from_env(os.environ if environ is None else environ)
    settings = StoreSettings(endpoint=config.endpoint, region=config.region,
                             path_style=config.path_style, access_key=key)
    issuer = _issuer(config, key)
    try:
        ensure_bucket(settings, config.bucket, create=False)
    except StorageError as exc:
        log.warning("the store's bucket is not reachable yet: %s", exc.message)
    return DataPlane(settings, config.bucket, issuer, ttl=_ttl(config))


def _issuer(config: StoreConfig, key: AccessKey | None) -> CredentialIssuer:
    if config.role_arn:
        return StsIssuer(config.role_arn, region=config.region)
    if config.endpoint and key is not None:
        return SeaweedIssuer(config.endpoint, key)
    raise InvalidInput("an external store needs a way to issue job credentials",
                       field="store", hint="AWS: give --store-role-arn (STS); SeaweedFS: give "
                       "--store-endpoint and its admin key in AWS_ACCESS_KEY_ID and "
                       "AWS_SECRET_ACCESS_KEY")


def ensure_bucket(settings: StoreSettings, bucket: str, *, create: bool) -> None:
    """Check that ``bucket`` exists, creating it when allowed (blocking: run in a thread)."""
    client = _s3(settings)
    try:
        client.head_bucket(Bucket=bucket)
        return
    except Exception as exc:
        if not create:
            raise StorageError(f"bucket {bucket} at {settings.endpoint or 'AWS'}: "
                               f"{aws_reason(exc)}", hint="create it, or check the store "
                               "options and credentials") from None
    try:
        client.create_bucket(Bucket=bucket)
    except Exception as exc:
        raise StorageError(f"cannot create bucket {bucket}: {aws_reason(exc)}") from None
    log.info("created bucket %s", bucket)


def _s3(settings: StoreSettings) -> Any:
    import boto3
    from botocore.config import Config

    key = settings.access_key
    return boto3.client(
        "s3", endpoint_url=settings.endpoint, region_name=settings.region or "us-east-1",
        aws_access_key_id=key.access_key_id if key else None,
        aws_secret_access_key=key.secret_access_key if key else None,
        aws_session_token=key.session_token if key else None,
        config=Config(s3={"addressing_style": "path" if settings.uses_path_style else "auto"},
                      retries={"max_attempts": 3, "mode": "standard"}))
