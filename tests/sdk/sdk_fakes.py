"""Wire bodies and SSE streams for the SDK tests' ``httpx.MockTransport`` handlers."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

URL = "http://exchange.test:8000"
TOKEN = "tok-123"


def spec(command: list[str] | None = None) -> dict[str, Any]:
    return {"command": command or ["python", "train.py"]}


def job(job_id: str = "j1", state: str = "PENDING", **extra: Any) -> dict[str, Any]:
    return {"id": job_id, "state": state, "spec": spec(), "created_at": 1000.0,
            "updated_at": 1001.0, "attempt": 0, **extra}


def chunk(cursor: int, text: str | bytes, stream: str = "stdout", attempt: int = 1,
          rank: int = 0) -> dict[str, Any]:
    raw = text.encode() if isinstance(text, str) else text
    return {"cursor": cursor, "attempt": attempt, "rank": rank, "seq": cursor, "stream": stream,
            "offset": 0, "data": base64.b64encode(raw).decode()}


def event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


class Dropping(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body that sends ``parts`` and then, if ``error``, fails like a cut socket."""

    def __init__(self, parts: list[str], error: bool = True) -> None:
        self.parts = parts
        self.error = error

    def __iter__(self) -> Iterator[bytes]:
        for part in self.parts:
            yield part.encode()
        if self.error:
            raise httpx.ReadError("connection reset by peer")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part.encode()
        if self.error:
            raise httpx.ReadError("connection reset by peer")


def sse_response(parts: list[str], *, error: bool = False) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"},
                          stream=Dropping(parts, error))
