"""Code bundles, content-addressed by SHA-256.

With a data plane, a bundle lives in the exchange's store as ``bundles/<sha256>.tar.gz``:
agents read it there with their attempt's credentials, and ``GET /bundles/{sha}`` streams it
from there. Without one (``--no-store``), it lives under ``<data dir>/bundles/ab/<sha256>``;
bundles stored there before the exchange had a store are still served from there.

An upload streams to a temporary file while hashing; it is kept only if the hash matches the
name it was uploaded under and it fits the size limit, then moved into place (or uploaded to
the store, multipart, and the temporary file removed).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from bourse.core.errors import InvalidInput, TooLarge
from bourse.core.units import format_bytes
from bourse.storage.errors import ObjectNotFound
from bourse.storage.store import ObjectStore

READ_PART = 8 << 20  # a bundle is streamed from the store in ranges of this size


def bundle_key(sha256: str) -> str:
    """Where a bundle lives in the exchange's bucket."""
    return f"bundles/{sha256}.tar.gz"


class BundleStore:
    def __init__(self, root: Path, max_bytes: int, remote: ObjectStore | None = None) -> None:
        self.root, self.max_bytes, self.remote = root, max_bytes, remote

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    async def size(self, sha256: str) -> int | None:
        """The stored bundle's size, None when there is none."""
        local = self.path(sha256)
        if local.is_file():
            return local.stat().st_size
        if self.remote is None:
            return None
        try:
            return (await self.remote.head(bundle_key(sha256))).size
        except ObjectNotFound:
            return None

    async def put(self, sha256: str, chunks: AsyncIterator[bytes]) -> int:
        """Store a stream under its SHA-256; return its size."""
        folder = self.root / sha256[:2] if self.remote is None else self.root
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)  # the data dir's: private
        folder.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".upload-")
        try:
            size = await self._receive(fd, sha256, chunks)
            if self.remote is None:
                os.replace(tmp, self.path(sha256))
            else:
                await self.remote.put_file(bundle_key(sha256), Path(tmp))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return size

    async def check(self, sha256: str, chunks: AsyncIterator[bytes]) -> int:
        """Receive a stream that is already stored, only to check that it hashes to its
        name (a project proves it has the content); return its size."""
        return await self._receive(None, sha256, chunks)

    async def _receive(self, fd: int | None, sha256: str, chunks: AsyncIterator[bytes]) -> int:
        digest, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") if fd is not None else open(os.devnull, "wb") as out:
            async for chunk in chunks:
                size += len(chunk)
                if size > self.max_bytes:
                    raise TooLarge(f"bundle is larger than the limit of "
                                   f"{format_bytes(self.max_bytes)}",
                                   hint="exclude data and build outputs with .bourseignore")
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != sha256:
            raise InvalidInput("the uploaded bytes do not hash to the bundle's name",
                               field="sha256", hint="upload the file named by its SHA-256")
        return size

    async def read(self, sha256: str, size: int) -> AsyncIterator[bytes]:
        """The bundle's bytes from the store, range by range (the local copy is served as a
        file instead)."""
        assert self.remote is not None
        for offset in range(0, size, READ_PART):
            part = await self.remote.get_range(bundle_key(sha256), offset,
                                               min(READ_PART, size - offset))
            yield bytes(part)
