"""Code bundles on the node: fetched once, cached by SHA-256.

With a data plan a bundle is read from the exchange's store with the attempt's scoped key
(which may read it); otherwise — or when the store does not have it (a bundle uploaded
before the exchange had a store) — from the coordinator's REST API with the node credential.

Two starts of jobs with the same bundle arriving together (an app run's stages) share one
download: the second waits for the first's, and each download writes a part file of its own,
so neither can rename away the other's.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
from pathlib import Path

import httpx

from bourse.agent.data import settings_of
from bourse.core.errors import BourseError
from bourse.core.uri import parse_uri
from bourse.protocol.agent import StartJob
from bourse.storage.errors import StorageError
from bourse.storage.remote import Stores
from bourse.storage.store import ObjectStore

log = logging.getLogger(__name__)
PART = 8 << 20


class BundleError(BourseError):
    pass


class BundleCache:
    def __init__(self, root: Path, server: str, credential: str) -> None:
        self.root, self.server, self.credential = root, server, credential
        self._fetching: dict[str, asyncio.Task[Path]] = {}  # sha256 -> its download

    def path(self, sha256: str) -> Path:
        return self.root / f"{sha256}.tar.gz"

    async def fetch(self, sha256: str, store: ObjectStore | None = None,
                    key: str | None = None) -> Path:
        """The bundle's local path, downloading and verifying it when not cached: from
        ``store`` at ``key`` when given, else (or when that fails) from the coordinator."""
        target = self.path(sha256)
        if target.exists():
            return target
        running = self._fetching.get(sha256)
        if running is None:
            running = asyncio.ensure_future(self._fetch(sha256, target, store, key))
            self._fetching[sha256] = running
            running.add_done_callback(lambda _t: self._fetching.pop(sha256, None))
        return await asyncio.shield(running)  # a cancelled start leaves the others' download

    async def _fetch(self, sha256: str, target: Path, store: ObjectStore | None,
                     key: str | None) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{sha256}.{os.getpid()}.{secrets.token_hex(4)}.part")
        try:
            digest = await self._download(sha256, tmp, store, key)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if digest != sha256:
            tmp.unlink(missing_ok=True)
            raise BundleError(f"bundle {sha256[:12]}… arrived corrupted (hash mismatch)")
        os.replace(tmp, target)
        return target

    async def _download(self, sha256: str, tmp: Path, store: ObjectStore | None,
                        key: str | None) -> str:
        if store is not None and key is not None:
            try:
                return await _from_store(store, key, tmp)
            except StorageError as exc:
                log.warning("bundle %s… not read from the store (%s); asking the coordinator",
                            sha256[:12], exc.message)
        return await self._from_coordinator(sha256, tmp)

    async def _from_coordinator(self, sha256: str, tmp: Path) -> str:
        digest = hashlib.sha256()
        headers = {"Authorization": f"Bearer {self.credential}"}
        url = f"{self.server}/api/v1/bundles/{sha256}"
        try:
            async with httpx.AsyncClient(timeout=60) as client, \
                    client.stream("GET", url, headers=headers) as response:
                if response.status_code != 200:
                    raise BundleError(f"bundle {sha256[:12]}… not available "
                                      f"({response.status_code})")
                with tmp.open("wb") as out:
                    async for chunk in response.aiter_bytes(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
        except httpx.HTTPError as exc:
            raise BundleError(f"could not download bundle {sha256[:12]}…: {exc}") from exc
        return digest.hexdigest()


async def _from_store(store: ObjectStore, key: str, tmp: Path) -> str:
    """Range by range into ``tmp``; the SHA-256 of what arrived."""
    digest = hashlib.sha256()
    size = (await store.head(key)).size
    with tmp.open("wb") as out:
        for offset in range(0, size, PART):
            part = bytes(await store.get_range(key, offset, min(PART, size - offset)))
            digest.update(part)
            out.write(part)
    return digest.hexdigest()


def bundle_source(message: StartJob) -> tuple[ObjectStore | None, str | None]:
    """Where the attempt's key can read its code bundle: (store, key), or nothing."""
    plan = message.data
    if plan is None or plan.store is None or plan.bundle is None:
        return None, None
    uri = parse_uri(plan.bundle)
    return Stores(settings_of(plan.store))(uri), uri.key
