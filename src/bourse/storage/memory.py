"""An in-memory `ObjectStore` for tests, shipped with the package (like httpx's MockTransport).

It mimics S3 where tests can see it: MD5 ETags, multipart ETags (``md5-of-md5s-N``), directory
listing semantics, and it counts calls and can be told to fail, so callers' retry and
no-re-download behaviour can be tested without a server.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from typing_extensions import Buffer

from bourse.core.uri import StoreURI
from bourse.storage.errors import ObjectNotFound, StorageError
from bourse.storage.store import DEFAULT_PART_SIZE, ObjectInfo, ObjectStore, directory


@dataclass
class _Fault:
    error: StorageError
    times: int


class MemoryStore(ObjectStore):
    def __init__(self, bucket: str = "memory", scheme: str = "s3") -> None:
        self.root = StoreURI(scheme, bucket, "")
        self.objects: dict[str, tuple[bytes, ObjectInfo]] = {}
        self.calls: Counter[str] = Counter()
        self._faults: dict[str, list[_Fault]] = {}

    def fail(self, operation: str, error: StorageError, *, times: int = 1) -> None:
        """Make the next ``times`` calls of ``operation`` (``"get"``, ``"put_file"``...) raise."""
        self._faults.setdefault(operation, []).append(_Fault(error, times))

    def _enter(self, operation: str) -> None:
        self.calls[operation] += 1
        faults = self._faults.get(operation)
        if faults:
            fault = faults[0]
            fault.times -= 1
            if fault.times <= 0:
                faults.pop(0)
            raise fault.error

    def _store(self, key: str, data: bytes, etag: str) -> str:
        info = ObjectInfo(key, len(data), etag, datetime.now(UTC))
        self.objects[key] = (data, info)
        return etag

    def _object(self, key: str) -> tuple[bytes, ObjectInfo]:
        try:
            return self.objects[key]
        except KeyError:
            raise ObjectNotFound(f"{self.uri(key)} does not exist") from None

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        self._enter("list")
        start = directory(prefix)
        return [info for key, (_, info) in sorted(self.objects.items()) if key.startswith(start)]

    async def head(self, key: str) -> ObjectInfo:
        self._enter("head")
        return self._object(key)[1]

    async def get(self, key: str) -> Buffer:
        self._enter("get")
        return self._object(key)[0]

    async def get_range(self, key: str, start: int, length: int) -> Buffer:
        self._enter("get_range")
        return self._object(key)[0][start:start + length]

    async def put(self, key: str, data: Buffer) -> str:
        self._enter("put")
        payload = bytes(data)
        return self._store(key, payload, hashlib.md5(payload).hexdigest())

    async def put_file(self, key: str, path: Path, *, part_size: int = DEFAULT_PART_SIZE,
                       concurrency: int = 8) -> str:
        self._enter("put_file")
        payload = path.read_bytes()
        if len(payload) <= part_size:
            return self._store(key, payload, hashlib.md5(payload).hexdigest())
        parts = [payload[i:i + part_size] for i in range(0, len(payload), part_size)]
        digests = b"".join(hashlib.md5(part).digest() for part in parts)
        return self._store(key, payload, f"{hashlib.md5(digests).hexdigest()}-{len(parts)}")

    async def delete(self, key: str) -> None:
        self._enter("delete")
        self.objects.pop(key, None)

    async def probe(self) -> None:
        """The bucket is there unless a fault says otherwise (``fail("probe", ...)``)."""
        self._enter("probe")


class MemoryStores:
    """An `Opener` of memory stores, one per bucket, each made empty when first opened."""

    def __init__(self, *stores: MemoryStore) -> None:
        self.stores = {store.root: store for store in stores}

    def __call__(self, uri: StoreURI) -> MemoryStore:
        return self.stores.setdefault(uri.root, MemoryStore(uri.bucket, uri.scheme))
