"""The in-memory store behaves as the real ones do where callers can tell."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bourse.storage import MemoryStore, ObjectNotFound, StoreUnavailable

pytestmark = pytest.mark.anyio


async def test_put_get_head_list_delete() -> None:
    store = MemoryStore("bkt")
    etag = await store.put("a/b/c.bin", b"hello")
    await store.put("a/bc", b"x")
    await store.put("ab", b"y")
    assert etag == hashlib.md5(b"hello").hexdigest()
    assert bytes(await store.get("a/b/c.bin")) == b"hello"
    assert bytes(await store.get_range("a/b/c.bin", 1, 3)) == b"ell"
    info = await store.head("a/b/c.bin")
    assert (info.key, info.size, info.etag) == ("a/b/c.bin", 5, etag)
    assert [o.key for o in await store.list("a")] == ["a/b/c.bin", "a/bc"]  # never "ab"
    assert [o.key for o in await store.list("")] == ["a/b/c.bin", "a/bc", "ab"]
    await store.delete("a/bc")
    await store.delete("a/bc")  # deleting twice is fine
    with pytest.raises(ObjectNotFound):
        await store.head("a/bc")
    assert str(store.uri("ab")) == "s3://bkt/ab"


async def test_multipart_etag_looks_like_s3(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 40
    (tmp_path / "f").write_bytes(payload)
    store = MemoryStore()
    etag = await store.put_file("f", tmp_path / "f", part_size=4096)
    parts = [payload[i:i + 4096] for i in range(0, len(payload), 4096)]
    expected = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
    assert etag == f"{expected}-3"


async def test_injected_faults_and_call_counts() -> None:
    store = MemoryStore()
    await store.put("k", b"v")
    store.fail("get", StoreUnavailable("flaky"), times=2)
    for _ in range(2):
        with pytest.raises(StoreUnavailable):
            await store.get("k")
    assert bytes(await store.get("k")) == b"v"
    assert store.calls["get"] == 3
