"""Prefetch through the in-memory store: layout, cache reuse, progress, failures."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typing_extensions import Buffer

from bourse.storage import (
    AccessDenied,
    CacheFull,
    ContentCache,
    MemoryStore,
    ObjectNotFound,
    Prefetcher,
    PrefetchOptions,
    Progress,
    RetryPolicy,
    StorageError,
    StoreUnavailable,
)

pytestmark = pytest.mark.anyio
PART = 1024


async def filled() -> MemoryStore:
    store = MemoryStore("data")
    for i in range(20):
        await store.put(f"digits/train/{i:02d}.bin", bytes([i]) * 100)
    await store.put("digits/big.bin", os.urandom(5 * PART + 17))
    await store.put("digits/empty.bin", b"")
    await store.put("digits/dir-marker/", b"")  # console "folders" are skipped
    await store.put("models/m.pt", b"weights")
    return store


def prefetcher(tmp_path: Path, store: MemoryStore, **options: object) -> Prefetcher:
    cache = ContentCache(tmp_path / "cache", 1 << 30, keep_free=0)
    opts = PrefetchOptions(part_size=PART, concurrency=4, progress_interval=0,
                           retry=RetryPolicy(attempts=3, base=0.0))
    for key, value in options.items():
        opts = type(opts)(**{**{f: getattr(opts, f) for f in opts.__dataclass_fields__},
                             key: value})
    return Prefetcher(cache, lambda uri: store, opts)


async def test_prefix_and_object_inputs_are_materialised(tmp_path: Path) -> None:
    store = await filled()
    fetch = prefetcher(tmp_path, store)
    result = await fetch.prefetch({"data": "s3://data/digits/", "model": "s3://data/models/m.pt"},
                                  tmp_path / "job", holder="job-1.1")
    data, model = result.paths["data"], result.paths["model"]
    assert data == tmp_path / "job" / "data" and model == tmp_path / "job" / "model" / "m.pt"
    assert model.read_bytes() == b"weights"
    for key, (payload, _) in store.objects.items():
        if key.startswith("digits/") and not key.endswith("/"):
            assert (data / key.removeprefix("digits/")).read_bytes() == payload
    assert not (data / "dir-marker").exists()
    assert result.objects == 23 and result.downloaded_bytes == result.total_bytes
    # the big object in 6 ranges, the others whole (as one range), the empty one by GET
    assert store.calls["get_range"] == 6 + 21 and store.calls["get"] == 1
    assert list(fetch.cache.tmp.iterdir()) == []


async def test_a_prefix_without_a_slash_and_a_missing_input(tmp_path: Path) -> None:
    store = await filled()
    fetch = prefetcher(tmp_path, store)
    result = await fetch.prefetch({"d": "s3://data/digits/train"}, tmp_path / "job", holder="h")
    assert len(list(result.paths["d"].iterdir())) == 20
    with pytest.raises(ObjectNotFound, match="input 'x': no object at s3://data/nothing"):
        await fetch.prefetch({"x": "s3://data/nothing"}, tmp_path / "job", holder="h")


async def test_second_prefetch_downloads_nothing(tmp_path: Path) -> None:
    store = await filled()
    fetch = prefetcher(tmp_path, store)
    await fetch.prefetch({"data": "s3://data/digits/"}, tmp_path / "job1", holder="j1")
    gets = store.calls["get"] + store.calls["get_range"]
    result = await fetch.prefetch({"data": "s3://data/digits/"}, tmp_path / "job2", holder="j2")
    assert store.calls["get"] + store.calls["get_range"] == gets
    assert result.downloaded_bytes == 0 and result.objects == 22
    same = tmp_path / "job1" / "data" / "big.bin", tmp_path / "job2" / "data" / "big.bin"
    assert same[0].stat().st_ino == same[1].stat().st_ino  # one copy on disk


async def test_a_changed_object_is_downloaded_again(tmp_path: Path) -> None:
    store = await filled()
    fetch = prefetcher(tmp_path, store)
    await fetch.prefetch({"m": "s3://data/models/m.pt"}, tmp_path / "job", holder="j")
    await store.put("models/m.pt", b"weights v2")
    result = await fetch.prefetch({"m": "s3://data/models/m.pt"}, tmp_path / "job", holder="j")
    assert result.downloaded_bytes == len(b"weights v2")
    assert result.paths["m"].read_bytes() == b"weights v2"


async def test_progress_reports_bytes_and_finishes(tmp_path: Path) -> None:
    store = await filled()
    seen: list[Progress] = []
    result = await prefetcher(tmp_path, store).prefetch(
        {"data": "s3://data/digits/"}, tmp_path / "job", holder="j", on_progress=seen.append)
    assert seen and seen[-1].finished and seen[-1].done == result.total_bytes
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert str(seen[-1]).startswith("inputs: 7.1 kB / 7.1 kB, ")


async def test_transient_errors_are_retried(tmp_path: Path) -> None:
    store = await filled()
    store.fail("get_range", StoreUnavailable("connection reset"), times=2)
    result = await prefetcher(tmp_path, store).prefetch(
        {"data": "s3://data/digits/"}, tmp_path / "job", holder="j")
    assert (result.paths["data"] / "big.bin").read_bytes() == store.objects["digits/big.bin"][0]


class BreaksMidStream(MemoryStore):
    """Streams ranges in small chunks and drops the connection once, half-way through the
    first range it serves; records where each stream started."""

    def __init__(self, bucket: str) -> None:
        super().__init__(bucket)
        self.broken = False
        self.starts: list[tuple[str, int, int]] = []

    async def stream_range(self, key: str, start: int, length: int,
                           chunk: int = 0) -> AsyncIterator[Buffer]:
        self.starts.append((key, start, length))
        data = bytes(await self.get_range(key, start, length))
        for at in range(0, len(data), 100):
            if not self.broken and key.endswith("big.bin") and at >= 200:
                self.broken = True
                raise StoreUnavailable("connection reset mid-stream")
            yield data[at:at + 100]


async def test_a_broken_stream_resumes_where_it_stopped(tmp_path: Path) -> None:
    store = BreaksMidStream("data")
    source = await filled()
    store.objects.update(source.objects)
    result = await prefetcher(tmp_path, store).prefetch(
        {"data": "s3://data/digits/"}, tmp_path / "job", holder="j")
    assert (result.paths["data"] / "big.bin").read_bytes() == store.objects["digits/big.bin"][0]
    assert store.broken
    big = [(s, n) for k, s, n in store.starts if k.endswith("big.bin")]
    ranges = [(s, n) for s, n in big if s % PART == 0]
    [resumed] = [(s, n) for s, n in big if s % PART != 0]
    assert len(ranges) == 6  # five full parts and the 17-byte tail
    broken = next((s, n) for s, n in ranges if s == resumed[0] - 200)
    assert resumed == (broken[0] + 200, broken[1] - 200)  # only what was missing


async def test_writes_in_pieces_smaller_than_a_chunk_land_in_place(tmp_path: Path) -> None:
    store = await filled()
    fetch = prefetcher(tmp_path, store, write_size=7)  # divides neither chunks nor parts
    result = await fetch.prefetch({"data": "s3://data/digits/"}, tmp_path / "job", holder="j")
    for key, (payload, _) in store.objects.items():
        if key.startswith("digits/") and not key.endswith("/"):
            assert (result.paths["data"] / key.removeprefix("digits/")).read_bytes() == payload


async def test_a_failed_prefetch_leaves_no_partial_file(tmp_path: Path) -> None:
    store = await filled()
    store.fail("get_range", StoreUnavailable("down"), times=100)
    fetch = prefetcher(tmp_path, store)
    with pytest.raises(StoreUnavailable):
        await fetch.prefetch({"data": "s3://data/digits/"}, tmp_path / "job", holder="j")
    assert list(fetch.cache.tmp.iterdir()) == []
    big = fetch.cache.entries()
    assert all(e.size != 5 * PART + 17 for e in big)


class SlowAndDenied(MemoryStore):
    """``slow.bin`` streams in 100 chunks, 20 ms apart; ``denied.bin`` is refused."""

    def __init__(self) -> None:
        super().__init__("data")
        self.served = 0

    async def stream_range(self, key: str, start: int, length: int,
                           chunk: int = 0) -> AsyncIterator[Buffer]:
        if key.endswith("denied.bin"):
            raise AccessDenied("access denied to s3://data/x/denied.bin")
        for at in range(start, start + length, 10):
            await asyncio.sleep(0.02)
            self.served += 1
            yield self.objects[key][0][at:min(at + 10, start + length)]


async def test_a_failed_request_stops_the_others_at_their_next_chunk(tmp_path: Path) -> None:
    store = SlowAndDenied()
    await store.put("x/slow.bin", os.urandom(1000))
    await store.put("x/denied.bin", b"secret")
    fetch = prefetcher(tmp_path, store)
    with pytest.raises(AccessDenied):
        await fetch.prefetch({"x": "s3://data/x/"}, tmp_path / "job", holder="j")
    assert store.served < 20  # not the 100 chunks (2 s) a thread left running would read
    assert list(fetch.cache.tmp.iterdir()) == [] and fetch.cache.entries() == []


async def test_full_disk_fails_with_the_path_and_no_partial_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await filled()
    fetch = prefetcher(tmp_path, store)
    real = os.posix_fallocate

    def fallocate(fd: int, offset: int, length: int) -> None:
        if length > PART:  # the big object does not fit
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    with pytest.raises(CacheFull) as caught:
        await fetch.prefetch({"data": "s3://data/digits/"}, tmp_path / "job", holder="j")
    assert str(fetch.cache.root) in str(caught.value) and caught.value.needed > 5 * PART
    assert list(fetch.cache.tmp.iterdir()) == []
    assert not (tmp_path / "job" / "data").exists()


async def test_space_is_checked_before_downloading(tmp_path: Path) -> None:
    store = await filled()
    fetch = prefetcher(tmp_path, store)
    fetch.cache.limit = 1000
    with pytest.raises(CacheFull, match="cache limit is too small"):
        await fetch.prefetch({"data": "s3://data/digits/"}, tmp_path / "job", holder="j")
    assert store.calls["get"] == store.calls["get_range"] == 0


async def test_inputs_in_use_are_not_evicted_until_released(tmp_path: Path) -> None:
    store = await filled()
    fetch = prefetcher(tmp_path, store)
    fetch.cache.limit = 8000
    await fetch.prefetch({"data": "s3://data/digits/"}, tmp_path / "a", holder="a")
    await store.put("other/blob", b"z" * 2000)
    with pytest.raises(CacheFull):  # "a" still holds 7.1 kB of the 8 kB
        await fetch.prefetch({"o": "s3://data/other/blob"}, tmp_path / "b", holder="b")
    fetch.release("a")
    await fetch.prefetch({"o": "s3://data/other/blob"}, tmp_path / "b", holder="b")
    assert fetch.cache.used() <= 8000


async def test_concurrent_prefetches_share_downloads(tmp_path: Path) -> None:
    store = await filled()
    fetch = prefetcher(tmp_path, store)
    first, second = await asyncio.gather(
        fetch.prefetch({"data": "s3://data/digits/"}, tmp_path / "a", holder="a"),
        fetch.prefetch({"data": "s3://data/digits/"}, tmp_path / "b", holder="b"))
    assert store.calls["get_range"] == 6 + 20 and store.calls["get"] == 1  # once each
    assert first.downloaded_bytes + second.downloaded_bytes == first.total_bytes


async def test_unsafe_keys_and_names_are_refused(tmp_path: Path) -> None:
    store = MemoryStore("data")
    await store.put("evil/../../escape", b"x")
    fetch = prefetcher(tmp_path, store)
    with pytest.raises(StorageError, match="cannot be mapped to a local file"):
        await fetch.prefetch({"e": "s3://data/evil/"}, tmp_path / "job", holder="j")
    with pytest.raises(StorageError, match="invalid input name"):
        await fetch.prefetch({"../x": "s3://data/evil/"}, tmp_path / "job", holder="j")
