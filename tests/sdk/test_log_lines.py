"""``LogLines``: chunks as whole lines, one buffer per attempt, member and stream."""

from __future__ import annotations

import pytest
from sdk_fakes import chunk

from bourse.protocol.api import LogChunkView
from bourse.sdk.logs import LogLine, LogLines

Chunk = tuple[int, str, bytes]  # (rank, stream, bytes)


def lines_of(chunks: list[Chunk], max_line: int = 100) -> list[tuple[int, str, str, bool]]:
    split = LogLines(max_line)
    found: list[LogLine] = []
    for cursor, (rank, stream, data) in enumerate(chunks, 1):
        found += split.feed(LogChunkView.model_validate(chunk(cursor, data, stream, rank=rank)))
    found += split.finish()
    return [(line.rank, line.stream, line.text, line.ended) for line in found]


@pytest.mark.parametrize(("chunks", "expected"), [
    ([(0, "stdout", b"a\nb\n")], [(0, "stdout", "a", True), (0, "stdout", "b", True)]),
    # a line split across two chunks of one member comes out once, when it ends
    ([(1, "stdout", b"hal"), (0, "stdout", b"x\n"), (1, "stdout", b"f\n")],
     [(0, "stdout", "x", True), (1, "stdout", "half", True)]),
    # each stream of a member has its own line
    ([(0, "stdout", b"out "), (0, "stderr", b"err\n"), (0, "stdout", b"line\n")],
     [(0, "stderr", "err", True), (0, "stdout", "out line", True)]),
    # what never ends is let out at the end, as unfinished lines
    ([(0, "stdout", b"tail"), (1, "stdout", b"\xc3")],
     [(0, "stdout", "tail", False), (1, "stdout", "\ufffd", False)]),
    # a character cut between chunks of one member is whole
    ([(1, "stdout", "é".encode()[:1]), (0, "stdout", b"-\n"), (1, "stdout", "é\n".encode()[1:])],
     [(0, "stdout", "-", True), (1, "stdout", "é", True)]),
    ([(0, "stdout", b"\n\n")], [(0, "stdout", "", True), (0, "stdout", "", True)]),
])
def test_lines(chunks: list[Chunk], expected: list[tuple[int, str, str, bool]]) -> None:
    assert lines_of(chunks) == expected


def test_a_line_longer_than_the_limit_is_let_out_in_pieces() -> None:
    assert lines_of([(0, "stdout", b"abcdefg"), (0, "stdout", b"h\n")], max_line=3) == [
        (0, "stdout", "abc", False), (0, "stdout", "def", False), (0, "stdout", "gh", True)]


def test_attempts_have_lines_of_their_own() -> None:
    split = LogLines()
    first = LogChunkView.model_validate(chunk(1, b"one ", attempt=1))
    second = LogChunkView.model_validate(chunk(2, b"two\n", attempt=2))
    assert [(x.attempt, x.text) for x in split.feed(first) + split.feed(second)] == [(2, "two")]
    assert [(x.attempt, x.text, x.ended) for x in split.finish()] == [(1, "one ", False)]


def test_a_line_has_the_time_its_first_bytes_were_read() -> None:
    split = LogLines(8)
    views = [LogChunkView.model_validate({**chunk(i, data), "time": t})
             for i, (data, t) in enumerate([(b"one\ntw", 10.0), (b"o\nthree", 11.0),
                                            (b"\n", 12.0), (b"x" * 10, 13.0)], 1)]
    found = [line for view in views for line in split.feed(view)] + split.finish()
    assert [(line.text, line.time) for line in found] == [
        ("one", 10.0), ("two", 10.0), ("three", 11.0), ("x" * 8, 13.0), ("xx", 13.0)]


def test_a_chunk_without_a_time_gives_lines_without_one() -> None:
    split = LogLines()
    found = split.feed(LogChunkView.model_validate(chunk(1, b"a\n")))
    assert [line.time for line in found] == [None]
