"""Prefetch: job inputs from object stores into the node's content-addressed cache, then a job
view of hard links (``<dest>/<input name>/...``).

List every input, look each object version up in the cache, download what is missing with
``concurrency`` requests in flight (small objects whole, large ones in ``part_size`` ranges
written in place with ``pwrite``), publish each file by rename once complete, and link the
job's view. A second prefetch of unchanged inputs lists, finds everything, and only links.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import functools
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from typing_extensions import Buffer

from bourse.core.uri import StoreURI, parse_uri
from bourse.storage.cache import ContentCache, is_disk_full, space_error
from bourse.storage.errors import InvalidURI, ObjectNotFound, StorageError, object_changed
from bourse.storage.listing import locate
from bourse.storage.plan import Request, cache_digest, relative_path, requests
from bourse.storage.progress import Progress, ProgressMeter
from bourse.storage.retry import RetryPolicy, retrying
from bourse.storage.store import (
    DEFAULT_WRITE_SIZE,
    MiB,
    ObjectInfo,
    ObjectStore,
    Opener,
    RangeSink,
    directory,
)

_INPUT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
ProgressCallback = Callable[[Progress], None]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PrefetchOptions:
    concurrency: int = 32  # requests in flight, each in a thread of its own
    part_size: int = 16 * MiB  # objects larger than this are fetched in ranges of this size
    chunk: int = 1 * MiB  # each range is written in chunks of this size as they arrive
    write_size: int = DEFAULT_WRITE_SIZE  # bytes per pwrite (see `RangeSink.write`)
    progress_interval: float = 0.5
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(frozen=True, slots=True)
class PrefetchResult:
    paths: dict[str, Path]  # input name -> its directory, or the file for a single object
    objects: int
    total_bytes: int
    downloaded_bytes: int
    seconds: float


@dataclass(frozen=True, slots=True)
class _Input:
    name: str
    uri: StoreURI
    store: ObjectStore
    single: bool  # the URI names one object, not a prefix
    objects: tuple[tuple[str, ObjectInfo, str], ...]  # (digest, object, relative path)


def check_input_name(name: str) -> str:
    if not _INPUT_NAME.match(name):
        raise InvalidURI(f"invalid input name {name!r}", field="inputs",
                         hint="use letters, digits, '_', '.' and '-' (it becomes a directory "
                              "and part of BOURSE_INPUT_<NAME>)")
    return name


class Prefetcher:
    def __init__(self, cache: ContentCache, opener: Opener,
                 options: PrefetchOptions | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cache, self.opener = cache, opener
        self.options = options or PrefetchOptions()
        self.clock = clock
        self._inflight: dict[str, asyncio.Future[None]] = {}

    async def prefetch(self, inputs: Mapping[str, str | StoreURI], dest: Path, *, holder: str,
                       on_progress: ProgressCallback | None = None,
                       opener: Opener | None = None) -> PrefetchResult:
        """Make every input available under ``dest``; the cache entries stay pinned for
        ``holder`` (e.g. ``"<job>.<attempt>"``) until `release`. ``opener`` replaces the
        prefetcher's own for this call: one node-wide prefetcher serves attempts that each
        hold their own scoped credentials (cache keys do not depend on credentials, and every
        attempt lists or heads its inputs with its own key before a cache hit counts)."""
        start = self.clock()
        opener = opener or self.opener
        resolved = await asyncio.gather(*(
            self._resolve(check_input_name(name), parse_uri(uri, field=f"inputs.{name}"), opener)
            for name, uri in inputs.items()))
        wanted = {digest: (item.store, info) for item in resolved
                  for digest, info, _ in item.objects}
        self.cache.pin(holder, wanted)
        missing = [(d, s, i) for d, (s, i) in wanted.items() if not self.cache.lookup(d, i.size)]
        total = sum(info.size for _, info in wanted.values())
        need = sum(info.size for _, _, info in missing)
        meter = ProgressMeter("inputs", total, len(wanted), start=start, done=total - need,
                              objects_done=len(wanted) - len(missing),
                              interval=self.options.progress_interval)
        downloaded = await self._fetch_missing(missing, meter, on_progress)
        self.cache.touch(wanted)
        paths = {item.name: self._materialize(item, dest) for item in resolved}
        if on_progress:
            on_progress(meter.snapshot(self.clock()))
        return PrefetchResult(paths, len(wanted), total, downloaded, self.clock() - start)

    def release(self, holder: str) -> None:
        """The job attempt is over: its inputs may be evicted again."""
        self.cache.unpin(holder)

    async def _resolve(self, name: str, uri: StoreURI, opener: Opener) -> _Input:
        store = opener(uri)
        found = await locate(store, uri)
        if found.single:
            info = found.objects[0]
            digest = cache_digest(store.origin, info.key, info.etag, info.size)
            return _Input(name, uri, store, True, ((digest, info, uri.name),))
        if not found.objects:
            raise ObjectNotFound(f"input {name!r}: no object at {uri}",
                                 hint="check the URI; a prefix must contain objects")
        prefix = directory(uri.key)
        return _Input(name, uri, store, False, tuple(
            (cache_digest(store.origin, info.key, info.etag, info.size), info,
             relative_path(prefix, info.key)) for info in found.objects))

    async def _fetch_missing(self, missing: list[tuple[str, ObjectStore, ObjectInfo]],
                             meter: ProgressMeter, on_progress: ProgressCallback | None) -> int:
        """Download what is missing, sharing objects another prefetch is already fetching;
        returns the bytes this call downloaded."""
        theirs = [(self._inflight[d], i) for d, _, i in missing if d in self._inflight]
        mine = [(d, s, i) for d, s, i in missing if d not in self._inflight]
        need = sum(i.size for _, _, i in mine)
        loop = asyncio.get_running_loop()
        futures = {d: loop.create_future() for d, _, _ in mine}
        self._inflight |= futures
        try:
            with self.cache.reserve(need):
                await _Download(self, mine, need, meter, on_progress).run()
            for future in futures.values():
                future.set_result(None)
        except BaseException as exc:
            for future in futures.values():
                future.set_exception(StorageError(f"a concurrent prefetch failed: {exc}"))
                future.exception()  # retrieved: no "never retrieved" warning if unused
            raise
        finally:
            for digest in futures:
                del self._inflight[digest]
        for future, info in theirs:
            await future
            meter.add(info.size, self.clock(), objects=1)
        return need

    def _materialize(self, item: _Input, dest: Path) -> Path:
        base = dest / item.name
        if base.is_symlink() or base.is_file():
            base.unlink()
        elif base.exists():
            shutil.rmtree(base)
        base.mkdir(parents=True)
        made = {base}
        for digest, _, rel in item.objects:
            target = base / rel
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            _link(self.cache.path(digest), target)
        return base / item.objects[0][2] if item.single else base


def _link(source: Path, target: Path) -> None:
    """A hard link (the job sees a plain read-only file that eviction cannot pull away), or
    a symlink when the cache is on another filesystem."""
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        os.symlink(source, target)


class _File:
    """One object being downloaded into its temporary file. Parts are written by pool
    threads, so opening and the count of missing bytes are guarded by a lock; writes to
    distinct ranges need none."""

    def __init__(self, tmp: Path, size: int, *, preallocate: bool) -> None:
        self.tmp, self.size, self.remaining = tmp, size, size
        self.preallocate = preallocate
        self.fd = -1
        self.lock = threading.Lock()

    def descriptor(self) -> int:
        with self.lock:
            if self.fd < 0:
                self._open()
            return self.fd

    def _open(self) -> None:
        # read-only from birth: the open descriptor may still write, no chmod needed later
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            if self.preallocate:  # a large object: ENOSPC now rather than half-way
                os.posix_fallocate(fd, 0, self.size)
        except OSError:
            os.close(fd)
            self.tmp.unlink(missing_ok=True)
            raise
        self.fd = fd

    def account(self, nbytes: int) -> bool:
        """``nbytes`` more were written; True when the file is complete (then it is closed)."""
        with self.lock:
            self.remaining -= nbytes
            if self.remaining == 0 and self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
                return True
        return False

    def discard(self) -> None:
        with self.lock:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
        self.tmp.unlink(missing_ok=True)


@dataclass(slots=True)
class _Fetched:
    """How far one request got, kept across retries (a retry resumes there)."""

    bytes: int = 0
    complete: bool = False  # the chunk written last completed the file


class _Download:
    """The download of a set of missing objects: ``concurrency`` requests in flight, each
    fetched and written by a worker thread (`ObjectStore.read_range`), so a chunk goes from
    the HTTP client to ``pwrite`` without an event-loop round trip (those thread wake-ups
    were ~14 % of the client's CPU, docs/storage.md). Parts of a large object land in one
    temp file, published when its last part lands. File system calls stay off the event
    loop: ``open`` and ``rename`` can block for milliseconds while the kernel writes back
    earlier downloads."""

    def __init__(self, owner: Prefetcher, missing: list[tuple[str, ObjectStore, ObjectInfo]],
                 need: int, meter: ProgressMeter, on_progress: ProgressCallback | None) -> None:
        self.cache, self.options, self.clock = owner.cache, owner.options, owner.clock
        self.stores = {digest: store for digest, store, _ in missing}
        self.requests: Iterator[Request] = iter(requests(
            ((d, i) for d, _, i in missing), self.options.part_size))
        self.need, self.meter, self.on_progress = need, meter, on_progress
        self.files: dict[str, _File] = {}
        self.running: set[concurrent.futures.Future[Any]] = set()
        self.stopping = threading.Event()  # a request failed: threads stop at the next chunk
        self.lock = threading.Lock()  # guards the meter, which every thread advances

    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        concurrency = max(1, self.options.concurrency)
        with concurrent.futures.ThreadPoolExecutor(concurrency, "bourse-prefetch") as self.pool:
            workers = [asyncio.ensure_future(self._worker()) for _ in range(concurrency)]
            try:
                await asyncio.gather(*workers)
            except BaseException:
                self.stopping.set()
                for worker in workers:
                    worker.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                concurrent.futures.wait(list(self.running))  # no thread touches a file below
                for file in self.files.values():
                    file.discard()
                raise

    async def _worker(self) -> None:
        for request in self.requests:
            file = self.files.get(request.digest)
            if file is None:
                file = self.files[request.digest] = _File(
                    self.cache.tmp_path(request.digest), request.size,
                    preallocate=request.ranged)
            fetched = _Fetched()
            await retrying(functools.partial(self._fetch, request, file, fetched),
                           self.options.retry, f"download of {request.key}")
            if fetched.bytes != request.length:
                raise object_changed(request.key)
            if fetched.complete:
                del self.files[request.digest]
            self._advance(0, objects=int(fetched.complete))

    async def _fetch(self, request: Request, file: _File, fetched: _Fetched) -> None:
        if request.length == 0:  # an empty object: nothing to range over
            await self.stores[request.digest].get(request.key)
            fetched.complete = await self._in_thread(self._write, file, request, 0, b"")
        else:
            await self._in_thread(self._stream, request, file, fetched)

    async def _in_thread(self, call: Callable[..., T], *args: Any) -> T:
        future = self.pool.submit(call, *args)
        self.running.add(future)  # until the thread is done, even if this task is cancelled
        future.add_done_callback(self.running.discard)
        return await asyncio.wrap_future(future)

    def _stream(self, request: Request, file: _File, fetched: _Fetched) -> None:
        """In a worker thread: the request's bytes (from where an earlier try stopped) into
        the file as they arrive (`ObjectStore.read_range_into`)."""
        store = self.stores[request.digest]
        start, left = request.offset + fetched.bytes, request.length - fetched.bytes
        sink = _Sink(self, request, file, fetched, start)
        try:
            store.read_range_into(request.key, start, left, sink, chunk=self.options.chunk,
                                  etag=request.etag)
        except OSError as exc:
            raise self._disk_error(exc) from None

    def _advance(self, nbytes: int, *, objects: int = 0) -> None:
        """Count progress, from any thread; reports run on the event loop's thread, in order."""
        with self.lock:
            progress = self.meter.add(nbytes, self.clock(), objects=objects)
            if progress and self.on_progress:
                self.loop.call_soon_threadsafe(self.on_progress, progress)

    def _write(self, file: _File, request: Request, offset: int, data: Buffer) -> bool:
        """In a worker thread: write an empty object's file and publish it."""
        try:
            os.pwrite(file.descriptor(), data, offset)
            return self._complete(file, request, memoryview(data).nbytes)
        except OSError as exc:
            raise self._disk_error(exc) from None

    def _complete(self, file: _File, request: Request, nbytes: int) -> bool:
        """Count bytes written; publish the file once it is whole."""
        if not file.account(nbytes):
            return False
        self.cache.commit(file.tmp, request.digest)
        return True

    def _disk_error(self, exc: OSError) -> Exception:
        if is_disk_full(exc):
            return space_error(self.cache.root, self.need, max(self.cache.disk_free(), 0),
                               "this prefetch")
        return exc


class _Sink(RangeSink):
    """Where one try of one request lands: its part of the object's temporary file."""

    def __init__(self, download: _Download, request: Request, file: _File, fetched: _Fetched,
                 position: int) -> None:
        self.download, self.request, self.file, self.fetched = download, request, file, fetched
        self.position, self.write_size = position, download.options.write_size

    def descriptor(self) -> int:
        return self.file.descriptor()

    def write(self, data: Buffer) -> bool:
        if self.download.stopping.is_set():
            return False
        if self.fetched.bytes + memoryview(data).nbytes > self.request.length:
            raise object_changed(self.request.key)
        return super().write(data)

    def advance(self, nbytes: int) -> bool:
        self.position += nbytes
        self.fetched.bytes += nbytes
        self.fetched.complete = self.download._complete(self.file, self.request, nbytes)
        self.download._advance(nbytes)
        return not self.download.stopping.is_set()
