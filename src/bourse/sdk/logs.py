"""Log chunks as text: base64 decoded, UTF-8 decoded incrementally per attempt, gang member and
stream; and as whole lines.

A chunk boundary can fall inside a multi-byte character; one incremental decoder per stream
keeps that character whole instead of printing two replacement marks. :class:`LogLines` goes
one step further for a gang's interleaved output: a line split across two chunks of one member
comes out once, whole, and members' lines never mix.
"""

from __future__ import annotations

import binascii
import codecs
from dataclasses import dataclass

from bourse.protocol.api import LogChunkView
from bourse.sdk.errors import ProtocolError

Key = tuple[int, int, str]  # (attempt, rank, stream)
MAX_LINE = 64 * 1024  # characters held for a line without its newline before it is let out


class LogDecoder:
    def __init__(self) -> None:
        self._decoders: dict[Key, codecs.IncrementalDecoder] = {}

    def decode(self, chunk: LogChunkView) -> str:
        key = (chunk.attempt, chunk.rank, chunk.stream)
        decoder = self._decoders.get(key)
        if decoder is None:
            decoder = self._decoders[key] = codecs.getincrementaldecoder("utf-8")("replace")
        return decoder.decode(raw_bytes(chunk))

    def finish(self) -> list[tuple[str, str]]:
        """(stream, text) for bytes held back at the end: a truncated character."""
        return [(stream, text) for (_, _, stream), text in self.tails()]

    def tails(self) -> list[tuple[Key, str]]:
        """(key, text) for bytes held back at the end, as ``finish`` (which it also does)."""
        tails = [(key, d.decode(b"", final=True)) for key, d in self._decoders.items()]
        self._decoders.clear()
        return [(key, text) for key, text in tails if text]


@dataclass(frozen=True)
class LogLine:
    attempt: int
    rank: int
    stream: str
    text: str  # without its newline
    ended: bool  # by a newline; False for the rest at the end, or a line cut at MAX_LINE
    time: float | None = None  # when its first bytes were read on the node


class LogLines:
    """Chunks as lines, one buffer per (attempt, rank, stream)."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._decoder = LogDecoder()
        self._rest: dict[Key, str] = {}
        self._since: dict[Key, float | None] = {}  # when each held line's first bytes came

    def feed(self, chunk: LogChunkView) -> list[LogLine]:
        """The lines this chunk completes, in order."""
        key = (chunk.attempt, chunk.rank, chunk.stream)
        since = self._since.pop(key, chunk.time)
        *whole, rest = (self._rest.pop(key, "") + self._decoder.decode(chunk)).split("\n")
        lines = []
        for text in whole:
            lines.append(_line(key, text, True, since))
            since = chunk.time  # every later line starts in this chunk
        while len(rest) > self.max_line:
            lines.append(_line(key, rest[:self.max_line], False, since))
            rest, since = rest[self.max_line:], chunk.time
        if rest:
            self._rest[key], self._since[key] = rest, since
        return lines

    def finish(self) -> list[LogLine]:
        """What is left: each stream's unfinished line (and any truncated character)."""
        for key, text in self._decoder.tails():
            self._rest[key] = self._rest.get(key, "") + text
        lines = [_line(key, text, False, self._since.get(key))
                 for key, text in self._rest.items()]
        self._rest.clear()
        self._since.clear()
        return lines


def _line(key: Key, text: str, ended: bool, time: float | None) -> LogLine:
    attempt, rank, stream = key
    return LogLine(attempt, rank, stream, text, ended, time)


def raw_bytes(chunk: LogChunkView) -> bytes:
    try:
        return binascii.a2b_base64(chunk.data, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError(f"log chunk {chunk.cursor} is not valid base64") from exc
