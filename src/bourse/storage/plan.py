"""The pure core of prefetch and the cache: cache keys, where each object lands in a job's
view, how downloads are split into requests, and which cache entries to evict."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bourse.storage.errors import StorageError
from bourse.storage.store import ObjectInfo


def cache_digest(origin: str, key: str, etag: str, size: int) -> str:
    """The content address of one object version: (origin, key, ETag, size). ``origin`` names
    the endpoint and bucket, so equal bucket names on two endpoints never share entries."""
    return hashlib.sha256("\0".join((origin, key, etag, str(size))).encode()).hexdigest()


def relative_path(prefix: str, key: str) -> str:
    """Where ``key`` (listed under ``prefix``) goes inside the input's directory. Keys that
    would escape it (``..``, absolute, empty segments) are refused: a listing is untrusted."""
    rel = key[len(prefix):] if key.startswith(prefix) else key.rsplit("/", 1)[-1]
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") for p in parts):
        raise StorageError(f"object key {key!r} cannot be mapped to a local file",
                           hint="rename the object: empty, '.' or '..' path segments and "
                                "keys ending in '/' have no local equivalent")
    return rel


@dataclass(frozen=True, slots=True)
class Request:
    """One GET: the whole object (``length == size`` and ``offset == 0``) or a byte range."""

    digest: str
    key: str
    offset: int
    length: int
    size: int
    etag: str = ""  # the listed version: a store that can tell refuses another

    @property
    def ranged(self) -> bool:
        return self.length != self.size


def requests(objects: Iterable[tuple[str, ObjectInfo]], part_size: int) -> list[Request]:
    """GETs for ``(digest, object)`` pairs: objects up to ``part_size`` whole, larger ones in
    ``part_size`` ranges. Largest objects first, so their parts start early and the long tail
    is many small objects, which keep every connection busy until the end."""
    out: list[Request] = []
    for digest, info in sorted(objects, key=lambda pair: -pair[1].size):
        if info.size <= part_size:
            out.append(Request(digest, info.key, 0, info.size, info.size, info.etag))
            continue
        for offset in range(0, info.size, part_size):
            length = min(part_size, info.size - offset)
            out.append(Request(digest, info.key, offset, length, info.size, info.etag))
    return out


@dataclass(frozen=True, slots=True)
class Entry:
    digest: str
    size: int
    last_used: float


def victims(entries: Sequence[Entry], pinned: set[str], free_needed: int) -> list[Entry]:
    """Least recently used unpinned entries whose sizes add up to ``free_needed`` bytes (all
    unpinned entries if they do not suffice; the caller then reports the shortfall)."""
    chosen: list[Entry] = []
    freed = 0
    for entry in sorted(entries, key=lambda e: (e.last_used, e.digest)):
        if freed >= free_needed:
            break
        if entry.digest in pinned:
            continue
        chosen.append(entry)
        freed += entry.size
    return chosen
