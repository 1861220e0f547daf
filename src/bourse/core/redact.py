"""Redaction of secret values from a job's output, before it is stored.

A value is searched for as it is and in the encodings a program is likely to print it in:
base64 (standard and URL-safe, at each of the three alignments it can have inside a longer
base64 text), URL-encoding, and hex. Values and encodings shorter than ``MIN_BYTES`` are not
searched (they would match by chance and destroy the logs); secrets are refused that short.

A job's output arrives in chunks, and a value may be split between two (a partial line flushed
in the middle of it, a line longer than a chunk, a job printing it byte by byte):
``redact_parts`` redacts consecutive pieces of one stream as if they were one text, so the
coordinator joins a new chunk to the tail of what it stored before (``tail_bytes`` of it).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from urllib.parse import quote, quote_plus

MASK = b"[redacted]"
MIN_BYTES = 6


def _base64_forms(value: bytes) -> set[bytes]:
    """The base64 text ``value`` produces at each alignment, less the edge characters that
    depend on its neighbours."""
    forms = set()
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * shift + value)
            start = (shift * 8 + 5) // 6 + (1 if shift else 0)  # characters touched by padding
            tail = (len(value) + shift) % 3
            end = len(text) - (4 - tail - 1 if tail else 0) - (1 if tail else 0)
            forms.add(text[start:end].rstrip(b"="))
    return forms


def encodings(value: str) -> set[bytes]:
    raw = value.encode()
    found = {raw, raw.hex().encode(), raw.hex().upper().encode(),
             quote(value, safe="").encode(), quote_plus(value, safe="").encode()}
    found |= _base64_forms(raw)
    found.add(base64.b64encode(raw))
    return {f for f in found if len(f) >= MIN_BYTES}


def patterns(values: Iterable[str]) -> tuple[bytes, ...]:
    """Everything to search for, longest first (so a value is masked whole, not in part)."""
    found: set[bytes] = set()
    for value in values:
        found |= encodings(value)
    return tuple(sorted(found, key=lambda p: (-len(p), p)))


def redact(data: bytes, searched: tuple[bytes, ...]) -> bytes:
    for pattern in searched:
        if pattern in data:
            data = data.replace(pattern, MASK)
    return data


def redact_text(text: str, searched: tuple[bytes, ...]) -> str:
    return redact(text.encode(), searched).decode("utf-8", "replace") if searched else text


def tail_bytes(searched: tuple[bytes, ...]) -> int:
    """How much of the text before a chunk can hold the start of a value split by it."""
    return max((len(p) for p in searched), default=1) - 1


def spans(data: bytes, searched: tuple[bytes, ...]) -> list[tuple[int, int]]:
    """Where the patterns occur in ``data``, longest first, never overlapping; in order."""
    taken: list[tuple[int, int]] = []
    for pattern in searched:
        start = data.find(pattern)
        while start >= 0:
            end = start + len(pattern)
            if any(a < end and start < b for a, b in taken):
                start = data.find(pattern, start + 1)
            else:
                taken.append((start, end))
                start = data.find(pattern, end)
    return sorted(taken)


def redact_parts(parts: Sequence[bytes], searched: tuple[bytes, ...]) -> list[bytes]:
    """Consecutive pieces of one text, redacted as one: a value split between pieces becomes
    one mask in the piece where it starts, and its bytes in the pieces after it go."""
    joined = b"".join(parts)
    found = spans(joined, searched)
    if not found:
        return list(parts)
    redacted, low = [], 0
    for part in parts:
        high = low + len(part)
        redacted.append(_redact_piece(joined, low, high, found))
        low = high
    return redacted


def _redact_piece(joined: bytes, low: int, high: int, found: list[tuple[int, int]]) -> bytes:
    pieces, cursor = [], low
    for start, end in found:
        if end <= low or start >= high:
            continue
        if start >= low:
            pieces += [joined[cursor:start], MASK]
        cursor = max(cursor, min(end, high))
    pieces.append(joined[cursor:high])
    return b"".join(pieces)
