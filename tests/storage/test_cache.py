"""The content-addressed cache: atomic entries, pins, LRU eviction within a limit, clear errors."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bourse.storage import CacheFull, ContentCache


def put(cache: ContentCache, digest: str, size: int, used_at: float) -> Path:
    tmp = cache.tmp_path(digest)
    tmp.write_bytes(b"x" * size)
    tmp.chmod(0o444)  # as prefetch creates them
    path = cache.commit(tmp, digest)
    os.utime(path, (used_at, used_at))
    return path


def digest(n: int) -> str:
    return f"{n:02d}" + "0" * 62


def test_commit_publishes_a_read_only_file_and_lookup_checks_size(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path, 1000, keep_free=0)
    path = put(cache, digest(1), 10, 1.0)
    assert path == cache.path(digest(1)) and stat.S_IMODE(path.stat().st_mode) == 0o444
    assert cache.lookup(digest(1), 10) == path
    assert cache.lookup(digest(1), 11) is None  # a different size is a different object
    assert cache.lookup(digest(2), 10) is None
    assert list(cache.tmp.iterdir()) == []


def test_eviction_is_lru_and_spares_pinned_entries(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path, 100, keep_free=0)
    for n in range(1, 5):
        put(cache, digest(n), 25, float(n))  # full: 100 of 100
    cache.pin("job-a.1", [digest(1)])
    cache.make_room(40)
    assert cache.lookup(digest(1), 25)  # pinned, though the oldest
    assert not cache.lookup(digest(2), 25) and not cache.lookup(digest(3), 25)
    assert cache.lookup(digest(4), 25)
    cache.unpin("job-a.1")
    cache.make_room(75)
    assert not cache.lookup(digest(1), 25)


def test_touch_refreshes_recency(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path, 50, keep_free=0)
    put(cache, digest(1), 25, 1.0)
    put(cache, digest(2), 25, 2.0)
    cache.touch([digest(1)])
    cache.make_room(25)
    assert cache.lookup(digest(1), 25) and not cache.lookup(digest(2), 25)


def test_pins_accumulate_and_survive_a_new_cache_object(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path, 100, keep_free=0)
    cache.pin("job/with odd:chars", [digest(1)])
    cache.pin("job/with odd:chars", [digest(2), digest(1)])
    assert ContentCache(tmp_path, 100).pinned() == {digest(1), digest(2)}
    cache.unpin("job/with odd:chars")
    assert cache.pinned() == set()


def test_cache_full_names_the_path_and_the_space(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path, 100, keep_free=0)
    put(cache, digest(1), 60, 1.0)
    cache.pin("j", [digest(1)])
    with pytest.raises(CacheFull) as caught:
        cache.make_room(50)
    error = caught.value
    assert error.path == str(tmp_path) and error.needed == 50 and error.available == 40
    assert str(tmp_path) in str(error) and "50 B" in str(error)
    with pytest.raises(CacheFull, match="cache limit is too small"):
        cache.make_room(101)


def test_disk_space_is_checked_beyond_the_limit(tmp_path: Path) -> None:
    free = ContentCache(tmp_path, 1 << 50, keep_free=0).disk_free()
    # nothing may be used, even if other processes free some space meanwhile
    cache = ContentCache(tmp_path, 1 << 50, keep_free=free + (1 << 40))
    with pytest.raises(CacheFull, match=f"not enough space for inputs at {tmp_path}"):
        cache.make_room(1)


def test_reservations_count_against_the_limit(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path, 100, keep_free=0)
    with cache.reserve(70), pytest.raises(CacheFull):
        cache.make_room(40)
    cache.make_room(40)


def test_partial_downloads_of_dead_processes_are_removed(tmp_path: Path) -> None:
    cache = ContentCache(tmp_path, 100, keep_free=0)
    mine = cache.tmp_path(digest(1))
    mine.write_bytes(b"in progress")
    dead = cache.tmp / f"{digest(2)}.999999999.0.part"
    dead.write_bytes(b"left over")
    ContentCache(tmp_path, 100)
    assert mine.exists() and not dead.exists()
