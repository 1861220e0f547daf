"""Code bundles: a directory packed into a reproducible ``.tar.gz``, addressed by SHA-256.

The same files give the same bytes, so the same hash, and an unchanged directory is never
uploaded twice: entries are sorted, every timestamp is 0, owners are 0 with no names, modes are
reduced to 0644/0755, and the gzip header carries neither a name nor a time.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import tarfile
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

import anyio

from bourse.core.errors import BourseError, InvalidInput
from bourse.sdk.errors import BundleTooLarge
from bourse.sdk.ignore import IGNORE_FILES, Rules, ignored, parse_rules

MiB = 1024 * 1024
DEFAULT_LIMIT = 100 * MiB
CHUNK = MiB
# progress(done, total) in bytes: files read while packing, or bundle bytes sent
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Entry:
    path: str  # relative, '/'-separated
    kind: Literal["dir", "file", "link"]
    size: int = 0
    executable: bool = False
    target: str = ""  # a link's target, relative to the link's folder


@dataclass(frozen=True)
class Bundle:
    path: Path  # the tarball; the caller deletes it
    sha256: str
    size: int  # compressed bytes
    file_count: int  # regular files and symlinks
    warnings: tuple[str, ...] = ()


@dataclass
class _Scan:
    root: Path
    real_root: str
    entries: list[Entry] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def pack(root: Path | str, *, limit: int = DEFAULT_LIMIT, out: Path | None = None,
         progress: Progress | None = None) -> Bundle:
    """Pack ``root`` into ``out`` (a new temporary file by default); ``progress`` is told the
    bytes of files read so far against their total as packing goes."""
    scan = scan_dir(Path(root))
    if out is None:
        fd, name = tempfile.mkstemp(prefix="bourse-bundle-", suffix=".tar.gz")
        os.close(fd)
        out = Path(name)
    try:
        sha256, size = _write(scan, out, limit, _Meter(scan.entries, progress))
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    count = sum(1 for e in scan.entries if e.kind != "dir")
    return Bundle(out, sha256, size, count, tuple(scan.warnings))


def scan_dir(root: Path) -> _Scan:
    """Every entry to pack, in archive order, and what was skipped with a warning."""
    if not root.is_dir():
        raise InvalidInput(f"{root} is not a directory", field="code")
    scan = _Scan(root, os.path.realpath(root))
    _walk(scan, "", [])
    return scan


def _walk(scan: _Scan, rel: str, rules: list[Rules]) -> None:
    folder = scan.root / rel
    rules = rules + _rules_in(folder, f"{rel}/" if rel else "")
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        scan.warnings.append(f"skipped {rel or '.'}/: {exc.strerror}")
        return
    for name in names:
        _visit(scan, f"{rel}/{name}" if rel else name, rules)


def _visit(scan: _Scan, path: str, rules: list[Rules]) -> None:
    full = scan.root / path
    info = os.lstat(full)
    if stat.S_ISDIR(info.st_mode):
        if not ignored(path, True, rules):
            scan.entries.append(Entry(path, "dir"))
            _walk(scan, path, rules)
    elif ignored(path, False, rules):
        return
    elif stat.S_ISLNK(info.st_mode):
        _link(scan, path, full)
    elif stat.S_ISREG(info.st_mode):
        scan.entries.append(Entry(path, "file", info.st_size, bool(info.st_mode & 0o111)))
    else:
        scan.warnings.append(f"skipped {path}: not a regular file, folder or link")


def _link(scan: _Scan, path: str, full: Path) -> None:
    """Keep a link whose target lies inside the root (as a relative link); skip any other."""
    resolved = os.path.realpath(full)
    if not (resolved + os.sep).startswith(scan.real_root + os.sep):
        scan.warnings.append(f"skipped {path}: symlink to {os.readlink(full)}, outside {scan.root}")
    elif not os.path.exists(resolved):
        scan.warnings.append(f"skipped {path}: dangling symlink to {os.readlink(full)}")
    else:
        target = os.path.relpath(resolved, os.path.realpath(full.parent))
        scan.entries.append(Entry(path, "link", target=Path(target).as_posix()))


def _rules_in(folder: Path, base: str) -> list[Rules]:
    found = []
    for name in IGNORE_FILES:
        try:
            text = (folder / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        rules = parse_rules(base, text)
        if rules is not None:
            found.append(rules)
    return found


class _HashingSink:
    """A write-only file that hashes and counts what goes through it."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.size += len(data)
        return self._raw.write(data)

    def flush(self) -> None:
        self._raw.flush()


class _Meter:
    """Counts the bytes of files read into the archive and tells ``progress``."""

    def __init__(self, entries: list[Entry], progress: Progress | None) -> None:
        self.progress = progress
        self.total = sum(e.size for e in entries if e.kind == "file")
        self.done = 0

    def add(self, count: int) -> None:
        self.done += count
        if self.progress is not None:
            self.progress(self.done, self.total)


class _MeteredReader:
    """A file opened for reading whose reads are counted by a meter (tarfile reads it)."""

    def __init__(self, raw: BinaryIO, meter: _Meter) -> None:
        self._raw, self._meter = raw, meter

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._meter.add(len(data))
        return data


def _write(scan: _Scan, out: Path, limit: int, meter: _Meter) -> tuple[str, int]:
    with out.open("wb") as raw:
        sink = _HashingSink(raw)
        gz = gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0)
        with gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for entry in scan.entries:
                _add(tar, scan.root, entry, meter)
                if sink.size > limit:
                    raise too_large(scan, limit)
    if sink.size > limit:
        raise too_large(scan, limit)
    return sink.hash.hexdigest(), sink.size


def _add(tar: tarfile.TarFile, root: Path, entry: Entry, meter: _Meter) -> None:
    info = tarfile.TarInfo(entry.path)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    info.mode = 0o755 if entry.kind == "dir" or entry.executable else 0o644
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    elif entry.kind == "link":
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.target, 0o777
        tar.addfile(info)
    else:
        info.size = entry.size
        try:
            with (root / entry.path).open("rb") as handle:
                tar.addfile(info, _MeteredReader(handle, meter))
        except OSError as exc:
            raise BourseError(f"cannot pack {entry.path}: {exc}",
                              hint="did it change while packing? run again") from exc


def too_large(scan: _Scan, limit: int) -> BundleTooLarge:
    names = ", ".join(f"{p} ({human_size(n)})" for p, n in biggest(scan.entries))
    return BundleTooLarge(
        f"the code in {scan.root} packs to more than {human_size(limit)}; biggest: {names}",
        field="code",
        hint="list what the job does not need in .bourseignore (gitignore syntax), "
             "or run with --no-code")


def biggest(entries: list[Entry], count: int = 5) -> list[tuple[str, int]]:
    """The heaviest files and folders (folders end with '/'), none inside another."""
    totals: dict[str, int] = {}
    for entry in entries:
        if entry.kind != "file":
            continue
        parts = entry.path.split("/")
        totals[entry.path] = entry.size
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth]) + "/"
            totals[folder] = totals.get(folder, 0) + entry.size
    chosen: list[tuple[str, int]] = []
    for path, size in sorted(totals.items(), key=lambda item: (-item[1], item[0])):
        if not any(path.startswith(p) or p.startswith(path) for p, _ in chosen):
            chosen.append((path, size))
        if len(chosen) == count:
            break
    return chosen


def human_size(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def iter_file(path: Path, chunk: int = CHUNK,
              progress: Progress | None = None) -> Iterator[bytes]:
    """A file's bytes in chunks, for a streamed upload; ``progress`` is told the bytes handed
    out so far against the file's size."""
    total, done = path.stat().st_size, 0
    with path.open("rb") as handle:
        while data := handle.read(chunk):
            yield data
            done += len(data)
            if progress is not None:
                progress(done, total)


async def aiter_file(path: Path, chunk: int = CHUNK,
                     progress: Progress | None = None) -> AsyncIterator[bytes]:
    total, done = path.stat().st_size, 0
    async with await anyio.open_file(path, "rb") as handle:
        while data := await handle.read(chunk):
            yield data
            done += len(data)
            if progress is not None:
                progress(done, total)
