"""Atomic checkpoints: upload every file, then write a completion marker; readers look only
at markers, so they never see a checkpoint whose files are still going up.

Layout under a checkpoint prefix (``BOURSE_CHECKPOINT_URI``)::

    <name>/...                   the checkpoint's files
    .complete/<name>.json        its marker, written last: name, step, files (key, size, ETag)

A checkpoint without a marker (the job died mid-upload) is invisible to `latest_complete` and
is overwritten when the same name is saved again.

A name of the form ``step-<digits>`` is reserved for that step (`save_checkpoint` refuses
another), so when every marker has such a name the newest is known from the listing:
`latest_complete` reads one marker, not all of them (a long run keeps hundreds).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bourse.core.uri import StoreURI, parse_uri
from bourse.storage.errors import InvalidURI, ObjectNotFound
from bourse.storage.progress import Progress
from bourse.storage.store import ObjectInfo, ObjectStore, Opener
from bourse.storage.upload import UploadOptions, upload

MARKERS = ".complete/"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_STEP_NAME = re.compile(r"^step-(\d{12,})$")  # default_name of a step
READ_CONCURRENCY = 16  # markers read at once when every one must be read


@dataclass(frozen=True, slots=True)
class Checkpoint:
    name: str
    uri: StoreURI  # the prefix holding its files
    step: int | None
    created: datetime
    files: tuple[ObjectInfo, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def order(self) -> tuple[int, datetime, str]:
        return (-1 if self.step is None else self.step, self.created, self.name)


def default_name(step: int | None, now: datetime) -> str:
    if step is not None:
        return f"step-{step:012d}"
    return now.strftime("%Y%m%dT%H%M%S%fZ")


def named_step(name: str) -> int | None:
    """The step a ``step-<digits>`` name stands for; None for any other name."""
    found = _STEP_NAME.match(name)
    return int(found.group(1)) if found else None


def _marker(checkpoint: Checkpoint) -> bytes:
    return json.dumps({
        "format": 1, "name": checkpoint.name, "step": checkpoint.step,
        "created": checkpoint.created.isoformat(),
        "files": [{"key": f.key, "size": f.size, "etag": f.etag} for f in checkpoint.files],
    }, indent=1).encode()


def _parse_marker(prefix: StoreURI, data: bytes) -> Checkpoint:
    doc = json.loads(data)
    return Checkpoint(doc["name"], prefix.join(doc["name"] + "/"), doc.get("step"),
                      datetime.fromisoformat(doc["created"]),
                      tuple(ObjectInfo(f["key"], f["size"], f["etag"]) for f in doc["files"]))


async def save_checkpoint(opener: Opener, source: Path, prefix: str | StoreURI, *,
                          step: int | None = None, name: str | None = None,
                          options: UploadOptions | None = None,
                          on_progress: Callable[[Progress], None] | None = None,
                          now: datetime | None = None) -> Checkpoint:
    """Upload ``source`` (a file or a directory) as checkpoint ``name`` (default
    ``step-<step>`` or a UTC timestamp) below ``prefix``, then publish its marker."""
    root = parse_uri(prefix, field="checkpoint").as_prefix()
    now = now or datetime.now(UTC)
    name = name or default_name(step, now)
    if not _NAME.match(name):
        raise InvalidURI(f"invalid checkpoint name {name!r}", field="name",
                         hint="use letters, digits, '.', '_' and '-'")
    reserved = named_step(name)
    if reserved is not None and name != default_name(step, now):
        raise InvalidURI(f"checkpoint name {name!r} is reserved for step {reserved}",
                         field="name", hint=f"save it with step={reserved} and the name "
                         f"{default_name(reserved, now)!r}, or give another name")
    result = await upload(opener, source, root.join(name + "/"), options=options,
                          on_progress=on_progress)
    checkpoint = Checkpoint(name, root.join(name + "/"), step, now, result.objects)
    await opener(root).put(root.join(MARKERS, name + ".json").key, _marker(checkpoint))
    return checkpoint


async def list_complete(opener: Opener, prefix: str | StoreURI) -> list[Checkpoint]:
    """Every complete checkpoint below ``prefix``, oldest first (by step, then time)."""
    root = parse_uri(prefix, field="checkpoint").as_prefix()
    store = opener(root)
    return await _read_markers(root, store, await _marker_keys(root, store))


async def latest_complete(opener: Opener, prefix: str | StoreURI) -> Checkpoint | None:
    """The newest complete checkpoint (highest step, then latest), or None: one listing and
    one marker read when every marker has a step name, else every marker read."""
    root = parse_uri(prefix, field="checkpoint").as_prefix()
    store = opener(root)
    keys = await _marker_keys(root, store)
    newest = _newest_by_name(keys)
    if newest is not None:
        found = await _read_markers(root, store, [newest])
        if found and found[0].step == named_step(found[0].name):
            return found[0]
    every = await _read_markers(root, store, keys)  # a name that says nothing, or a stale one
    return every[-1] if every else None


async def _marker_keys(root: StoreURI, store: ObjectStore) -> list[str]:
    return [info.key for info in await store.list(root.join(MARKERS).key)
            if info.key.endswith(".json")]


def _newest_by_name(keys: list[str]) -> str | None:
    """The marker of the highest step when every marker's name is a step name, else None."""
    steps = [named_step(key.rsplit("/", 1)[-1].removesuffix(".json")) for key in keys]
    if not keys or any(step is None for step in steps):
        return None
    return max(zip(steps, keys, strict=True), key=lambda pair: pair[0] or 0)[1]


async def _read_markers(root: StoreURI, store: ObjectStore, keys: list[str]) -> list[Checkpoint]:
    """The checkpoints these markers describe, oldest first; a marker deleted since the
    listing is skipped. A few are read at once."""
    slots = asyncio.Semaphore(READ_CONCURRENCY)

    async def read(key: str) -> Checkpoint | None:
        async with slots:
            try:
                return _parse_marker(root, bytes(await store.get(key)))
            except ObjectNotFound:
                return None

    found = await asyncio.gather(*(read(key) for key in keys))
    return sorted((c for c in found if c is not None), key=Checkpoint.order)
