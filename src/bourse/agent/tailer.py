"""Tailing a job's stdout and stderr files into the spool, as references to their bytes.

Each :meth:`LogTailer.step` looks at both files once and spools what is new as log chunks of at
most ``chunk_bytes``: cut after the last newline so lines stay whole, except that a chunk that
fills up, a partial line that has waited ``partial_wait_s``, and the final drain are sent as they
are. The tailer never holds more than one chunk in memory. Backpressure: while the attempt's
unacknowledged log bytes in the spool reach ``max_pending`` it spools nothing (the bytes wait in
the file), so the spool exceeds the cap by less than one chunk. The spool persists each stream's
offset with the chunk, so a restarted agent resumes exactly where the last one stopped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bourse.agent.spool import Spool, Stream

PARTIAL_WAIT_S = 0.5


def cut(data: bytes, *, full: bool, flush: bool) -> int:
    """How many of ``data`` (the new bytes of a stream, at most one chunk) to send now.

    ``full``: data fills a chunk; ``flush``: send a trailing partial line too."""
    if flush and not full:
        return len(data)
    newline = data.rfind(b"\n")
    if newline >= 0:
        return newline + 1
    return len(data) if full else 0


@dataclass
class _Stream:
    name: Stream
    path: Path
    offset: int
    partial_since: float | None = None  # when a partial line was first left waiting


class LogTailer:
    def __init__(self, spool: Spool, job_id: str, attempt: int, *, paths: tuple[Path, Path],
                 offsets: tuple[int, int], chunk_bytes: int, max_pending: int,
                 partial_wait_s: float = PARTIAL_WAIT_S) -> None:
        """``paths`` and ``offsets``: of stdout and stderr, offsets being what is spooled."""
        self._spool = spool
        self._job = (job_id, attempt)
        self._streams = (_Stream("stdout", paths[0], offsets[0]),
                         _Stream("stderr", paths[1], offsets[1]))
        self._chunk = chunk_bytes
        self._max_pending = max_pending
        self._partial_wait = partial_wait_s

    @property
    def offsets(self) -> tuple[int, int]:
        return self._streams[0].offset, self._streams[1].offset

    def step(self, now: float, *, final: bool = False) -> bool:
        """Spool what is new; True when both files are spooled to their end. ``final`` (the job
        has ended) sends partial lines at once."""
        sizes = [_size(s.path) for s in self._streams]
        if all(s.offset >= size for s, size in zip(self._streams, sizes, strict=True)):
            return True
        budget = self._max_pending - self._spool.pending_log_bytes(*self._job)
        done = True
        for stream, size in zip(self._streams, sizes, strict=True):
            budget = self._drain(stream, size, budget, now, final)
            done = done and stream.offset >= size
        return done

    def _drain(self, s: _Stream, size: int, budget: int, now: float, final: bool) -> int:
        """Spool chunks of one stream while the budget lasts; returns what is left of it."""
        sent = False
        waiting = s.partial_since
        flush = final or (waiting is not None and now - waiting >= self._partial_wait)
        while s.offset < size and budget > 0:
            data = _read(s.path, s.offset, min(size - s.offset, self._chunk))
            n = cut(data, full=len(data) == self._chunk, flush=flush)
            if n == 0:
                if waiting is None or sent:
                    s.partial_since = now
                return budget
            self._spool.append_log(*self._job, stream=s.name, path=str(s.path), offset=s.offset,
                                   length=n, time=now)
            s.offset += n
            budget -= n
            sent = True
        if s.offset >= size:
            s.partial_since = None
        return budget


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _read(path: Path, offset: int, length: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)
