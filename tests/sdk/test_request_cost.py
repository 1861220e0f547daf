"""The SDK's requests do not search for modules: httpcore asks for ``sniffio`` on every
request and, without it installed, each failed import walks ``sys.path`` (~0.6 ms of CPU
per request, a third of a submit's client cost). ``sniffio`` is a dependency for that."""

from __future__ import annotations

import asyncio
import importlib.abc
import json
import sys
from collections.abc import Sequence
from types import ModuleType

import pytest
from sdk_fakes import TOKEN, job

from bourse.sdk.async_client import AsyncClient

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recorder(importlib.abc.MetaPathFinder):
    """Finds nothing; notes every module the import system is asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> None:
        self.asked.append(fullname)


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    body = json.dumps(job(state="RUNNING", attempts=[])).encode()
    try:
        while await reader.readuntil(b"\r\n\r\n"):  # GET requests: headers only
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):  # the client hung up
        pass
    finally:
        writer.close()


async def test_a_request_imports_nothing() -> None:
    server = await asyncio.start_server(_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    recorder = Recorder()
    try:
        async with AsyncClient(f"http://127.0.0.1:{port}", TOKEN) as client:
            await client.job("j1")  # the first request may import what it needs
            sys.meta_path.insert(0, recorder)
            try:
                for _ in range(5):
                    assert (await client.job("j1")).id == "j1"
            finally:
                sys.meta_path.remove(recorder)
    finally:
        server.close()
    assert recorder.asked == []
