"""Atomic checkpoints: upload every file, then write a completion marker; readers look only
at markers, so they never see a checkpoint whose files are still going up.

Layout under a checkpoint prefix (``BOURSE_CHECKPOINT_URI``)::

    <name>/...                   the checkpoint's files
    .complete/<name>.json        its marker, written last: name, step, files (key, size, ETag)

A checkpoint without a marker (the job died mid-upload) is invisible to `latest_complete` and
is overwritten when the same name is saved again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bourse.storage.errors import InvalidURI, ObjectNotFound
from bourse.storage.progress import Progress
from bourse.storage.store import ObjectInfo, Opener
from bourse.storage.upload import UploadOptions, upload
from bourse.storage.uri import StoreURI, parse_uri

MARKERS = ".complete/"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


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
    result = await upload(opener, source, root.join(name + "/"), options=options,
                          on_progress=on_progress)
    checkpoint = Checkpoint(name, root.join(name + "/"), step, now, result.objects)
    await opener(root).put(root.join(MARKERS, name + ".json").key, _marker(checkpoint))
    return checkpoint


async def list_complete(opener: Opener, prefix: str | StoreURI) -> list[Checkpoint]:
    """Every complete checkpoint below ``prefix``, oldest first (by step, then time)."""
    root = parse_uri(prefix, field="checkpoint").as_prefix()
    store = opener(root)
    found = []
    for info in await store.list(root.join(MARKERS).key):
        if info.key.endswith(".json"):
            try:
                found.append(_parse_marker(root, bytes(await store.get(info.key))))
            except ObjectNotFound:
                continue  # deleted since the listing
    return sorted(found, key=Checkpoint.order)


async def latest_complete(opener: Opener, prefix: str | StoreURI) -> Checkpoint | None:
    """The newest complete checkpoint (highest step, then latest), or None."""
    found = await list_complete(opener, prefix)
    return found[-1] if found else None
