"""Code bundles, content-addressed: the bytes live under ``<data dir>/bundles/ab/<sha256>``.

An upload streams to a temporary file while hashing; it is kept only if the hash matches the
name it was uploaded under and it fits the size limit.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from bourse.core.errors import InvalidInput
from bourse.core.units import format_bytes
from bourse.server.errors import TooLarge


class BundleStore:
    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root, self.max_bytes = root, max_bytes

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    async def put(self, sha256: str, chunks: AsyncIterator[bytes]) -> int:
        """Store a stream under its SHA-256; return its size."""
        target = self.path(sha256)
        target.parent.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".upload-")
        try:
            with os.fdopen(fd, "wb") as out:
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
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return size
