"""Tailing a job's track file (``BOURSE_TRACK_FILE``, written by ``bourse.track``) into the spool.

The job appends one JSON :class:`~bourse.protocol.track.TrackRecord` per line; each
:meth:`TrackTailer.step` reads the whole lines added since the last one (at most ``read_bytes``),
validates each and spools it as a ``track`` row, moving the attempt's offset in the file in the
same transaction, so a restarted agent neither loses nor repeats a record. A line that is not a
valid record is skipped (an ``info`` event says so, once per attempt): the coordinator would
refuse the frame, and an agent must never spool what its coordinator refuses.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from bourse.agent.shim import AttemptDir
from bourse.agent.spool import Spool
from bourse.protocol.track import TrackRecord

TRACK_FILE_ENV = "BOURSE_TRACK_FILE"
READ_BYTES = 4 * 1024 * 1024  # more than the longest record (1000 points, 100 params, tags)


def track_file(adir: AttemptDir) -> Path:
    """Where the attempt's job writes its records: in its TMPDIR, which it may write to."""
    return adir.tmp / "bourse-track.jsonl"


def parse_line(line: bytes) -> TrackRecord | None:
    try:
        return TrackRecord.model_validate_json(line)
    except ValidationError:
        return None


class TrackTailer:
    def __init__(self, spool: Spool, job_id: str, attempt: int, path: Path,
                 read_bytes: int = READ_BYTES) -> None:
        self._spool, self._job, self._path = spool, (job_id, attempt), path
        self._offset = spool.track_offset(job_id, attempt)
        self._read = read_bytes
        self._warned = False

    @property
    def offset(self) -> int:
        return self._offset

    def step(self, now: float, *, final: bool = False) -> bool:
        """Spool the new whole lines (``final``: a last line without newline too); True when
        the file is spooled to its end."""
        data = _read(self._path, self._offset, self._read)
        end = data.rfind(b"\n") + 1
        if final and len(data) < self._read:
            end = len(data)
        if end == 0 and len(data) >= self._read:
            end = len(data)  # a line longer than any record: skipped
        start, moved = 0, True
        for line in data[:end].splitlines(keepends=True):
            start += len(line)
            moved = self._spool_line(line, self._offset + start, now)
        self._offset += end
        if not moved:  # the last lines were skipped: a restart must not read them again
            self._spool.set_track_offset(*self._job, self._offset)
        return end == len(data) and len(data) < self._read

    def _spool_line(self, line: bytes, resume: int, now: float) -> bool:
        """Spool one line; False when it was skipped (the offset did not move)."""
        record = parse_line(line) if line.strip() else None
        if record is not None:
            self._spool.append_track(*self._job, data=record.model_dump_json(), resume=resume,
                                     time=now)
            return True
        if line.strip() and not self._warned:
            self._warned = True
            self._spool.append_event(*self._job, "info", {"text": (
                "bourse.track: a line of the track file is not a tracking record; skipped "
                "(write to it only through bourse.track)")}, now)
        return False


def _read(path: Path, offset: int, length: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)
