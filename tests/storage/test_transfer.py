"""The copy engine behind ``bourse cp`` on the real SeaweedFS: a tree goes up and comes back
byte for byte (a multipart file included), what the destination already holds is skipped —
which needs the ETag computed here to be the store's, multipart too — an interrupted copy
resumes with the objects it had not copied only, and a file rewritten with other bytes of the
same size is copied again."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bourse.storage import SeaweedServer, Stores
from bourse.storage.copyplan import Place, PlanOptions, plan_copy
from bourse.storage.etag import local_etag, same_content
from bourse.storage.memory import MemoryStore
from bourse.storage.store import Opener
from bourse.storage.transfer import Transfer, TransferOptions
from conftest import made_bucket, s3_client

pytestmark = pytest.mark.anyio
PART = 5 << 20  # S3's smallest multipart part (SeaweedFS refuses smaller ones too)
OPTIONS = TransferOptions(concurrency=4, part_size=PART, part_concurrency=4)
ONE = TransferOptions(concurrency=1, part_size=PART)
RECURSIVE = PlanOptions(recursive=True, part_size=PART)


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def bucket(seaweed: SeaweedServer) -> Iterator[str]:
    """One bucket for the module, each test below a prefix of its own (fewer buckets made and
    deleted: SeaweedFS 4.48's volume server sometimes takes 12-29 s to stop instead of 2
    after these tests, "Volume stopped 29.3s" in its log; cause not found)."""
    yield from made_bucket(s3_client(seaweed))


@pytest.fixture
def stores(seaweed: SeaweedServer) -> Iterator[Stores]:
    """Stores whose connections are closed after the test (SeaweedFS waits for open ones
    when it stops)."""
    opened = Stores(seaweed.settings())
    yield opened
    opened.close()


def _tree(make_tree: Any) -> Path:
    files = {f"f{i:02d}.txt": f"file {i}\n".encode() * (i + 1) for i in range(10)}
    files["sub/big.bin"] = os.urandom(PART * 2 + 12345)  # three parts
    files["sub/empty"] = b""
    return Path(make_tree(files))


async def _copy(stores: Opener, source: str, dest: str, *,
                options: TransferOptions = OPTIONS, **extra: Any) -> Any:
    plan = await plan_copy(stores, Place.of(source), Place.of(dest, "dest"), RECURSIVE)
    return plan, await Transfer(stores, options, **extra).run(plan)


def _same_trees(a: Path, b: Path) -> None:
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


async def test_a_tree_goes_up_comes_back_and_is_not_copied_twice(
        stores: Stores, bucket: str, make_tree: Any, tmp_path: Path) -> None:
    tree = _tree(make_tree)
    dest = f"s3://{bucket}/data/digits/"

    plan, up = await _copy(stores, str(tree), dest)
    again_plan, again = await _copy(stores, str(tree), dest)
    _, down = await _copy(stores, dest, str(tmp_path / "back"))
    _, down_again = await _copy(stores, dest, str(tmp_path / "back"))
    _, within = await _copy(stores, dest, f"s3://{bucket}/copy/")  # the store copies
    _, within_again = await _copy(stores, dest, f"s3://{bucket}/copy/")
    copied = await stores(Place.of(dest).uri).get("copy/sub/big.bin")  # type: ignore[arg-type]

    assert (len(up.copied), len(up.skipped), up.failures) == (12, 0, {})
    big = next(i for i in plan.copy if i.source.endswith("big.bin"))
    info = await stores(plan.dest.uri).head(big.dest)
    assert info.etag.endswith("-3") and info.etag == local_etag(Path(big.source), PART)
    assert (len(again.copied), len(again.skipped), again_plan.bytes) == (0, 12, 0)
    _same_trees(tree, tmp_path / "back")
    assert (len(down.copied), len(down_again.copied), len(down_again.skipped)) == (12, 0, 12)
    assert not list((tmp_path / "back").rglob("*.bourse-partial"))
    assert (len(within.copied), len(within_again.skipped)) == (12, 12)
    assert bytes(copied) == (tree / "sub" / "big.bin").read_bytes()


async def test_an_interrupted_copy_copies_only_the_rest_when_run_again(
        stores: Stores, bucket: str, make_tree: Any) -> None:
    # single-part files, one at a time: an upload cut mid-request leaves SeaweedFS 4.48's
    # volume server 30 s to stop ("truncated request body" in its log)
    tree = Path(make_tree({f"f{i:02d}": os.urandom(1000 + i) for i in range(12)}))
    dest = f"s3://{bucket}/resume/"
    done: list[str] = []

    def stop_after_three(item: Any) -> None:
        done.append(item.dest)
        if len(done) == 3:
            raise Interrupted

    with pytest.raises(ExceptionGroup) as stopped:  # one at a time: none cut mid-request
        await _copy(stores, str(tree), dest, on_object=stop_after_three, options=ONE)
    plan, rest = await _copy(stores, str(tree), dest)

    assert stopped.group_contains(Interrupted)
    assert {i.dest for i in plan.skip} == set(done)
    assert {i.dest for i in rest.copied} == {i.dest for i in plan.copy}
    assert len(rest.copied) == 9 and not rest.failures


async def test_a_file_rewritten_with_the_same_size_is_copied_again(
        stores: Stores, bucket: str, make_tree: Any) -> None:
    tree = Path(make_tree({"a.txt": b"aaaa", "b.txt": b"bbbb"}))
    dest = f"s3://{bucket}/same-size/"
    await _copy(stores, str(tree), dest)
    (tree / "a.txt").write_bytes(b"AAAA")

    plan, result = await _copy(stores, str(tree), dest)

    assert [Path(i.source).name for i in result.copied] == ["a.txt"]
    assert [Path(i.source).name for i in plan.skip] == ["b.txt"]


async def test_objects_are_copied_to_another_bucket_through_a_local_file(
        make_tree: Any) -> None:
    from bourse.storage.memory import MemoryStores

    tree = _tree(make_tree)
    opener = MemoryStores()
    await _copy(opener, str(tree), "s3://one/a/")

    _, across = await _copy(opener, "s3://one/a/", "s3://two/c/")
    _, again = await _copy(opener, "s3://one/a/", "s3://two/c/")

    assert (len(across.copied), len(again.skipped)) == (12, 12)
    copied = opener(Place.of("s3://two/").uri)
    assert bytes(await copied.get("c/sub/big.bin")) == (tree / "sub" / "big.bin").read_bytes()


async def test_a_transient_failure_is_retried_and_a_lasting_one_reported(
        tmp_path: Path) -> None:
    from bourse.storage.errors import AccessDenied, StoreUnavailable
    from bourse.storage.memory import MemoryStores
    from bourse.storage.retry import RetryPolicy

    (tmp_path / "t").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "t" / name).write_bytes(name.encode())
    store = MemoryStore("mem")
    opener = MemoryStores(store)
    store.fail("put_file", StoreUnavailable("flaky"), times=2)
    plan = await plan_copy(opener, Place.of(str(tmp_path / "t")), Place.of("s3://mem/x/"),
                           PlanOptions(recursive=True))
    quick = TransferOptions(concurrency=1, retry=RetryPolicy(attempts=3, base=0.0))
    retried = await Transfer(opener, quick).run(plan)
    store.objects.clear()
    store.fail("put_file", AccessDenied("no"), times=1)
    denied = await Transfer(opener, quick).run(plan)

    assert (len(retried.copied), retried.failures) == (3, {})
    assert len(denied.copied) == 2 and len(denied.failures) == 1
    assert "no" in next(iter(denied.failures.values()))


def test_an_etag_of_another_kind_says_copy_again(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    etag = local_etag(path)

    assert same_content(path, 100, etag)
    assert not same_content(path, 100, "")  # no ETag: nothing to compare
    assert not same_content(path, 101, etag)
    assert not same_content(path, 100, etag + "-2")  # parts of a size not used here
