from __future__ import annotations

import pytest

from bourse.storage import InvalidURI, StoreURI, parse_uri

GOOD = [
    ("s3://datasets/digits/", StoreURI("s3", "datasets", "digits/")),
    ("s3://datasets", StoreURI("s3", "datasets", "")),
    ("s3://datasets/", StoreURI("s3", "datasets", "")),
    ("S3://my.bucket-1/a/b.bin", StoreURI("s3", "my.bucket-1", "a/b.bin")),
    ("  s3://abc/x  ", StoreURI("s3", "abc", "x")),
    ("gs://my_bucket/p/", StoreURI("gs", "my_bucket", "p/")),
    ("az://container/p/q", StoreURI("az", "container", "p/q")),
    ("file:///data/x", StoreURI("file", "", "data/x")),
    ("file://localhost/data/x/", StoreURI("file", "", "data/x/")),
    ("s3://abc/weird key/ä+b=c", StoreURI("s3", "abc", "weird key/ä+b=c")),
]

BAD = [
    ("datasets/digits", "not a store URI"),
    ("ftp://host/x", "unsupported scheme 'ftp'"),
    ("s3a://bucket/x", "write s3:// instead"),
    ("https://s3.amazonaws.com/bucket/x", "set the endpoint URL"),
    ("s3:///x", "names no bucket"),
    ("s3://ab/x", "invalid bucket name 'ab'"),
    ("s3://Bucket/x", "invalid bucket name"),
    ("s3://192.168.1.1/x", "invalid bucket name"),
    ("s3://a..b/x", "invalid bucket name"),
    ("az://con--tainer/x", "invalid bucket name"),
    ("s3://bucket//x", "empty, '.' or '..' path segment"),
    ("s3://bucket/a/../b", "empty, '.' or '..' path segment"),
    ("file://relative/path", "not an absolute file URI"),
    ("file://", "not an absolute file URI"),
]


@pytest.mark.parametrize(("text", "expected"), GOOD)
def test_parses(text: str, expected: StoreURI) -> None:
    assert parse_uri(text) == expected


@pytest.mark.parametrize(("text", "message"), BAD)
def test_rejects_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(InvalidURI) as caught:
        parse_uri(text, field="inputs.data")
    assert message in str(caught.value)
    assert str(caught.value).startswith("inputs.data: ")


@pytest.mark.parametrize("text", ["s3://datasets/digits/", "s3://b12/x/y", "gs://bkt/a",
                                  "az://cont/a/", "file:///data/x"])
def test_round_trips(text: str) -> None:
    assert str(parse_uri(text)) == text
    assert parse_uri(str(parse_uri(text))) == parse_uri(text)


def test_helpers() -> None:
    uri = parse_uri("s3://datasets/digits")
    assert not uri.is_prefix
    assert uri.as_prefix() == parse_uri("s3://datasets/digits/")
    assert uri.name == "digits"
    assert uri.root == parse_uri("s3://datasets")
    assert uri.join("a", "b.bin") == parse_uri("s3://datasets/digits/a/b.bin")
    assert uri.join("ckpt/") == parse_uri("s3://datasets/digits/ckpt/")
    assert parse_uri(uri) is uri
    with pytest.raises(InvalidURI):
        uri.join("..")
