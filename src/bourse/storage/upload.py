"""Upload of job outputs and checkpoints: a file, or every file below a directory, to a URI.

Files go up concurrently, largest first; a file larger than ``part_size`` goes up as a parallel
multipart upload (atomic: readers see the old object or the new one). Transient failures are
retried per file; the files that still fail are reported together in one `TransferFailed`
after the others have finished, so one bad file does not hide the state of the rest.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bourse.core.uri import StoreURI, parse_uri
from bourse.storage.errors import StorageError, TransferFailed
from bourse.storage.progress import Progress, ProgressMeter
from bourse.storage.retry import RetryPolicy, retrying
from bourse.storage.store import DEFAULT_PART_SIZE, ObjectInfo, Opener


@dataclass(frozen=True, slots=True)
class UploadOptions:
    concurrency: int = 16  # files in flight
    part_size: int = DEFAULT_PART_SIZE
    part_concurrency: int = 16  # parts in flight per multipart file
    progress_interval: float = 0.5
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # False: links below the source are skipped, and a source that is a link is refused (a
    # directory a job left, uploaded by a root agent: a link must not reach the agent's files)
    follow_links: bool = True


@dataclass(frozen=True, slots=True)
class UploadResult:
    uri: StoreURI  # the object, or the prefix a directory went to
    objects: tuple[ObjectInfo, ...]
    bytes: int
    seconds: float


def local_files(source: Path, follow_links: bool = True) -> list[tuple[Path, str]]:
    """``(path, relative key)`` for every regular file below ``source`` (or ``source``
    itself); directory symlinks are not followed, nor file symlinks unless
    ``follow_links``."""
    if not follow_links and source.is_symlink():
        raise StorageError(f"{source} is a link; it is not followed",
                           hint="make it a directory")
    if source.is_file():
        return [(source, source.name)]
    if not source.is_dir():
        raise StorageError(f"nothing to upload at {source}", hint="check the output path")
    found = []
    for folder, _, names in os.walk(source):
        for name in names:
            path = Path(folder, name)
            if path.is_file() and (follow_links or not path.is_symlink()):
                found.append((path, path.relative_to(source).as_posix()))
    return sorted(found, key=lambda pair: pair[1])


def targets(source: Path, dest: StoreURI, follow_links: bool = True) -> list[tuple[Path, str]]:
    """``(local path, key)`` pairs: a file goes to ``dest`` itself unless ``dest`` is a
    prefix (then ``dest/<file name>``); a directory's files go below ``dest``."""
    files = local_files(source, follow_links)
    if source.is_file() and not dest.is_prefix:
        return [(source, dest.key)]
    base = dest.as_prefix().key
    return [(path, base + rel) for path, rel in files]


async def upload(opener: Opener, source: Path, dest: str | StoreURI, *,
                 options: UploadOptions | None = None,
                 on_progress: Callable[[Progress], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> UploadResult:
    options = options or UploadOptions()
    uri = parse_uri(dest, field="dest")
    store = opener(uri)
    pairs = sorted(targets(source, uri, options.follow_links),
                   key=lambda pair: -pair[0].stat().st_size)
    sizes = {key: path.stat().st_size for path, key in pairs}
    start = clock()
    meter = ProgressMeter("outputs", sum(sizes.values()), len(pairs), start=start,
                          interval=options.progress_interval)
    gate = asyncio.Semaphore(max(1, options.concurrency))
    failures: dict[str, str] = {}
    done: list[ObjectInfo] = []

    async def one(path: Path, key: str) -> None:
        async with gate:
            call = functools.partial(store.put_file, key, path, part_size=options.part_size,
                                     concurrency=options.part_concurrency)
            try:
                etag = await retrying(call, options.retry, f"upload of {path}")
            except StorageError as exc:
                failures[str(store.uri(key))] = str(exc)
                return
        done.append(ObjectInfo(key, sizes[key], etag))
        progress = meter.add(sizes[key], clock(), objects=1)
        if progress and on_progress:
            on_progress(progress)

    await asyncio.gather(*(one(path, key) for path, key in pairs))
    if failures:
        raise TransferFailed(f"{len(failures)} of {len(pairs)} file(s) could not be uploaded "
                             f"to {uri}: " + "; ".join(f"{k}: {v}" for k, v in
                                                      sorted(failures.items())[:5]),
                             failures=failures, hint="the store rejected them or stayed "
                             "unavailable through the retries; the others are uploaded")
    result_uri = store.uri(pairs[0][1]) if source.is_file() and not uri.is_prefix else uri
    return UploadResult(result_uri, tuple(sorted(done, key=lambda o: o.key)),
                        sum(sizes.values()), clock() - start)
