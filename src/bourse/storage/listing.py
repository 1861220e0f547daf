"""What lies under a URI: the one object it names, or every object below it as a prefix —
how prefetch resolves an input, and what a stage cache key records about one (a digest of
every object's key, size and ETag)."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from bourse.core.uri import StoreURI
from bourse.storage.errors import ObjectNotFound
from bourse.storage.store import ObjectInfo, ObjectStore, directory


@dataclass(frozen=True, slots=True)
class Located:
    """The objects a URI names; ``single`` when it names one object, not a prefix."""

    uri: StoreURI
    single: bool
    objects: tuple[ObjectInfo, ...]


async def locate(store: ObjectStore, uri: StoreURI) -> Located:
    """A URI without a trailing ``/`` names an object when there is one (HEAD), else the
    prefix ``key/``; a listing leaves out directory markers (keys ending in ``/``). An empty
    prefix gives no objects: the caller decides whether that is an error."""
    if not uri.is_prefix:
        with contextlib.suppress(ObjectNotFound):
            return Located(uri, True, (await store.head(uri.key),))
    listing = await store.list(directory(uri.key))
    return Located(uri, False, tuple(i for i in listing if not i.key.endswith("/")))


def content_digest(objects: Iterable[ObjectInfo]) -> str:
    """A hash of what the store holds: each object's key, size and ETag (its modification
    time too where the store gives no ETag), in key order. Any object rewritten with other
    bytes, added or removed changes it."""
    digest = hashlib.sha256()
    for info in sorted(objects, key=lambda i: i.key):
        stamp = "" if info.etag or info.last_modified is None else info.last_modified.isoformat()
        digest.update(f"{info.key}\0{info.size}\0{info.etag}\0{stamp}\n".encode())
    return digest.hexdigest()


def one_level(objects: Iterable[ObjectInfo], prefix: str) -> tuple[list[str], list[ObjectInfo]]:
    """What lies directly below the prefix ``prefix`` (empty or ending in ``/``): the names
    of the prefixes below it (``sub/``) and its own objects, as ``ls`` shows one level."""
    folders: set[str] = set()
    own: list[ObjectInfo] = []
    for info in objects:
        rest = info.key[len(prefix):]
        head, slash, _ = rest.partition("/")
        if slash:
            folders.add(head + "/")
        else:
            own.append(info)
    return sorted(folders), own
