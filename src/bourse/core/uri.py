"""Store URIs: ``s3://bucket/prefix``, ``gs://bucket/prefix``, ``az://container/prefix`` and
``file:///absolute/path``, parsed once at the edge into a `StoreURI` with clear errors.

A key that ends with ``/`` (or an empty key) names a prefix; any other key names an object or,
when no such object exists, the prefix ``key + "/"`` (prefetch resolves which).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bourse.core.errors import InvalidInput, StorageError


class InvalidURI(InvalidInput, StorageError):
    """A store URI that cannot be understood (bad scheme, missing bucket, relative path...)."""


SCHEMES = ("s3", "gs", "az", "file")
_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfs": "az", "abfss": "az", "azure": "az",
            "http": "s3", "https": "s3"}
_EXAMPLES = "s3://datasets/digits/, gs://bucket/prefix, az://container/prefix, file:///data/x"
_BUCKET_RULES = {
    # S3 general-purpose bucket names; SeaweedFS, MinIO and R2 accept the same set.
    "s3": (re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"),
           "3-63 characters: lowercase letters, digits, '.' and '-', starting and ending with a "
           "letter or digit"),
    "gs": (re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$"),
           "3-222 characters: lowercase letters, digits, '.', '_' and '-'"),
    "az": (re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$"),
           "3-63 characters: lowercase letters, digits and single '-'"),
}
_IP_LIKE = re.compile(r"^\d+\.\d+\.\d+\.\d+$")


@dataclass(frozen=True, slots=True)
class StoreURI:
    """A location in an object store. ``key`` has no leading ``/``; for ``file`` URIs the bucket
    is empty and the key is the absolute path without its leading ``/``."""

    scheme: str
    bucket: str
    key: str = ""

    def __str__(self) -> str:
        if self.scheme == "file":
            return f"file:///{self.key}"
        return f"{self.scheme}://{self.bucket}/{self.key}"

    @property
    def is_prefix(self) -> bool:
        return self.key == "" or self.key.endswith("/")

    @property
    def root(self) -> StoreURI:
        """The bucket (or, for ``file``, the filesystem root) this URI lives in."""
        return StoreURI(self.scheme, self.bucket, "")

    @property
    def name(self) -> str:
        """The last path segment (``digits`` for ``s3://datasets/digits/``)."""
        return self.key.rstrip("/").rsplit("/", 1)[-1]

    def as_prefix(self) -> StoreURI:
        return self if self.is_prefix else StoreURI(self.scheme, self.bucket, self.key + "/")

    def join(self, *parts: str) -> StoreURI:
        """A URI below this one; ``parts`` are relative keys (``"a/b"``, ``"c"``)."""
        key = self.as_prefix().key + "/".join(p.strip("/") for p in parts if p.strip("/"))
        if parts and parts[-1].endswith("/"):
            key += "/"
        _check_key(key, str(self))
        return StoreURI(self.scheme, self.bucket, key)


def parse_uri(text: str | StoreURI, *, field: str = "uri") -> StoreURI:
    """Parse ``text`` into a `StoreURI`, or raise `InvalidURI` saying what is wrong."""
    if isinstance(text, StoreURI):
        return text
    raw = text.strip()
    scheme, sep, rest = raw.partition("://")
    if not sep:
        raise InvalidURI(f"{text!r} is not a store URI", field=field,
                         hint=f"write scheme://bucket/prefix, e.g. {_EXAMPLES}")
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidURI(f"unsupported scheme {scheme!r} in {text!r}", field=field,
                         hint=_scheme_hint(scheme))
    if scheme == "file":
        return _parse_file(rest, text, field)
    bucket, _, key = rest.partition("/")
    _check_bucket(scheme, bucket, text, field)
    _check_key(key, text, field)
    return StoreURI(scheme, bucket, key)


def _scheme_hint(scheme: str) -> str:
    if scheme in ("http", "https"):
        return ("an HTTP endpoint is not a URI: write s3://bucket/prefix and set the endpoint "
                "URL in the store settings (BOURSE_S3_ENDPOINT)")
    if scheme in _ALIASES:
        return f"write {_ALIASES[scheme]}:// instead"
    return f"use one of {', '.join(s + '://' for s in SCHEMES)}"


def _parse_file(rest: str, text: str, field: str) -> StoreURI:
    host, slash, path = rest.partition("/")
    if host not in ("", "localhost") or not slash:
        raise InvalidURI(f"{text!r} is not an absolute file URI", field=field,
                         hint="write file:///absolute/path (three slashes)")
    _check_key(path, text, field)
    return StoreURI("file", "", path)


def _check_bucket(scheme: str, bucket: str, text: str, field: str) -> None:
    if not bucket:
        raise InvalidURI(f"{text!r} names no bucket", field=field,
                         hint=f"write {scheme}://bucket/prefix")
    pattern, rule = _BUCKET_RULES[scheme]
    if not pattern.match(bucket) or _IP_LIKE.match(bucket) or ".." in bucket:
        raise InvalidURI(f"invalid bucket name {bucket!r} in {text!r}", field=field,
                         hint=f"a {scheme} bucket name has {rule}")


def _check_key(key: str, text: str, field: str = "uri") -> None:
    segments = key.split("/")
    inner = segments[:-1] if key.endswith("/") else segments
    if key and any(s in ("", ".", "..") for s in inner):
        raise InvalidURI(f"{text!r} has an empty, '.' or '..' path segment", field=field,
                         hint="remove the doubled '/' or the relative segment")
