"""Moving what a `copyplan.Plan` says to copy: uploads (``put_file``, multipart above the part
size), downloads (ranged GETs written into a temporary file by worker threads, renamed into
place once whole) and store-to-store copies (a server-side copy within a bucket, through a
temporary file between buckets), ``concurrency`` objects at a time.

Transient failures are retried per object (`RetryPolicy`); obstore retries each part of a
multipart upload by itself. An object that still fails is reported with the others' outcome
(`TransferResult.failures`) rather than hiding it; an interrupted copy leaves whole objects
only (uploads are atomic, downloads renamed when complete), so the next run skips them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bourse.storage.copyplan import Item, Plan
from bourse.storage.errors import StorageError, object_changed
from bourse.storage.retry import RetryPolicy, retrying
from bourse.storage.store import DEFAULT_PART_SIZE, ObjectStore, Opener, RangeSink

PARTIAL = ".bourse-partial"


@dataclass(frozen=True, slots=True)
class TransferOptions:
    concurrency: int = 16  # objects in flight
    part_size: int = DEFAULT_PART_SIZE  # multipart parts up, ranges down
    part_concurrency: int = 8  # parts of one object in flight
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass
class TransferResult:
    copied: list[Item] = field(default_factory=list)
    skipped: list[Item] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # source -> why
    seconds: float = 0.0

    def summary(self, plan: Plan) -> dict[str, Any]:
        """What ``bourse cp --json`` prints."""
        return {"source": plan.source.text, "dest": plan.dest.text,
                "copied": len(self.copied), "skipped": len(self.skipped),
                "failed": len(self.failures),
                "bytes_copied": sum(i.size for i in self.copied),
                "bytes_skipped": sum(i.size for i in self.skipped),
                "seconds": round(self.seconds, 3), "failures": self.failures}


Count = Callable[[int], None]  # bytes moved (called on the event loop's thread)


class Transfer:
    """Runs plans over ``opener``'s stores. ``on_bytes`` sees bytes as they move;
    ``on_object`` sees each object once it is in place (an exception it raises stops the
    copy, as an interrupt would)."""

    def __init__(self, opener: Opener, options: TransferOptions | None = None, *,
                 on_bytes: Count | None = None,
                 on_object: Callable[[Item], None] | None = None) -> None:
        self.opener, self.options = opener, options or TransferOptions()
        self.on_bytes, self.on_object = on_bytes, on_object

    async def run(self, plan: Plan) -> TransferResult:
        result = TransferResult(skipped=list(plan.skip))
        start = time.monotonic()
        move = self._mover(plan)
        gate = asyncio.Semaphore(max(1, self.options.concurrency))
        stopped = asyncio.Event()  # on_object raised: no further object may start

        async def one(item: Item) -> None:
            async with gate:
                if stopped.is_set():
                    return
                try:
                    await retrying(functools.partial(move, item), self.options.retry,
                                   f"copy of {item.source}")
                except (StorageError, OSError) as exc:
                    result.failures[item.source] = str(exc)
                    return
                result.copied.append(item)
                if self.on_object is not None:  # before the next object may start
                    try:
                        self.on_object(item)
                    except BaseException:
                        stopped.set()  # set before the gate lets a waiting object in
                        raise

        async with asyncio.TaskGroup() as group:
            for item in sorted(plan.copy, key=lambda i: -i.size):  # largest first
                group.create_task(one(item))
        result.seconds = time.monotonic() - start
        return result

    def _mover(self, plan: Plan) -> Callable[[Item], Awaitable[None]]:
        source, dest = plan.source, plan.dest
        if source.path is not None:
            assert dest.uri is not None
            return functools.partial(self._upload, self.opener(dest.uri))
        assert source.uri is not None
        origin = self.opener(source.uri)
        if dest.path is not None:
            return functools.partial(self._download, origin)
        assert dest.uri is not None
        target = self.opener(dest.uri)
        if dest.uri.root == source.uri.root:
            return functools.partial(self._copy_within, origin)
        return functools.partial(self._copy_across, origin, target)

    def _count(self, nbytes: int) -> None:
        if self.on_bytes is not None and nbytes:
            self.on_bytes(nbytes)

    async def _upload(self, store: ObjectStore, item: Item) -> None:
        await store.put_file(item.dest, Path(item.source), part_size=self.options.part_size,
                             concurrency=self.options.part_concurrency)
        self._count(item.size)

    async def _download(self, store: ObjectStore, item: Item) -> None:
        await self.fetch(store, item, Path(item.dest))

    async def _copy_within(self, store: ObjectStore, item: Item) -> None:
        await store.copy(item.source, item.dest)
        self._count(item.size)

    async def _copy_across(self, origin: ObjectStore, target: ObjectStore, item: Item) -> None:
        with tempfile.TemporaryDirectory(prefix="bourse-cp-") as folder:
            staged = Path(folder, "object")
            await self.fetch(origin, item, staged, count=False)
            await target.put_file(item.dest, staged, part_size=self.options.part_size,
                                  concurrency=self.options.part_concurrency)
        self._count(item.size)

    async def fetch(self, store: ObjectStore, item: Item, dest: Path, *,
                    count: bool = True) -> None:
        """The object into a temporary file beside ``dest``, in ranges of ``part_size``
        fetched in parallel by worker threads, then renamed to ``dest``."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(f".{dest.name}{PARTIAL}")
        loop = asyncio.get_running_loop()
        counted = self._count if count else (lambda _n: None)

        def moved(nbytes: int) -> None:
            loop.call_soon_threadsafe(counted, nbytes)

        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            await self._ranges(store, item, descriptor, moved)
            os.close(descriptor)
            descriptor = -1
            os.replace(partial, dest)
        finally:
            if descriptor >= 0:
                os.close(descriptor)
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()

    async def _ranges(self, store: ObjectStore, item: Item, descriptor: int,
                      moved: Count) -> None:
        step = self.options.part_size
        starts = list(range(0, item.size, step))
        gate = asyncio.Semaphore(max(1, self.options.part_concurrency))

        async def one(start: int) -> None:
            length = min(step, item.size - start)
            sink = _FileSink(descriptor, start, moved)
            async with gate:
                await asyncio.to_thread(store.read_range_into, item.source, start, length,
                                        sink, etag=item.etag)
            if sink.position != start + length:
                raise object_changed(store.uri(item.source))

        await asyncio.gather(*(one(start) for start in starts))


class _FileSink(RangeSink):
    """One range of a download: written at its offset of the shared temporary file."""

    def __init__(self, descriptor: int, position: int, moved: Count) -> None:
        self._descriptor, self.position, self._moved = descriptor, position, moved

    def descriptor(self) -> int:
        return self._descriptor

    def advance(self, nbytes: int) -> bool:
        self.position += nbytes
        self._moved(nbytes)
        return True
