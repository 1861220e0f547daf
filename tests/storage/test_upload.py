"""Uploads and atomic checkpoints through the in-memory store."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bourse.storage import (
    AccessDenied,
    InvalidURI,
    MemoryStore,
    ObjectNotFound,
    RetryPolicy,
    StorageError,
    StoreUnavailable,
    TransferFailed,
    UploadOptions,
    latest_complete,
    list_complete,
    save_checkpoint,
    upload,
)

pytestmark = pytest.mark.anyio
FAST = UploadOptions(part_size=1024, retry=RetryPolicy(attempts=3, base=0.0))


async def test_a_directory_goes_below_the_prefix(make_tree: Any) -> None:
    tree = make_tree({"a.txt": b"a", "sub/b.bin": b"b" * 3000, "sub/deeper/c": b""})
    store = MemoryStore("out")
    result = await upload(lambda uri: store, tree, "s3://out/job-1/model/", options=FAST)
    assert sorted(store.objects) == ["job-1/model/a.txt", "job-1/model/sub/b.bin",
                                     "job-1/model/sub/deeper/c"]
    assert store.objects["job-1/model/sub/b.bin"][1].etag.endswith("-3")  # multipart
    assert result.bytes == 3001 and str(result.uri) == "s3://out/job-1/model/"
    assert [o.key for o in result.objects] == sorted(store.objects)


async def test_a_file_goes_to_the_key_or_below_a_prefix(make_tree: Any) -> None:
    tree = make_tree({"ckpt.pt": b"w" * 10})
    store = MemoryStore("out")
    first = await upload(lambda uri: store, tree / "ckpt.pt", "s3://out/ckpt/latest.pt")
    second = await upload(lambda uri: store, tree / "ckpt.pt", "s3://out/ckpt/")
    assert str(first.uri) == "s3://out/ckpt/latest.pt"
    assert sorted(store.objects) == ["ckpt/ckpt.pt", "ckpt/latest.pt"]
    assert str(second.uri) == "s3://out/ckpt/"


async def test_links_are_followed_unless_told_not_to(make_tree: Any, tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"key")
    tree = make_tree({"a.txt": b"a"})
    (tree / "link").symlink_to(tmp_path / "secret")
    store = MemoryStore("out")
    await upload(lambda uri: store, tree, "s3://out/followed/")
    await upload(lambda uri: store, tree, "s3://out/not/",
                 options=UploadOptions(follow_links=False))
    assert sorted(store.objects) == ["followed/a.txt", "followed/link", "not/a.txt"]
    (tmp_path / "linked").symlink_to(tree)
    with pytest.raises(StorageError, match="is a link"):
        await upload(lambda uri: store, tmp_path / "linked", "s3://out/x/",
                     options=UploadOptions(follow_links=False))


async def test_transient_failures_are_retried(make_tree: Any) -> None:
    tree = make_tree({"a": b"a", "b": b"b"})
    store = MemoryStore("out")
    store.fail("put_file", StoreUnavailable("503 Slow Down"), times=2)
    await upload(lambda uri: store, tree, "s3://out/x/", options=FAST)
    assert sorted(store.objects) == ["x/a", "x/b"] and store.calls["put_file"] == 4


async def test_persistent_failures_are_reported_after_the_others(make_tree: Any) -> None:
    tree = make_tree({"a": b"a", "b": b"b", "c": b"c"})
    store = MemoryStore("out")
    store.fail("put_file", StoreUnavailable("down"), times=3)  # one file, all its attempts
    with pytest.raises(TransferFailed) as caught:
        await upload(lambda uri: store, tree, "s3://out/x/",
                     options=UploadOptions(concurrency=1, retry=RetryPolicy(3, base=0.0)))
    assert len(caught.value.failures) == 1 and len(store.objects) == 2
    assert "1 of 3 file(s) could not be uploaded to s3://out/x/" in str(caught.value)


async def test_access_denied_is_not_retried(make_tree: Any) -> None:
    store = MemoryStore("out")
    store.fail("put_file", AccessDenied("denied"), times=1)
    with pytest.raises(TransferFailed, match="denied"):
        await upload(lambda uri: store, make_tree({"a": b"a"}), "s3://out/x/", options=FAST)
    assert store.calls["put_file"] == 1


async def test_latest_complete_sees_only_checkpoints_with_a_marker(make_tree: Any) -> None:
    store = MemoryStore("ckpt")
    prefix = "s3://ckpt/jobs/j1/checkpoints/"
    opener = lambda uri: store  # noqa: E731
    t = datetime(2026, 1, 1, tzinfo=UTC)
    assert await latest_complete(opener, prefix) is None
    await save_checkpoint(opener, make_tree({"w.pt": b"1"}, "s1"), prefix, step=100, now=t)
    second = await save_checkpoint(opener, make_tree({"w.pt": b"22", "opt.pt": b"o"}, "s2"),
                                   prefix, step=200, now=t)
    # a third whose upload died before its marker: files present, never visible
    store.fail("put", StoreUnavailable("gone"), times=5)
    with pytest.raises(StoreUnavailable):
        await save_checkpoint(opener, make_tree({"w.pt": b"333"}, "s3"), prefix, step=300,
                              now=t)
    assert "jobs/j1/checkpoints/step-000000000300/w.pt" in store.objects
    latest = await latest_complete(opener, prefix)
    assert latest == second and latest is not None
    assert latest.name == "step-000000000200" and latest.size == 3
    assert str(latest.uri) == prefix + "step-000000000200/"
    assert [c.step for c in await list_complete(opener, prefix)] == [100, 200]


async def test_checkpoint_names(make_tree: Any, tmp_path: Path) -> None:
    store = MemoryStore("ckpt")
    t = datetime(2026, 5, 4, 3, 2, 1, 123456, tzinfo=UTC)
    made = await save_checkpoint(lambda uri: store, make_tree({"w": b"1"}), "s3://ckpt/p", now=t)
    assert made.name == "20260504T030201123456Z" and made.step is None
    with pytest.raises(Exception, match="invalid checkpoint name"):
        await save_checkpoint(lambda uri: store, make_tree({"w": b"1"}), "s3://ckpt/p",
                              name="../up")


async def test_latest_of_step_named_checkpoints_reads_one_marker(make_tree: Any) -> None:
    store = MemoryStore("ckpt")
    prefix = "s3://ckpt/run/"
    for step in (9, 100, 30):  # listed in key order: 9, 30, 100
        await save_checkpoint(lambda uri: store, make_tree({"w": b"1"}, f"s{step}"), prefix,
                              step=step)
    store.calls.clear()
    latest = await latest_complete(lambda uri: store, prefix)
    assert latest is not None and latest.step == 100
    assert (store.calls["list"], store.calls["get"]) == (1, 1)


async def test_other_names_make_latest_read_every_marker(make_tree: Any) -> None:
    store = MemoryStore("ckpt")
    prefix = "s3://ckpt/run/"
    opener = lambda uri: store  # noqa: E731
    await save_checkpoint(opener, make_tree({"w": b"1"}, "a"), prefix, step=5)
    await save_checkpoint(opener, make_tree({"w": b"1"}, "b"), prefix, step=7, name="best")
    store.calls.clear()
    latest = await latest_complete(opener, prefix)
    assert latest is not None and latest.name == "best"  # step 7 beats step-...05
    assert (store.calls["list"], store.calls["get"]) == (1, 2)


async def test_a_marker_gone_since_the_listing_falls_back(make_tree: Any) -> None:
    store = MemoryStore("ckpt")
    prefix = "s3://ckpt/run/"
    opener = lambda uri: store  # noqa: E731
    for step in (1, 2):
        await save_checkpoint(opener, make_tree({"w": b"1"}, f"s{step}"), prefix, step=step)
    store.fail("get", ObjectNotFound("deleted"), times=1)  # the newest marker, once
    latest = await latest_complete(opener, prefix)
    assert latest is not None and latest.step == 2  # read again among every marker


async def test_step_names_are_reserved_for_their_step(make_tree: Any) -> None:
    store = MemoryStore("ckpt")
    for step, name in ((None, "step-000000000005"), (6, "step-000000000005"),
                       (5, "step-0000000000005")):
        with pytest.raises(InvalidURI, match="reserved for step 5"):
            await save_checkpoint(lambda uri: store, make_tree({"w": b"1"}), "s3://ckpt/p",
                                  step=step, name=name)
    made = await save_checkpoint(lambda uri: store, make_tree({"w": b"1"}), "s3://ckpt/p",
                                 step=5, name="step-000000000005")
    assert made.step == 5 and len([k for k in store.objects if k.startswith("p/.complete/")]) == 1
