"""The pure core: cache keys, local paths, request splitting, eviction choice, retry, progress."""

from __future__ import annotations

import pytest

from bourse.storage import ObjectInfo, ProgressMeter, RetryPolicy, StorageError, format_bytes
from bourse.storage.plan import Entry, cache_digest, relative_path, requests, victims


def test_cache_digest_changes_with_every_field() -> None:
    base = cache_digest("s3://b", "k", "etag", 10)
    assert base == cache_digest("s3://b", "k", "etag", 10)
    variants = [("s3://c", "k", "etag", 10), ("s3://b", "k2", "etag", 10),
                ("s3://b", "k", "etag2", 10), ("s3://b", "k", "etag", 11),
                ("s3://b at http://other:1", "k", "etag", 10)]
    assert base not in {cache_digest(*v) for v in variants}
    assert len({cache_digest(*v) for v in variants}) == len(variants)


@pytest.mark.parametrize(("prefix", "key", "expected"), [
    ("data/", "data/a.bin", "a.bin"),
    ("data/", "data/sub/dir/b.bin", "sub/dir/b.bin"),
    ("", "top.txt", "top.txt"),
    ("other/", "x/y/file.bin", "file.bin"),  # a single object: its base name
])
def test_relative_path(prefix: str, key: str, expected: str) -> None:
    assert relative_path(prefix, key) == expected


@pytest.mark.parametrize("key", ["data/../../etc/passwd", "data/a//b", "data/./x", "data/"])
def test_relative_path_refuses_escapes(key: str) -> None:
    with pytest.raises(StorageError, match="cannot be mapped to a local file"):
        relative_path("data/", key)


def test_requests_split_large_objects_and_put_them_first() -> None:
    objects = [("s", ObjectInfo("small", 3, "e")), ("l", ObjectInfo("large", 25, "e")),
               ("z", ObjectInfo("zero", 0, "e")), ("m", ObjectInfo("exact", 10, "e"))]
    got = [(r.digest, r.offset, r.length, r.ranged) for r in requests(objects, 10)]
    assert got == [("l", 0, 10, True), ("l", 10, 10, True), ("l", 20, 5, True),
                   ("m", 0, 10, False), ("s", 0, 3, False), ("z", 0, 0, False)]


def test_victims_are_least_recently_used_and_never_pinned() -> None:
    entries = [Entry("a", 10, 1.0), Entry("b", 10, 2.0), Entry("c", 10, 3.0),
               Entry("d", 10, 4.0)]
    assert [e.digest for e in victims(entries, set(), 15)] == ["a", "b"]
    assert [e.digest for e in victims(entries, {"a"}, 15)] == ["b", "c"]
    assert [e.digest for e in victims(entries, {"a", "b", "c", "d"}, 15)] == []
    assert victims(entries, set(), 0) == []
    assert [e.digest for e in victims(entries, {"c"}, 100)] == ["a", "b", "d"]


@pytest.mark.parametrize(("failures", "delay"), [(1, 0.5), (2, 1.0), (3, 2.0), (4, None)])
def test_retry_policy(failures: int, delay: float | None) -> None:
    assert RetryPolicy(attempts=4, base=0.5, cap=10).delay(failures) == delay


def test_retry_policy_caps_the_delay() -> None:
    assert RetryPolicy(attempts=20, base=1, cap=5).delay(10) == 5


@pytest.mark.parametrize(("count", "text"), [
    (0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (1_200_000_000, "1.2 GB"),
    (310_000_000, "310 MB"), (2_000_000_000, "2.0 GB"), (12_345_678, "12.3 MB")])
def test_format_bytes(count: int, text: str) -> None:
    assert format_bytes(count) == text


def test_progress_meter_throttles_and_measures_the_rate() -> None:
    meter = ProgressMeter("inputs", 2_000_000_000, 4, start=0.0, interval=0.5, window=3.0)
    assert meter.add(100_000_000, 0.1) is None  # throttled
    first = meter.add(100_000_000, 0.6)
    assert first is not None and first.done == 200_000_000
    assert first.rate == pytest.approx(200_000_000 / 0.6)
    assert meter.add(10, 0.7) is None
    for t in (2.0, 3.0, 4.0, 5.0):
        meter.add(310_000_000, t)
    progress = meter.snapshot(5.0)
    assert progress.rate == pytest.approx(310_000_000, rel=0.01)  # the last 3 s only
    assert str(progress) == "inputs: 1.4 GB / 2.0 GB, 310 MB/s"
    last = meter.add(2_000_000_000 - meter.done, 5.01, objects=4)
    assert last is not None and last.finished  # the last byte is always reported


def test_progress_meter_counts_cached_bytes_as_done() -> None:
    meter = ProgressMeter("inputs", 100, 2, start=0.0, done=60, objects_done=1)
    progress = meter.add(40, 1.0, objects=1)
    assert progress is not None and progress.finished and progress.rate == 40.0
