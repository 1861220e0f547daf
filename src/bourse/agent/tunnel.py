"""The node's end of the streams one agent connection carries (``bourse.protocol.stream``):
proxied connections to jobs' ports and ``bourse exec`` sessions.

Everything a stream may reach is checked here, whatever the coordinator asked: the attempt must
be one this node is running, a port must be one its job declared, and a connection only ever
goes to 127.0.0.1 — never to another port or another host — and only when what listens there
is the attempt's own process (``agent.listeners``: not another job's, not any process that
took the port). Streams end with the connection that carries them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from bourse.agent.execs import load_beside, run_exec
from bourse.agent.listeners import PortGuard
from bourse.agent.shim import AttemptDir
from bourse.agent.spool import AttemptRecord, AttemptStatus
from bourse.protocol.agent import StartJob
from bourse.protocol.common import Wire
from bourse.protocol.stream import (
    MAX_STREAMS,
    ExecTarget,
    PortTarget,
    StreamClose,
    StreamOpen,
    StreamOpened,
)
from bourse.tunnel.stream import Stream, StreamClosed

log = logging.getLogger("bourse.agent.tunnel")
CONNECT_TIMEOUT_S = 10.0
JOB_POLL_S = 1.0  # how soon an exec notices that its job has ended
LOOPBACK = "127.0.0.1"
Lookup = Callable[[str, int], AttemptRecord | None]


class NodeTunnel:
    """Streams of one connection. ``send`` queues a message for the coordinator; ``lookup``
    finds an attempt's record (the spool's)."""

    def __init__(self, send: Callable[[Wire], None], lookup: Lookup,
                 guard: PortGuard | None = None) -> None:
        self._send, self._lookup = send, lookup
        self._guard = guard or PortGuard()
        self._streams: dict[int, Stream] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def handle(self, message: Wire) -> None:
        """A stream frame from the coordinator (never blocks the connection's reader)."""
        if isinstance(message, StreamOpen):
            self._open(message)
            return
        stream = self._streams.get(getattr(message, "stream", -1))
        if stream is not None:
            stream.receive(message)
            if isinstance(message, StreamClose):
                self._streams.pop(stream.id, None)

    def _open(self, message: StreamOpen) -> None:
        refusal = self._refusal(message)
        if refusal is not None:
            self._send(StreamClose(stream=message.stream, error=refusal))
            return
        stream = Stream(message.stream, self._send)
        self._streams[stream.id] = stream
        task = asyncio.create_task(self._serve(stream, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _refusal(self, message: StreamOpen) -> str | None:
        """Why this stream may not be opened, or None."""
        if message.stream in self._streams:
            return f"stream {message.stream} is already open"
        if len(self._streams) >= MAX_STREAMS:
            return f"this node already carries {MAX_STREAMS} streams"
        record = self._lookup(message.job_id, message.attempt)
        if record is None or record.state is not AttemptStatus.RUNNING:
            return (f"job {message.job_id} attempt {message.attempt} is not running on this "
                    "node")
        target = message.target
        if isinstance(target, PortTarget):
            spec = StartJob.model_validate_json(record.spec).spec
            if spec.port(target.port) is None:
                return f"port {target.port} is not declared by job {message.job_id}"
            if spec.compute.image is not None:
                return (f"job {message.job_id} runs in a container ({spec.compute.image}); "
                        "its ports are in the container's own network and are not reached "
                        "from the node yet")
        return None

    async def _serve(self, stream: Stream, message: StreamOpen) -> None:
        try:
            if isinstance(message.target, PortTarget):
                why = await self._not_its_own(message, message.target.port)
                if why is not None:
                    stream.close(error=why)
                    return
                await self._connect(stream, message.target.port)
            else:
                await self._exec(stream, message, message.target)
        except StreamClosed:
            pass
        except Exception as exc:  # one stream's failure never takes the connection down
            log.exception("stream %s failed", stream.id)
            stream.close(error=f"the node failed: {type(exc).__name__}")
        finally:
            stream.close()
            self._streams.pop(stream.id, None)

    async def _not_its_own(self, message: StreamOpen, port: int) -> str | None:
        """Why what listens on ``port`` is not the attempt's own server, or None."""
        record = self._lookup(message.job_id, message.attempt)
        if record is None or record.pid is None or record.state is not AttemptStatus.RUNNING:
            return f"job {message.job_id} attempt {message.attempt} is not running on this node"
        return await self._guard.refusal(message.job_id, message.attempt, port, record.pid)

    async def _connect(self, stream: Stream, port: int) -> None:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(LOOPBACK, port), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            stream.close(error=f"nothing answers on {LOOPBACK}:{port} beside the job "
                               f"({getattr(exc, 'strerror', None) or type(exc).__name__}); "
                               "is the server started and listening on 127.0.0.1?")
            return
        self._send(StreamOpened(stream=stream.id))
        down = asyncio.create_task(_to_socket(stream, writer))
        try:
            await _from_socket(stream, reader)
        finally:
            down.cancel()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _exec(self, stream: Stream, message: StreamOpen, target: ExecTarget) -> None:
        record = self._lookup(message.job_id, message.attempt)
        beside = load_beside(AttemptDir(Path(record.dir))) if record is not None else None
        if beside is None:
            stream.close(error="the job's work dir and environment are not known on this "
                               "node (it was started by an older agent)")
            return
        if beside.image is not None:
            stream.close(error=f"job {message.job_id} runs in a container ({beside.image}); "
                               "bourse exec does not enter containers yet")
            return
        runner = asyncio.create_task(run_exec(
            stream, target, beside, lambda: self._send(StreamOpened(stream=stream.id))))
        watcher = asyncio.create_task(self._until_ended(message.job_id, message.attempt))
        try:
            done, _ = await asyncio.wait([runner, watcher], return_when=asyncio.FIRST_COMPLETED)
            if watcher in done:  # the command goes with the job (run_exec hangs it up)
                stream.close(error=f"job {message.job_id} ended")
            await runner
        finally:
            watcher.cancel()
            runner.cancel()

    async def _until_ended(self, job_id: str, attempt: int) -> None:
        while (record := self._lookup(job_id, attempt)) is not None and \
                record.state is AttemptStatus.RUNNING:
            await asyncio.sleep(JOB_POLL_S)

    async def close(self) -> None:
        """The connection ended: every stream ends (execs are killed)."""
        for stream in list(self._streams.values()):
            stream.dropped("the connection ended")
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._streams.clear()


async def _from_socket(stream: Stream, reader: asyncio.StreamReader) -> None:
    """What the job's server sends, until it closes its side (then the stream ends)."""
    while data := await reader.read(await stream.credit()):
        await stream.write(data)


async def _to_socket(stream: Stream, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := (await stream.read())[1]:
            writer.write(data)
            await writer.drain()
        if stream.closed is None and writer.can_write_eof():
            writer.write_eof()
