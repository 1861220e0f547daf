"""Code bundles on the node: fetched once from the coordinator, cached by SHA-256."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx

from bourse.core.errors import BourseError


class BundleError(BourseError):
    pass


class BundleCache:
    def __init__(self, root: Path, server: str, credential: str) -> None:
        self.root, self.server, self.credential = root, server, credential

    def path(self, sha256: str) -> Path:
        return self.root / f"{sha256}.tar.gz"

    async def fetch(self, sha256: str) -> Path:
        """The bundle's local path, downloading and verifying it when not cached."""
        target = self.path(sha256)
        if target.exists():
            return target
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{sha256}.{os.getpid()}.part")
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
            tmp.unlink(missing_ok=True)
            raise BundleError(f"could not download bundle {sha256[:12]}…: {exc}") from exc
        if digest.hexdigest() != sha256:
            tmp.unlink(missing_ok=True)
            raise BundleError(f"bundle {sha256[:12]}… arrived corrupted (hash mismatch)")
        os.replace(tmp, target)
        return target
