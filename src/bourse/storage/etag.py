"""What a local file would be in the store, without uploading it: its S3 ETag (the MD5 of a
single-part object, or the MD5 of the parts' MD5s and ``-N`` for a multipart one), so a copy
can skip files the store already holds; and a content digest of a whole tree, the address of
a local input (`tree_digest`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from bourse.storage.store import DEFAULT_PART_SIZE

READ = 1 << 20


def multipart_parts(etag: str) -> int:
    """How many parts an ETag says its object was uploaded in (0: a single-part upload)."""
    count = etag.rpartition("-")[2]
    return int(count) if "-" in etag and count.isdigit() else 0


def local_etag(path: Path, part_size: int = DEFAULT_PART_SIZE) -> str:
    """The ETag the store gives ``path`` when `ObjectStore.put_file` uploads it with
    ``part_size`` (multipart above it, as `RemoteStore.put_file` and `MemoryStore` do)."""
    size = path.stat().st_size
    if size <= part_size:
        return _md5(path).hexdigest()
    digests = b"".join(part.digest() for part in _part_md5s(path, part_size))
    return f"{hashlib.md5(digests).hexdigest()}-{-(-size // part_size)}"


def same_content(path: Path, size: int, etag: str, part_size: int = DEFAULT_PART_SIZE) -> bool:
    """Whether the object (``size``, ``etag``) holds what ``path`` holds, as far as its ETag
    tells: sizes first (no read), then the ETag computed the way the object's says it was
    uploaded. An ETag of another kind (a store's own, or parts of another size) says no: the
    file is copied again, which is never wrong."""
    if not etag or path.stat().st_size != size:
        return False
    parts = multipart_parts(etag)
    if parts and size > part_size and -(-size // part_size) == parts:
        return local_etag(path, part_size) == etag
    return not parts and _md5(path).hexdigest() == etag


def _md5(path: Path) -> hashlib._Hash:
    digest = hashlib.md5()
    with path.open("rb") as file:
        while chunk := file.read(READ):
            digest.update(chunk)
    return digest


def _part_md5s(path: Path, part_size: int) -> Iterable[hashlib._Hash]:
    with path.open("rb") as file:
        while True:
            digest, left = hashlib.md5(), part_size
            while left and (chunk := file.read(min(READ, left))):
                digest.update(chunk)
                left -= len(chunk)
            if left == part_size:
                return
            yield digest


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(READ):
            digest.update(chunk)
    return digest.hexdigest()


def tree_digest(files: Iterable[tuple[Path, str]]) -> str:
    """A SHA-256 of (relative name, size, SHA-256 of the bytes) of every file, in name
    order: the same files with the same bytes give the same digest wherever they lie."""
    digest = hashlib.sha256()
    for path, name in sorted(files, key=lambda pair: pair[1]):
        digest.update(f"{name}\0{path.stat().st_size}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()
