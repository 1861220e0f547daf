"""Tailing a job's stdout and stderr files into the spool, as references to their bytes.

Each :meth:`LogTailer.step` looks at both files once and spools what is new as log chunks of at
most ``chunk_bytes``: cut after the last newline so lines stay whole, except that a chunk that
fills up, a partial line that has waited ``partial_wait_s``, and the final drain are sent as they
are. The tailer never holds more than one chunk in memory. Backpressure: while the attempt's
unacknowledged log bytes in the spool reach ``max_pending`` it spools nothing (the bytes wait in
the file), so the spool exceeds the cap by less than one chunk. The spool persists each stream's
offset with the chunk, so a restarted agent resumes exactly where the last one stopped.

Rate limit (:mod:`bourse.core.ratelimit`): each step measures what the job wrote since the last
one against the attempt's token bucket; what does not fit is marked dropped — a range of the
file, never bytes in memory — and when the tailer reaches it, it spools a marker line in its
place ("bourse: N bytes dropped, log rate limit X exceeded") and an ``info`` event, once.

Secrets: the coordinator redacts a value split between chunks, but someone following the log
live would see its first part before the rest arrives. So a chunk that ends with what could be
the start of one of the job's secrets (``holds``: their forms, ``core.redact.patterns``) keeps
that end back — the bytes wait in the file — until more output shows what it is, for at most
``HOLD_S``. Only the agent that started the job knows them (they are never on disk): an
adopted attempt relies on the coordinator alone.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from bourse.agent.spool import Spool, Stream
from bourse.agent.track import TrackTailer
from bourse.core.ratelimit import Bucket, LogLimit

PARTIAL_WAIT_S = 0.5
MAX_DROPS = 64  # dropped ranges remembered per stream; past it, the newest ones merge
HOLD_S = 2.0  # the most a possible start of a secret waits for the rest of it


def held(data: bytes, holds: tuple[bytes, ...]) -> int:
    """How many bytes at the end of ``data`` could start one of ``holds`` (the longest)."""
    best = 0
    for pattern in holds:
        for size in range(min(len(pattern) - 1, len(data)), best, -1):
            if data.endswith(pattern[:size]):
                best = size
                break
    return best


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
    seen: int = 0  # the file's size when last measured against the rate limit
    drops: deque[list[int]] = field(default_factory=deque)  # [start, end) not yet passed

    def drop(self, start: int, end: int) -> None:
        if self.drops and (self.drops[-1][1] >= start or len(self.drops) >= MAX_DROPS):
            self.drops[-1][1] = end  # adjacent, or too many: what lies between goes too
        else:
            self.drops.append([start, end])


class LogTailer:
    def __init__(self, spool: Spool, job_id: str, attempt: int, *, paths: tuple[Path, Path],
                 offsets: tuple[int, int], chunk_bytes: int, max_pending: int,
                 partial_wait_s: float = PARTIAL_WAIT_S, limit: LogLimit | None = None,
                 now: float = 0.0, holds: tuple[bytes, ...] = (),
                 track: TrackTailer | None = None) -> None:
        """``paths`` and ``offsets``: of stdout and stderr, offsets being what is spooled;
        ``limit``: the log rate limit (None: none), its bucket full at ``now``; ``holds``: what
        a chunk must not end with the start of; ``track``: the job's track file, tailed at
        each step too."""
        self._track = track
        self._holds = holds
        self._spool = spool
        self._job = (job_id, attempt)
        self._streams = (_Stream("stdout", paths[0], offsets[0], seen=offsets[0]),
                         _Stream("stderr", paths[1], offsets[1], seen=offsets[1]))
        self._bucket = Bucket(limit or LogLimit(rate=0), now)
        self._warned = False
        self._chunk = chunk_bytes
        self._max_pending = max_pending
        self._partial_wait = partial_wait_s

    @property
    def offsets(self) -> tuple[int, int]:
        return self._streams[0].offset, self._streams[1].offset

    def step(self, now: float, *, final: bool = False) -> bool:
        """Spool what is new; True when both files are spooled to their end. ``final`` (the job
        has ended) sends partial lines at once."""
        tracked = self._track is None or self._track.step(now, final=final)
        return self._step_logs(now, final) and tracked

    def _step_logs(self, now: float, final: bool) -> bool:
        sizes = [_size(s.path) for s in self._streams]
        self._meter(sizes, now)
        if all(s.offset >= size for s, size in zip(self._streams, sizes, strict=True)):
            return True
        budget = self._max_pending - self._spool.pending_log_bytes(*self._job)
        done = True
        for stream, size in zip(self._streams, sizes, strict=True):
            budget = self._drain(stream, size, budget, now, final)
            done = done and stream.offset >= size
        return done

    def _meter(self, sizes: list[int], now: float) -> None:
        """What the job wrote since the last step, against the bucket: all of it counts, or
        all of it is dropped."""
        grown = sum(max(0, size - s.seen) for s, size in zip(self._streams, sizes, strict=True))
        if grown == 0:
            return
        fits = self._bucket.take(grown, now)
        for s, size in zip(self._streams, sizes, strict=True):
            if size > s.seen and not fits:
                s.drop(s.seen, size)
            s.seen = max(s.seen, size)

    def _drain(self, s: _Stream, size: int, budget: int, now: float, final: bool) -> int:
        """Spool chunks of one stream while the budget lasts; returns what is left of it."""
        sent = False
        waiting = s.partial_since
        flush = final or (waiting is not None and now - waiting >= self._partial_wait)
        while s.offset < size and budget > 0:
            if s.drops and s.offset >= s.drops[0][0]:
                budget -= self._skip(s, now)
                continue
            stop = min(size, s.drops[0][0]) if s.drops else size
            data = _read(s.path, s.offset, min(stop - s.offset, self._chunk))
            before_drop = stop < size and s.offset + len(data) == stop
            n = cut(data, full=len(data) == self._chunk, flush=flush or before_drop)
            if n and self._holds and not (final or before_drop):
                n = self._unheld(data[:n], waiting, now)
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

    def _unheld(self, data: bytes, waiting: float | None, now: float) -> int:
        """How much of ``data`` goes now: not an end that could start a secret, unless it has
        waited ``HOLD_S`` already."""
        if waiting is not None and now - waiting >= HOLD_S:
            return len(data)
        return len(data) - held(data, self._holds)

    def _skip(self, s: _Stream, now: float) -> int:
        """Spool the marker of the first dropped range in its place; returns its size."""
        _, end = s.drops.popleft()
        dropped = end - s.offset
        text = self._bucket.limit.marker(dropped)
        if s.offset > 0 and _read(s.path, s.offset - 1, 1) != b"\n":
            text = b"\n" + text  # the marker is a line of its own
        with self._spool.atomic():
            self._spool.append_note(*self._job, stream=s.name, offset=s.offset, resume=end,
                                    text=text.decode(), time=now)
            if not self._warned:
                self._spool.append_event(*self._job, "info", {"text": (
                    f"log rate limit {self._bucket.limit.describe()} exceeded: output beyond "
                    "it is dropped, a line in the log says how much")}, now)
        self._warned = True
        s.offset, s.partial_since = end, None
        return len(text)


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
