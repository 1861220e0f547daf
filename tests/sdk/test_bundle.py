"""Code bundles: reproducible bytes, ignore files at any depth, links, the size limit."""

from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path

import pytest

from bourse.core.errors import InvalidInput
from bourse.sdk.bundle import Entry, biggest, human_size, iter_file, pack
from bourse.sdk.errors import BundleTooLarge


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def names(bundle_path: Path) -> list[str]:
    with tarfile.open(bundle_path) as tar:
        return [m.name for m in tar.getmembers()]


def files(bundle_path: Path) -> set[str]:
    with tarfile.open(bundle_path) as tar:
        return {m.name for m in tar.getmembers() if not m.isdir()}


@pytest.fixture(autouse=True)
def private_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tarballs packed to the default temporary file land in this test's folder."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write(root, {"train.py": "print('hi')\n", "lib/model.py": "x = 1\n", "README.md": "# p\n"})
    return root


def test_same_content_same_bytes(project: Path, tmp_path: Path) -> None:
    first = pack(project, out=tmp_path / "a.tar.gz")
    os.utime(project / "train.py", (1, 1))  # times, owners and order must not matter
    (project / "lib" / "model.py").chmod(0o600)
    second = pack(project, out=tmp_path / "b.tar.gz")
    assert first.sha256 == second.sha256
    assert first.path.read_bytes() == second.path.read_bytes()
    assert (first.size, first.file_count) == (first.path.stat().st_size, 3)


def test_same_content_elsewhere_same_hash(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere" / "copy"
    write(copy, {"README.md": "# p\n", "lib/model.py": "x = 1\n", "train.py": "print('hi')\n"})
    assert pack(project).sha256 == pack(copy).sha256


def test_content_change_changes_hash(project: Path) -> None:
    before = pack(project).sha256
    (project / "train.py").write_text("print('bye')\n")
    assert pack(project).sha256 != before


def test_archive_is_normalised(project: Path) -> None:
    (project / "train.py").chmod(0o750)
    bundle = pack(project)
    header = bundle.path.read_bytes()[:10]
    assert header[4:8] == b"\0\0\0\0"  # gzip MTIME
    assert header[3] & 0x08 == 0  # FNAME flag: no file name in the gzip header
    with tarfile.open(bundle.path) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert names(bundle.path) == ["README.md", "lib", "lib/model.py", "train.py"]
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in members.values())
    assert all(m.uname == "" and m.gname == "" for m in members.values())
    assert members["train.py"].mode == 0o755
    assert members["README.md"].mode == 0o644


def test_always_skipped(project: Path) -> None:
    write(project, {".git/HEAD": "ref", ".venv/bin/python": "", "lib/__pycache__/m.pyc": "",
                    "lib/old.pyc": "", "sub/.venv/x": "", ".env.example": "A=1"})
    assert files(pack(project).path) == {"README.md", "lib/model.py", "train.py",
                                         ".env.example"}


def test_gitignore_at_any_depth(project: Path) -> None:
    write(project, {
        ".gitignore": "*.log\n/build/\ndata/\n",
        "run.log": "", "lib/deep.log": "", "build/out.o": "", "lib/build/kept.txt": "",
        "data/big.bin": "", "lib/data/also.bin": "",
        "lib/.gitignore": "secret.txt\n!keep.log\n", "lib/secret.txt": "", "secret.txt": "",
        "lib/keep.log": "",
    })
    assert files(pack(project).path) == {
        "README.md", "train.py", ".gitignore", "lib/model.py", "lib/.gitignore",
        "lib/build/kept.txt",  # /build/ is anchored at the root
        "secret.txt",  # lib/.gitignore applies under lib/ only
        "lib/keep.log",  # re-included by the deeper file
    }


def test_bourseignore_adds_to_and_overrides_gitignore(project: Path) -> None:
    write(project, {".gitignore": "*.csv\n", ".bourseignore": "checkpoints/\n!labels.csv\n",
                    "labels.csv": "a", "other.csv": "b", "checkpoints/e1.pt": "",
                    "lib/.bourseignore": "model.py\n"})
    assert files(pack(project).path) == {"README.md", "train.py", ".gitignore",
                                         ".bourseignore", "labels.csv", "lib/.bourseignore"}


def test_symlink_inside_kept_outside_skipped(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.write_text("nope")
    (project / "link.py").symlink_to("lib/model.py")
    (project / "lib" / "abs.py").symlink_to(project / "train.py")
    (project / "escape").symlink_to(outside)
    (project / "lib" / "up").symlink_to("../../secret")
    (project / "dangling").symlink_to("missing.txt")
    bundle = pack(project)
    with tarfile.open(bundle.path) as tar:
        links = {m.name: m.linkname for m in tar.getmembers() if m.issym()}
    assert links == {"link.py": "lib/model.py", "lib/abs.py": "../train.py"}
    text = "\n".join(bundle.warnings)
    assert "escape" in text and "lib/up" in text and "outside" in text
    assert "dangling" in text
    assert bundle.file_count == 5


def test_symlinked_folder_is_a_link_not_a_copy(project: Path) -> None:
    (project / "alias").symlink_to("lib", target_is_directory=True)
    with tarfile.open(pack(project).path) as tar:
        alias = tar.getmember("alias")
    assert alias.issym() and alias.linkname == "lib"


def test_size_limit_names_the_biggest(project: Path) -> None:
    write(project, {"data/a.bin": os.urandom(40_000), "data/b.bin": os.urandom(30_000),
                    "weights.pt": os.urandom(20_000)})
    with pytest.raises(BundleTooLarge) as caught:
        pack(project, limit=50_000)
    text = str(caught.value)
    assert "48.8 KiB" in text
    assert text.index("data/ (68.4 KiB)") < text.index("weights.pt (19.5 KiB)")
    assert ".bourseignore" in text and "--no-code" in text
    assert caught.value.exit_code == 2


def test_size_limit_removes_partial_tarball(project: Path, tmp_path: Path) -> None:
    write(project, {"big.bin": os.urandom(20_000)})
    out = tmp_path / "out.tar.gz"
    with pytest.raises(BundleTooLarge):
        pack(project, limit=1000, out=out)
    assert not out.exists()


def test_biggest_does_not_repeat_nested_entries() -> None:
    entries = [Entry("data/x/a", "file", 100), Entry("data/x/b", "file", 50),
               Entry("m.pt", "file", 120), Entry("small", "file", 1)]
    assert biggest(entries, 3) == [("data/", 150), ("m.pt", 120), ("small", 1)]


def test_human_size() -> None:
    assert [human_size(n) for n in (10, 2048, 5 * 1024 ** 2, 3 * 1024 ** 3)] == [
        "10 B", "2.0 KiB", "5.0 MiB", "3.0 GiB"]


def test_iter_file_streams_in_chunks(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert list(iter_file(path, chunk=4)) == [b"xxxx", b"xxxx", b"xx"]


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not a directory"):
        pack(tmp_path / "nope")


def test_pack_reports_the_bytes_read_against_their_total(tmp_path: Path) -> None:
    big = os.urandom(300_000)
    write(tmp_path, {"a.bin": big, "sub/b.txt": "hello", "empty": ""})
    seen: list[tuple[int, int]] = []
    pack(tmp_path, out=tmp_path.parent / "p.tar.gz",
         progress=lambda done, total: seen.append((done, total)))
    total = len(big) + 5
    assert {t for _, t in seen} == {total}
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # never goes back
    assert seen[-1][0] == total
    assert len(seen) > 2  # told as it goes, not once at the end
