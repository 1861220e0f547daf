"""One agent per work dir: an exclusive ``flock`` on ``<work dir>/agent.lock``, held for the
agent's whole life, with the holder's pid in the file.

Two agents on one work dir share its node credential and spool and fight over both (each
replays the other's records; the coordinator sees one node flapping between two sockets). The
kernel drops the lock when its holder exits, however it exits, so a crashed agent never leaves
a stale lock behind; the pid in the file is only there to name the holder.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from bourse.core.errors import BourseError

LOCK_NAME = "agent.lock"
PID_WAIT_S = 2.0  # a new holder writes its pid right after it took the lock
PROBE_WAIT_S = 1.0  # `holder` holds a shared lock for a moment while it looks


class AgentRunning(BourseError):
    """Another agent holds the work dir."""

    exit_code = 1


def lock_path(work_dir: Path) -> Path:
    return work_dir / LOCK_NAME


@contextlib.contextmanager
def hold(work_dir: Path) -> Iterator[None]:
    """Hold ``work_dir`` for this process while the block runs; `AgentRunning` naming the
    other agent's pid when one already does."""
    work_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(work_dir), os.O_RDWR | os.O_CREAT, 0o600)  # not inherited
    try:
        if not _lock_soon(fd):
            raise _running(work_dir, _holder_pid(fd))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def holder(work_dir: Path) -> int | None:
    """The pid of the agent holding ``work_dir``, or None when no agent does."""
    try:
        fd = os.open(lock_path(work_dir), os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        if _try_lock(fd, fcntl.LOCK_SH):
            return None
        pid = _holder_pid(fd)
        if pid is None:
            raise _running(work_dir, None)
        return pid
    finally:
        os.close(fd)


def _try_lock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _lock_soon(fd: int) -> bool:
    """The exclusive lock, retried for a moment: a `holder` probe may hold it shared."""
    deadline = time.monotonic() + PROBE_WAIT_S
    while not _try_lock(fd, fcntl.LOCK_EX):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _holder_pid(fd: int) -> int | None:
    """The pid the holder wrote, waiting a moment for one that has just taken the lock."""
    deadline = time.monotonic() + PID_WAIT_S
    while True:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text.isdigit():
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def _running(work_dir: Path, pid: int | None) -> AgentRunning:
    who = f"pid {pid}" if pid is not None else "its pid is not in the lock file"
    return AgentRunning(
        f"another agent ({who}) is already running on the work dir {work_dir} "
        f"(it holds {lock_path(work_dir)})",
        hint="stop that agent first, or give this one a --work-dir of its own")
