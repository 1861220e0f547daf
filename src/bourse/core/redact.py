"""Redaction of secret values from a job's output, before it is stored.

A value is searched for as it is and in the encodings a program is likely to print it in:
base64 (standard and URL-safe, at each of the three alignments it can have inside a longer
base64 text), URL-encoding, and hex. Values and encodings shorter than ``MIN_BYTES`` are not
searched (they would match by chance and destroy the logs); secrets are refused that short.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
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
