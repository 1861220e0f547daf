"""The storage check: write, fsync and read back N MB in the work dir, timing both ways.

MB here is MiB (2**20 bytes). Each 1 MiB block is random with its number stamped in, so a
compressing or de-duplicating file system cannot fake the write, and the read verifies every
byte. After the fsync the file's pages are dropped from the page cache (``posix_fadvise``
DONTNEED), so the read measures the disk rather than memory where the kernel honours it.

A read-only or full disk is an error naming the path and what to do, never an exception. The
system calls are reached through :class:`Disk`, so a test can make one fail exactly as the
kernel would (ENOSPC on the n-th write) where it cannot mount a small file system.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bourse.protocol.common import StorageResult

BLOCK = 2**20


@dataclass(frozen=True, slots=True)
class Disk:
    """The system calls the check makes (the real ones by default)."""

    write: Callable[[int, bytes], int] = os.write
    fsync: Callable[[int], None] = os.fsync


def check_storage(work_dir: Path, size_mb: int = 100, *, disk: Disk | None = None,
                  clock: Callable[[], float] = time.perf_counter) -> StorageResult:
    disk = disk or Disk()
    path = work_dir / f".bourse-storage-check-{os.getpid()}"
    block = os.urandom(BLOCK)
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
        started = clock()
        _write(path, block, size_mb, disk)
        written = clock()
        _read(path, block, size_mb)
        done = clock()
    except OSError as exc:
        return StorageResult(path=str(work_dir), size_mb=size_mb,
                             error=describe(exc, work_dir, size_mb))
    finally:
        _remove(path)
    return StorageResult(path=str(work_dir), size_mb=size_mb,
                         write_mb_s=round(size_mb / max(written - started, 1e-9), 1),
                         read_mb_s=round(size_mb / max(done - written, 1e-9), 1))


def _stamped(block: bytes, n: int) -> bytes:
    return n.to_bytes(8, "little") + block[8:]


def _write(path: Path, block: bytes, size_mb: int, disk: Disk) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for n in range(size_mb):
            data, sent = _stamped(block, n), 0
            while sent < len(data):
                sent += disk.write(fd, data[sent:])
        disk.fsync(fd)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read(path: Path, block: bytes, size_mb: int) -> None:
    with path.open("rb", buffering=0) as f:
        for n in range(size_mb):
            if f.read(BLOCK) != _stamped(block, n):
                raise OSError(errno.EIO, f"block {n} read back differs from what was written")


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def describe(exc: OSError, work_dir: Path, size_mb: int) -> str:
    """What went wrong, with the path and what the provider can do about it."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"{work_dir}: no space left for the {size_mb} MB storage check ({reason}); "
                "free space there or give the agent another --work-dir")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (f"{work_dir} is not writable ({reason}); jobs write their files there: "
                "make it writable or give the agent another --work-dir")
    return f"{work_dir}: storage check failed ({reason})"
