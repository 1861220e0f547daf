"""``Data``: a URI passed between stages. A stage's output passed as the next stage's argument
is the dependency: the next stage receives it as a local path."""

from __future__ import annotations

from dataclasses import dataclass

from bourse.core.uri import parse_uri


@dataclass(frozen=True)
class Data:
    """A dataset, output or model in an object store (``s3://``, ``gs://``, ``file://``...)."""

    uri: str

    def __post_init__(self) -> None:
        parse_uri(self.uri, field="uri")

    def __str__(self) -> str:
        return self.uri

    def __fspath__(self) -> str:
        raise TypeError(f"{self.uri} is a URI, not a local path: pass it to a Work, which "
                        "receives it as a local directory")
