"""Redaction across the pieces a job's output arrives in, as tables."""

from __future__ import annotations

import base64

import pytest

from bourse.core.redact import MASK, patterns, redact, redact_parts, spans, tail_bytes

SECRET = "s3cret-value"
SEARCHED = patterns([SECRET])


@pytest.mark.parametrize(("parts", "expected"), [
    ([b"a", b"b"], [b"a", b"b"]),  # nothing to find: the parts as they were
    ([b"x s3cret-value y"], [b"x " + MASK + b" y"]),  # within one part
    ([b"x s3cr", b"et-value y"], [b"x " + MASK, b" y"]),  # split in two
    ([b"s3cret-", b"value"], [MASK, b""]),
    ([b"x s", b"3", b"c", b"ret-valu", b"e\n"], [b"x " + MASK, b"", b"", b"", b"\n"]),
    ([b"s3cret-values3cret-value"], [MASK + MASK]),  # back to back
    ([b"s3cret-val", b"ue s3c", b"ret-value"], [MASK, b" " + MASK, b""]),  # two, both split
    ([b"s3cret-va", b"", b"lue"], [MASK, b"", b""]),  # an empty part between
    ([b"s3cret-valu", b"E"], [b"s3cret-valu", b"E"]),  # almost: left alone
])
def test_redact_parts(parts: list[bytes], expected: list[bytes]) -> None:
    assert redact_parts(parts, SEARCHED) == expected


def test_an_encoded_value_split_between_parts_is_masked() -> None:
    for form in (base64.b64encode(SECRET.encode()), SECRET.encode().hex().encode()):
        for cut in range(1, len(form)):
            parts = [b"<" + form[:cut], form[cut:] + b">"]
            assert b"".join(redact_parts(parts, SEARCHED)) == b"<" + MASK + b">", (form, cut)


def test_redact_parts_agrees_with_redact_on_one_part() -> None:
    text = b"a s3cret-value b " + base64.b64encode(b"xy" + SECRET.encode()) + b" c"
    assert redact_parts([text], SEARCHED) == [redact(text, SEARCHED)]


def test_spans_prefer_the_longest_and_never_overlap() -> None:
    assert spans(b"abcdefgh", (b"abcdef", b"defgh", b"gh")) == [(0, 6), (6, 8)]


def test_tail_bytes() -> None:
    assert tail_bytes(SEARCHED) == max(len(p) for p in SEARCHED) - 1
    assert tail_bytes(()) == 0
