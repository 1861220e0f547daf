"""The node's bundle cache: starts of jobs with the same bundle arriving together share one
download (an app run's stages: they used to race on one part file, and the loser's start
was never answered), a start cancelled meanwhile leaves the other's download alone, and a
download that cannot be stored is a clear error."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from bourse.agent.bundles import BundleCache, BundleError
from bourse.storage import MemoryStore

pytestmark = pytest.mark.anyio
CODE = b"print('hello')\n" * 1000
SHA = hashlib.sha256(CODE).hexdigest()
KEY = f"bundles/{SHA}.tar.gz"


class SlowStore(MemoryStore):
    """A store whose reads take a while and are counted."""

    reads = 0

    async def get_range(self, key: str, offset: int, length: int) -> bytes:
        self.reads += 1
        await asyncio.sleep(0.05)
        return bytes(await super().get_range(key, offset, length))


@pytest.fixture
async def store() -> SlowStore:
    made = SlowStore("bourse")
    await made.put(KEY, CODE)
    return made


def _cache(root: Path) -> BundleCache:
    return BundleCache(root, "http://127.0.0.1:9", "node-credential")  # nothing listens


async def test_starts_arriving_together_share_one_download(tmp_path: Path,
                                                           store: SlowStore) -> None:
    cache = _cache(tmp_path / "bundles")
    paths = await asyncio.gather(*(cache.fetch(SHA, store, KEY) for _ in range(3)))
    assert len(set(paths)) == 1 and paths[0].read_bytes() == CODE
    assert store.reads == 1
    assert sorted(p.name for p in (tmp_path / "bundles").iterdir()) == [f"{SHA}.tar.gz"]
    assert await cache.fetch(SHA, store, KEY) == paths[0] and store.reads == 1  # cached


async def test_a_cancelled_start_leaves_the_others_download(tmp_path: Path,
                                                            store: SlowStore) -> None:
    cache = _cache(tmp_path / "bundles")
    first = asyncio.ensure_future(cache.fetch(SHA, store, KEY))
    second = asyncio.ensure_future(cache.fetch(SHA, store, KEY))
    await asyncio.sleep(0.01)
    first.cancel()
    assert (await second).read_bytes() == CODE
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_a_corrupted_bundle_is_refused_and_leaves_no_part(tmp_path: Path,
                                                                store: SlowStore) -> None:
    await store.put(KEY, CODE + b"tampered")
    cache = _cache(tmp_path / "bundles")
    with pytest.raises(BundleError, match="corrupted"):
        await cache.fetch(SHA, store, KEY)
    assert list((tmp_path / "bundles").iterdir()) == []


async def test_a_cache_that_cannot_be_written_is_an_os_error_not_a_hang(
        tmp_path: Path, store: SlowStore) -> None:
    (tmp_path / "bundles").write_text("a file where the cache folder should be")
    with pytest.raises(OSError):
        await _cache(tmp_path / "bundles").fetch(SHA, store, KEY)
