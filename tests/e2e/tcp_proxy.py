"""A TCP proxy between an agent and the coordinator that a test can cut and restore.

It runs an asyncio loop on a thread of the test process. ``cut()`` is a network partition: new
connections are blackholed, i.e. accepted but neither answered nor forwarded, as a dropped SYN
would leave a client waiting, and live connections are dropped at once (both ends see them
close) or, with ``cut(silent=True)``, frozen: nothing more crosses them and neither end is told,
as when a NAT forgets the flow. ``restore()`` heals it: held connections are forwarded from then
on (a retransmitted SYN gets through), frozen ones resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any

BUFFER = 64 * 1024


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.loop = asyncio.new_event_loop()
        self.accepted = 0  # connections accepted so far
        self.forwarded = 0  # connections that reached the target
        self._live: set[asyncio.Task[None]] = set()
        self._open: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="tcp-proxy")
        self._thread.start()
        self.port = self._call(self._listen())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=10)

    async def _listen(self) -> int:
        self._open = asyncio.Event()
        self._open.set()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    def cut(self, *, silent: bool = False) -> None:
        self._call(self._cut(silent))

    async def _cut(self, silent: bool = False) -> None:
        assert self._open is not None
        self._open.clear()
        if silent:
            return
        for task in list(self._live):
            task.cancel()
        await asyncio.gather(*self._live, return_exceptions=True)

    def restore(self) -> None:
        self._call(self._restore())

    async def _restore(self) -> None:
        assert self._open is not None
        self._open.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._open is not None
        self.accepted += 1
        try:
            await self._open.wait()  # blackholed while cut
            task = asyncio.current_task()
            assert task is not None
            self._live.add(task)
            try:
                await self._forward(reader, writer)
            finally:
                self._live.discard(task)
        except (asyncio.CancelledError, OSError):
            pass
        finally:
            writer.transport.abort()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.forwarded += 1
        try:
            pipes = [asyncio.create_task(self._pipe(reader, up_writer)),
                     asyncio.create_task(self._pipe(up_reader, writer))]
            try:
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pipe in pipes:
                    pipe.cancel()
                await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            up_writer.transport.abort()

    def close(self) -> None:
        if self.loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._call(self._close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._cut()
        tasks = asyncio.all_tasks() - {asyncio.current_task()}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy bytes one way; while the link is cut, read nothing (the sender's buffers fill up
        as on a dead path) and hold what was read."""
        assert self._open is not None
        while True:
            await self._open.wait()
            data = await reader.read(BUFFER)
            if not data:
                return
            await self._open.wait()
            writer.write(data)
            await writer.drain()
