"""Tailing log files into the spool: where chunks are cut, partial lines, backpressure."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bourse.agent.spool import Spool
from bourse.agent.tailer import HOLD_S, MAX_DROPS, LogTailer, cut, held
from bourse.core.ratelimit import LogLimit


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


class Limited(Logs):
    """A tailer under a rate limit of 10 bytes a second with a burst of 20."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path, chunk=64)
        self.limit = LogLimit(rate=10, burst=20)
        self.tailer = LogTailer(self.spool, "j", 1, paths=(self.out, self.err), offsets=(0, 0),
                                chunk_bytes=64, max_pending=1000, limit=self.limit, now=0.0)

    def sent(self, stream: str = "stdout") -> bytes:
        return b"".join(base64.b64decode(r.body()["data"]) for r in self.spool.pending()
                        if r.type == "log_chunk" and r.stream == stream)

    def events(self) -> list[str]:
        return [r.body()["data"]["text"] for r in self.spool.pending() if r.type == "job_event"]


def test_output_within_the_burst_and_rate_is_all_sent(tmp_path: Path) -> None:
    logs = Limited(tmp_path)
    logs.write(logs.out, b"a" * 19 + b"\n")  # the whole burst at once
    assert logs.tailer.step(0.0)
    logs.write(logs.out, b"b" * 9 + b"\n")  # then the rate
    assert logs.tailer.step(1.0)
    assert logs.sent() == b"a" * 19 + b"\n" + b"b" * 9 + b"\n"
    assert logs.events() == []


def test_output_past_the_limit_is_dropped_with_a_marker_line(tmp_path: Path) -> None:
    logs = Limited(tmp_path)
    logs.write(logs.out, b"ok\n")
    assert logs.tailer.step(0.0)
    logs.write(logs.out, b"x" * 30 + b"\n")  # 31 bytes: past the 17 left
    logs.write(logs.err, b"y\n")  # what was written in the same step goes too
    assert logs.tailer.step(0.5)
    logs.write(logs.out, b"after\n")  # 6 bytes: 17 + 5 refilled fit
    assert logs.tailer.step(1.0)
    marker = b"bourse: 31 bytes dropped, log rate limit 10 B/s exceeded\n"
    assert logs.sent() == b"ok\n" + marker + b"after\n"
    assert logs.sent("stderr") == b"bourse: 2 bytes dropped, log rate limit 10 B/s exceeded\n"
    assert logs.tailer.offsets == (40, 2)  # the dropped bytes are behind the tailer
    assert len(logs.events()) == 1 and "log rate limit 10 B/s exceeded" in logs.events()[0]


def test_a_marker_after_a_partial_line_starts_a_line_of_its_own(tmp_path: Path) -> None:
    logs = Limited(tmp_path)
    logs.write(logs.out, b"half")
    assert not logs.tailer.step(0.0)
    logs.write(logs.out, b"z" * 40)
    assert logs.tailer.step(0.1, final=True)
    assert logs.sent() == b"half\nbourse: 40 bytes dropped, log rate limit 10 B/s exceeded\n"


def test_drops_are_measured_while_the_coordinator_is_slow(tmp_path: Path) -> None:
    logs = Limited(tmp_path)
    logs.tailer = LogTailer(logs.spool, "j", 1, paths=(logs.out, logs.err), offsets=(0, 0),
                            chunk_bytes=4, max_pending=4, limit=logs.limit, now=0.0)
    logs.write(logs.out, b"abc\n" * 4)  # 16 bytes fit; only one chunk may be pending
    assert not logs.tailer.step(0.0)
    logs.write(logs.out, b"d" * 50)  # dropped, though the tailer has not reached it yet
    assert not logs.tailer.step(0.01)
    sent = b""
    while True:
        done = logs.tailer.step(0.02, final=True)
        sent += logs.sent()
        logs.spool.ack([r.id for r in logs.spool.pending()])
        if done:
            break
    assert sent == b"abc\n" * 4 + logs.limit.marker(50)
    assert logs.tailer.offsets == (66, 0)


def test_many_separate_drops_are_bounded(tmp_path: Path) -> None:
    logs = Limited(tmp_path)
    logs.tailer = LogTailer(logs.spool, "j", 1, paths=(logs.out, logs.err), offsets=(0, 0),
                            chunk_bytes=64, max_pending=0, limit=logs.limit, now=0.0)
    now = 0.0
    for _ in range(200):  # the coordinator takes nothing: drops pile up behind the tailer
        now += 1.0
        logs.write(logs.out, b"k" * 10)  # fits
        logs.tailer.step(now)
        logs.write(logs.out, b"d" * 100)  # does not
        logs.tailer.step(now + 0.001)
    assert len(logs.tailer._streams[0].drops) <= MAX_DROPS


@pytest.mark.parametrize(("data", "expected"), [
    (b"token: s3c", 3),
    (b"token: s3cret-valu", 11),
    (b"token: s3cret-value", 0),  # whole: redacted by the coordinator, nothing to wait for
    (b"token: x\n", 0),
    (b"s", 1),
    (b"", 0),
])
def test_held(data: bytes, expected: int) -> None:
    assert held(data, (b"s3cret-value", b"czNjcmV0")) == expected


class Holding(Limited):
    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.tailer = LogTailer(self.spool, "j", 1, paths=(self.out, self.err), offsets=(0, 0),
                                chunk_bytes=64, max_pending=1000, holds=(b"s3cret-value",))

    def sends(self) -> list[bytes]:
        return [base64.b64decode(r.body()["data"]) for r in self.spool.pending()]


def test_the_start_of_a_secret_waits_for_the_rest(tmp_path: Path) -> None:
    logs = Holding(tmp_path)
    logs.write(logs.out, b"token: s3c")
    assert not logs.tailer.step(0.0)
    assert not logs.tailer.step(0.6)  # a partial line is due, but not the start of the value
    assert logs.sends() == [b"token: "]
    logs.write(logs.out, b"ret-value\n")
    assert logs.tailer.step(1.0)
    assert logs.sends() == [b"token: ", b"s3cret-value\n"]  # in one chunk


def test_a_possible_start_waits_at_most_hold_s(tmp_path: Path) -> None:
    logs = Holding(tmp_path)
    logs.write(logs.out, b"progress s")
    logs.tailer.step(0.0)
    logs.tailer.step(0.6)
    assert logs.sends() == [b"progress "]
    assert not logs.tailer.step(HOLD_S - 0.1)
    assert logs.tailer.step(HOLD_S + 0.7)
    assert logs.sends() == [b"progress ", b"s"]


def test_the_end_of_the_job_sends_a_held_start(tmp_path: Path) -> None:
    logs = Holding(tmp_path)
    logs.write(logs.err, b"s3cret")
    assert logs.tailer.step(0.0, final=True)
    assert logs.sends() == [b"s3cret"]
