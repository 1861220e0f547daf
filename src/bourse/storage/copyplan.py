"""What a copy moves (``bourse cp``): the pairs of source and destination for local -> store,
store -> local and store -> store, each marked to copy or to skip.

A copy is resumable because it skips what the destination already holds: an object of the
same size whose ETag is the source's (store -> store), or the ETag a local file would get
(`etag.same_content`). ``trust_size`` skips on size alone, for destinations addressed by
their content (local inputs: a prefix named by the digest of what it holds).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from bourse.core.errors import InvalidInput
from bourse.core.uri import StoreURI, parse_uri
from bourse.storage.errors import ObjectNotFound
from bourse.storage.etag import same_content
from bourse.storage.listing import locate
from bourse.storage.plan import relative_path
from bourse.storage.store import DEFAULT_PART_SIZE, ObjectInfo, ObjectStore, Opener, directory
from bourse.storage.upload import targets


@dataclass(frozen=True, slots=True)
class Place:
    """One end of a copy: a local path or a store URI (``text`` as the user wrote it)."""

    text: str
    path: Path | None = None
    uri: StoreURI | None = None

    @classmethod
    def of(cls, text: str, field: str = "source") -> Place:
        if "://" not in text:
            return cls(text, path=Path(text).expanduser())
        uri = parse_uri(text, field=field)
        if uri.scheme == "file":
            raise InvalidInput(f"{field}: {text} is a file URI", field=field,
                               hint=f"write the local path itself, /{uri.key}")
        return cls(text, uri=uri)

    @property
    def local(self) -> bool:
        return self.path is not None


@dataclass(frozen=True, slots=True)
class Item:
    """One object to move: ``source`` and ``dest`` are local paths or keys of their stores."""

    source: str
    dest: str
    size: int
    etag: str = ""  # the source object's, when it is one


@dataclass
class Plan:
    source: Place
    dest: Place
    copy: list[Item] = field(default_factory=list)
    skip: list[Item] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(item.size for item in self.copy)


@dataclass(frozen=True, slots=True)
class PlanOptions:
    recursive: bool = False
    part_size: int = DEFAULT_PART_SIZE
    trust_size: bool = False


async def plan_copy(opener: Opener, source: Place, dest: Place,
                    options: PlanOptions | None = None) -> Plan:
    options = options or PlanOptions()
    if source.path is not None and dest.path is not None:
        raise InvalidInput("both ends are local paths", field="source",
                           hint="one of SRC and DST must be a store URI (s3://...)")
    if source.path is not None:
        assert dest.uri is not None
        return await _upload_plan(opener(dest.uri), source, dest, options)
    assert source.uri is not None
    objects, single = await _sources(opener(source.uri), source, options)
    if dest.path is not None:
        return _download_plan(source, dest, objects, single, options)
    assert dest.uri is not None
    return await _store_plan(opener(dest.uri), source, dest, objects, single)


def _split(plan: Plan, item: Item, present: bool) -> None:
    (plan.skip if present else plan.copy).append(item)


async def _upload_plan(store: ObjectStore, source: Place, dest: Place,
                       options: PlanOptions) -> Plan:
    assert source.path is not None and dest.uri is not None
    if source.path.is_dir() and not options.recursive:
        raise InvalidInput(f"{source.text} is a directory", field="source",
                           hint="add -r to copy it and everything below it")
    pairs = targets(source.path, dest.uri)
    existing = await _existing(store, dest.uri, [key for _, key in pairs])
    plan = Plan(source, dest)
    for path, key in pairs:
        size, found = path.stat().st_size, existing.get(key)
        present = found is not None and (
            found.size == size if options.trust_size else
            same_content(path, found.size, found.etag, options.part_size))
        _split(plan, Item(str(path), key, size), present)
    return plan


async def _existing(store: ObjectStore, dest: StoreURI, keys: list[str]) -> dict[str, ObjectInfo]:
    """The objects already at the destination keys: one HEAD for a single object, else one
    listing."""
    if len(keys) == 1:
        with contextlib.suppress(ObjectNotFound):
            info = await store.head(keys[0])
            return {info.key: info}
        return {}
    with contextlib.suppress(ObjectNotFound):  # a bucket without the prefix yet
        return {i.key: i for i in await store.list(directory(dest.as_prefix().key))}
    return {}


async def _sources(store: ObjectStore, source: Place,
                   options: PlanOptions) -> tuple[list[tuple[str, ObjectInfo]], bool]:
    """(relative name, object) of what a store source holds, and whether it is one object."""
    assert source.uri is not None
    found = await locate(store, source.uri)
    if found.single:
        info = found.objects[0]
        return [(info.key.rsplit("/", 1)[-1], info)], True
    if not found.objects:
        raise ObjectNotFound(f"nothing at {source.uri}", hint="`bourse ls` lists what is there")
    if not options.recursive:
        raise InvalidInput(f"{source.text} is a prefix of {len(found.objects)} object(s)",
                           field="source", hint="add -r to copy everything below it")
    prefix = source.uri.as_prefix().key
    return [(relative_path(prefix, i.key), i) for i in found.objects], False


def _download_plan(source: Place, dest: Place, objects: list[tuple[str, ObjectInfo]],
                   single: bool, options: PlanOptions) -> Plan:
    assert dest.path is not None
    into_dir = not single or dest.path.is_dir() or dest.text.endswith("/")
    plan = Plan(source, dest)
    for rel, info in objects:
        path = dest.path / rel if into_dir else dest.path
        present = path.is_file() and (
            path.stat().st_size == info.size if options.trust_size else
            same_content(path, info.size, info.etag, options.part_size))
        _split(plan, Item(info.key, str(path), info.size, info.etag), present)
    return plan


async def _store_plan(store: ObjectStore, source: Place, dest: Place,
                      objects: list[tuple[str, ObjectInfo]], single: bool) -> Plan:
    assert dest.uri is not None
    into_prefix = not single or dest.uri.is_prefix
    base = dest.uri.as_prefix().key
    keys = [base + rel if into_prefix else dest.uri.key for rel, _ in objects]
    existing = await _existing(store, dest.uri, keys)
    plan = Plan(source, dest)
    for key, (_, info) in zip(keys, objects, strict=True):
        found = existing.get(key)
        present = found is not None and found.size == info.size and bool(info.etag) and \
            found.etag == info.etag
        _split(plan, Item(info.key, key, info.size, info.etag), present)
    return plan
