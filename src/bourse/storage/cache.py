"""The node-level, content-addressed input cache.

Layout under ``root``::

    objects/ab/abcdef...   one read-only file per object version (see `plan.cache_digest`)
    tmp/                   downloads in progress, ``<digest>.<pid>.<n>.part``; never read
    pins/<holder>          the digests a job attempt uses, one per line

A file appears under ``objects/`` only by ``rename`` of a complete download, so no reader ever
sees half a file. Pins are files so that they survive an agent restart while the job runs on
(jobs outlive their agent); eviction never removes a pinned entry. Recency is the entry's
mtime, refreshed on every use.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from bourse.storage.errors import CacheFull
from bourse.storage.plan import Entry, victims
from bourse.storage.progress import format_bytes

_SAFE_HOLDER = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def space_error(path: Path, needed: int, available: int, what: str) -> CacheFull:
    return CacheFull(
        f"not enough space for inputs at {path}: {what} needs {format_bytes(needed)}, "
        f"{format_bytes(available)} available",
        path=str(path), needed=needed, available=available,
        hint="free disk space, raise the cache limit, or run the job on a node with more disk")


class ContentCache:
    """Files by content address, with a byte ``limit`` enforced by LRU eviction of unpinned
    entries, and ``keep_free`` bytes of disk always left to others."""

    def __init__(self, root: Path, limit: int, *, keep_free: int = 1 << 30) -> None:
        self.root, self.limit, self.keep_free = root, limit, keep_free
        self.objects, self.tmp, self.pins = root / "objects", root / "tmp", root / "pins"
        for folder in (self.objects, self.tmp, self.pins):
            folder.mkdir(parents=True, exist_ok=True)
        for n in range(256):  # once, so that publishing a file is a bare rename
            (self.objects / f"{n:02x}").mkdir(exist_ok=True)
        self._pid = os.getpid()
        self._reserved = 0
        self._counter = itertools.count()
        self.clean_tmp()

    def path(self, digest: str) -> Path:
        return self.objects / digest[:2] / digest

    def lookup(self, digest: str, size: int) -> Path | None:
        """The entry's path when it is present and whole."""
        path = self.path(digest)
        try:
            return path if path.stat().st_size == size else None
        except FileNotFoundError:
            return None

    def touch(self, digests: Iterable[str]) -> None:
        for digest in digests:
            with contextlib.suppress(FileNotFoundError):
                os.utime(self.path(digest))

    # -- pins ---------------------------------------------------------------------------------

    def _pin_file(self, holder: str) -> Path:
        name = holder if _SAFE_HOLDER.match(holder) else hashlib.sha256(
            holder.encode()).hexdigest()
        return self.pins / name

    def pin(self, holder: str, digests: Iterable[str]) -> None:
        """Protect ``digests`` from eviction until ``unpin(holder)``; adds to earlier pins."""
        path = self._pin_file(holder)
        known = self._read_pins(path)
        fresh = [d for d in dict.fromkeys(digests) if d not in known]
        if fresh:
            with path.open("a") as out:
                out.write("".join(d + "\n" for d in fresh))

    def unpin(self, holder: str) -> None:
        self._pin_file(holder).unlink(missing_ok=True)

    def pinned(self) -> set[str]:
        found: set[str] = set()
        for path in self.pins.iterdir():
            found |= self._read_pins(path)
        return found

    @staticmethod
    def _read_pins(path: Path) -> set[str]:
        try:
            return set(path.read_text().split())
        except FileNotFoundError:
            return set()

    # -- space --------------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        found = []
        for folder in self.objects.iterdir():
            for item in os.scandir(folder):
                stat = item.stat()
                found.append(Entry(item.name, stat.st_size, stat.st_mtime))
        return found

    def used(self) -> int:
        return sum(e.size for e in self.entries())

    @contextlib.contextmanager
    def reserve(self, needed: int) -> Iterator[None]:
        """Make room for ``needed`` more bytes (evicting LRU unpinned entries) and hold it
        while the block downloads; raises `CacheFull` naming the path and the shortfall."""
        self.make_room(needed)
        self._reserved += needed
        try:
            yield
        finally:
            self._reserved -= needed

    def make_room(self, needed: int) -> None:
        if needed <= 0:
            return
        if needed > self.limit:
            raise space_error(self.root, needed, self.limit, "the cache limit is too small: it")
        entries = self.entries()
        over_limit = sum(e.size for e in entries) + self._reserved + needed - self.limit
        short_on_disk = needed + self.keep_free - self.disk_free()
        for entry in victims(entries, self.pinned(), max(over_limit, short_on_disk)):
            self.path(entry.digest).unlink(missing_ok=True)
        self.check_disk(needed)

    def disk_free(self) -> int:
        return shutil.disk_usage(self.root).free

    def check_disk(self, needed: int) -> None:
        available = self.disk_free() - self.keep_free
        if available < needed:
            raise space_error(self.root, needed, max(available, 0), "this prefetch")
        used = self.used() + self._reserved
        if used + needed > self.limit:
            raise space_error(self.root, needed, max(self.limit - used, 0),
                              "with the cache's pinned entries, this prefetch")

    # -- writing ------------------------------------------------------------------------------

    def tmp_path(self, digest: str) -> Path:
        return self.tmp / f"{digest}.{self._pid}.{next(self._counter)}.part"

    def commit(self, tmp: Path, digest: str) -> Path:
        """Publish a complete download under its content address; the file must be
        read-only already (created so)."""
        target = self.path(digest)
        os.replace(tmp, target)
        return target

    def clean_tmp(self) -> None:
        """Remove partial downloads left by processes that no longer run."""
        for item in self.tmp.iterdir():
            pid = item.name.split(".")[1] if item.name.count(".") >= 3 else ""
            if not pid.isdigit() or not _alive(int(pid)):
                item.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_disk_full(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)
