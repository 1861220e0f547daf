"""Tailing log files into the spool: where chunks are cut, partial lines, backpressure."""

from __future__ import annotations

from pathlib import Path

import pytest

from bourse.agent.spool import Spool
from bourse.agent.tailer import LogTailer, cut


@pytest.mark.parametrize(("data", "full", "flush", "expected"), [
    (b"", False, False, 0),
    (b"a\nb\n", False, False, 4),
    (b"a\nbc", False, False, 2),  # the partial line waits
    (b"abc", False, False, 0),
    (b"a\nbc", False, True, 4),  # ... unless flushed
    (b"abc", False, True, 3),
    (b"ab\ncd", True, False, 3),  # a full chunk is cut at its last newline
    (b"ab\ncd", True, True, 3),
    (b"abcd", True, False, 4),  # ... or sent whole when it has none
])
def test_cut(data: bytes, full: bool, flush: bool, expected: int) -> None:
    assert cut(data, full=full, flush=flush) == expected


class Logs:
    def __init__(self, tmp_path: Path, *, chunk: int = 8, cap: int = 1000) -> None:
        self.out, self.err = tmp_path / "out", tmp_path / "err"
        self.out.touch()
        self.err.touch()
        self.spool = Spool(tmp_path / "spool.db")
        self.tailer = LogTailer(self.spool, "j", 1, paths=(self.out, self.err), offsets=(0, 0),
                                chunk_bytes=chunk, max_pending=cap)

    def write(self, path: Path, data: bytes) -> None:
        with path.open("ab") as f:
            f.write(data)

    def chunks(self) -> list[tuple[str, int, int]]:
        return [(r.stream or "", r.offset or 0, r.length or 0) for r in self.spool.pending()]


def test_whole_lines_go_at_once_and_partial_lines_wait(tmp_path: Path) -> None:
    logs = Logs(tmp_path)
    logs.write(logs.out, b"ab\ncd")
    logs.write(logs.err, b"e\n")
    assert not logs.tailer.step(0.0)
    assert logs.chunks() == [("stdout", 0, 3), ("stderr", 0, 2)]
    assert not logs.tailer.step(0.3)
    assert len(logs.chunks()) == 2
    assert logs.tailer.step(0.6)  # waited long enough: the partial line goes
    assert logs.chunks()[-1] == ("stdout", 3, 2)
    assert logs.tailer.offsets == (5, 2)


def test_long_output_is_chunked_at_newlines(tmp_path: Path) -> None:
    logs = Logs(tmp_path, chunk=8)
    logs.write(logs.out, b"aaa\nbbb\nccccccccccc\nd\n")
    assert logs.tailer.step(0.0)
    assert logs.chunks() == [("stdout", 0, 8), ("stdout", 8, 8), ("stdout", 16, 6)]


def test_final_step_flushes_partial_lines(tmp_path: Path) -> None:
    logs = Logs(tmp_path)
    logs.write(logs.err, b"no newline")
    assert logs.tailer.step(0.0, final=True)
    assert logs.chunks() == [("stderr", 0, 8), ("stderr", 8, 2)]


def test_backpressure_holds_bytes_in_the_file(tmp_path: Path) -> None:
    logs = Logs(tmp_path, chunk=4, cap=10)
    logs.write(logs.out, b"abc\n" * 10)
    assert not logs.tailer.step(0.0)
    assert logs.spool.pending_log_bytes("j", 1) == 12  # over the cap by less than a chunk
    assert not logs.tailer.step(1.0)
    assert len(logs.chunks()) == 3
    logs.spool.ack([r.id for r in logs.spool.pending()])
    assert not logs.tailer.step(2.0)
    logs.spool.ack([r.id for r in logs.spool.pending()])
    assert not logs.tailer.step(3.0)
    logs.spool.ack([r.id for r in logs.spool.pending()])
    assert logs.tailer.step(4.0)
    assert logs.tailer.offsets == (40, 0)


def test_resumes_from_given_offsets(tmp_path: Path) -> None:
    logs = Logs(tmp_path)
    logs.write(logs.out, b"old\nnew\n")
    tailer = LogTailer(logs.spool, "j", 1, paths=(logs.out, logs.err), offsets=(4, 0),
                       chunk_bytes=8, max_pending=100)
    assert tailer.step(0.0)
    assert logs.chunks() == [("stdout", 4, 4)]
