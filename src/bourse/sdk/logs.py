"""Log chunks as text: base64 decoded, UTF-8 decoded incrementally per attempt and stream.

A chunk boundary can fall inside a multi-byte character; one incremental decoder per stream
keeps that character whole instead of printing two replacement marks.
"""

from __future__ import annotations

import base64
import binascii
import codecs

from bourse.protocol.api import LogChunkView
from bourse.sdk.errors import ProtocolError

Key = tuple[int, str]  # (attempt, stream)


class LogDecoder:
    def __init__(self) -> None:
        self._decoders: dict[Key, codecs.IncrementalDecoder] = {}

    def decode(self, chunk: LogChunkView) -> str:
        key = (chunk.attempt, chunk.stream)
        decoder = self._decoders.get(key)
        if decoder is None:
            decoder = self._decoders[key] = codecs.getincrementaldecoder("utf-8")("replace")
        return decoder.decode(raw_bytes(chunk))

    def finish(self) -> list[tuple[str, str]]:
        """(stream, text) for bytes held back at the end: a truncated character."""
        tails = [(stream, d.decode(b"", final=True)) for (_, stream), d in self._decoders.items()]
        self._decoders.clear()
        return [(stream, text) for stream, text in tails if text]


def raw_bytes(chunk: LogChunkView) -> bytes:
    try:
        return base64.b64decode(chunk.data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError(f"log chunk {chunk.cursor} is not valid base64") from exc
