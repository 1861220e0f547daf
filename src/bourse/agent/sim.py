"""Simulated agents: a node's side of the protocol without its processes, thousands per process.

A :class:`SimAgent` speaks ``bourse.protocol.agent`` over any channel of the seam
(``bourse.channel``): the real WebSocket (``websocket_dial``, the agent's own ``agent.socket``)
or the in-memory pair. It says hello, heartbeats every keep-alive listing what it runs, and
for each start it acknowledges the frame, reports ``accepted`` and ``started`` (RUNNING), sends
a few log chunks and reports ``exited`` after ``run_s``; a cancel ends the attempt early. It
keeps no spool — what the coordinator has not acknowledged when the connection ends is not
sent again — and it measures what a load test asks: how long each heartbeat waited for its
acknowledgement, and whether the coordinator closed the connection (and why).

Benchmarks (``benchmarks/agents.py``, ``benchmarks/throughput.py``) and tests run fleets of them
against a real coordinator::

    agent = SimAgent(SimConfig("sim-1", capabilities), websocket_dial(url, credential, 20.0))
    task = asyncio.create_task(agent.run())
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from bourse.agent import socket
from bourse.channel import Channel, ChannelClosed
from bourse.protocol.agent import (
    Ack,
    CancelJob,
    Envelope,
    EventKind,
    Heartbeat,
    Hello,
    JobEvent,
    LogChunk,
    StartJob,
    Welcome,
    envelope,
)
from bourse.protocol.common import AttemptRef, Capabilities, Wire

Dial = Callable[[], contextlib.AbstractAsyncContextManager[Channel]]
WELCOME_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SimConfig:
    """What a simulated node is and how its jobs behave."""

    name: str
    capabilities: Capabilities
    keep_alive_s: float = 20.0
    run_s: float = 0.0  # how long each job "runs" between started and exited
    log_chunks: int = 3  # chunks of output per job
    chunk_bytes: int = 64
    exit_code: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.keep_alive_s <= 86400:
            raise ValueError("keep_alive_s is a number of seconds in (0, 86400]")
        if self.run_s < 0 or self.log_chunks < 0 or self.chunk_bytes < 1:
            raise ValueError("run_s and log_chunks must be >= 0, chunk_bytes >= 1")


@dataclass
class SimStats:
    """What one simulated agent saw."""

    welcomed_at: float | None = None  # when its welcome arrived (monotonic clock)
    ack_s: list[float] = field(default_factory=list)  # each heartbeat's wait for its ack
    beats_sent: int = 0
    jobs_started: int = 0
    jobs_ended: int = 0
    closed: ChannelClosed | None = None  # how the connection ended, once it has

    @property
    def beats_unacked(self) -> int:
        return self.beats_sent - len(self.ack_s)


class SimAgent:
    def __init__(self, config: SimConfig, dial: Dial,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config, self.dial, self.clock = config, dial, clock
        self.stats = SimStats()
        self.node_id: str | None = None  # from the welcome
        self.welcomed = asyncio.Event()
        self._ids = itertools.count()
        self._beats: dict[str, float] = {}  # heartbeat id -> sent at
        self._jobs: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._seqs: dict[tuple[str, int], itertools.count[int]] = {}
        self._channel: Channel | None = None

    @property
    def running(self) -> list[tuple[str, int]]:
        return list(self._jobs)

    async def run(self) -> None:
        """One session: dial, hello, then heartbeats and jobs until the channel closes."""
        try:
            async with self.dial() as channel:
                self._channel = channel
                await self._send(Hello(name=self.config.name,
                                       capabilities=self.config.capabilities,
                                       keep_alive_s=self.config.keep_alive_s))
                await self._welcome(channel)
                await self._serve(channel)
        except ChannelClosed as exc:
            self.stats.closed = exc
        finally:
            for task in self._jobs.values():
                task.cancel()
            self._channel = None

    async def _welcome(self, channel: Channel) -> None:
        frame = Envelope.model_validate(json.loads(
            await asyncio.wait_for(channel.receive(), WELCOME_TIMEOUT_S)))
        if frame.type != "welcome":
            raise ChannelClosed(reason=f"expected welcome, got {frame.type}")
        self.node_id = Welcome.model_validate(frame.body).node_id
        self.stats.welcomed_at = self.clock()
        self.welcomed.set()

    async def _serve(self, channel: Channel) -> None:
        beats = asyncio.create_task(self._heartbeats())
        try:
            while True:
                self._handle(Envelope.model_validate(json.loads(await channel.receive())))
        finally:
            beats.cancel()
            with contextlib.suppress(asyncio.CancelledError, ChannelClosed):
                await beats

    def _handle(self, frame: Envelope) -> None:
        if frame.type == "ack":
            self._acked(Ack.model_validate(frame.body).ids)
        elif frame.type == "start_job":
            self._start(StartJob.model_validate(frame.body), frame.id)
        elif frame.type == "cancel_job":
            self._cancel(CancelJob.model_validate(frame.body), frame.id)
        elif frame.type == "preempt":
            self._reply(Ack(ids=[frame.id]))
            for key in list(self._jobs):
                self._stop(key, stale=False)

    def _acked(self, ids: list[str]) -> None:
        now = self.clock()
        for msg_id in ids:
            sent = self._beats.pop(msg_id, None)
            if sent is not None:
                self.stats.ack_s.append(now - sent)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.config.keep_alive_s)
            msg_id = await self._send(Heartbeat(
                running=[AttemptRef(job_id=j, attempt=a) for j, a in self._jobs],
                time=time.time()))
            self._beats[msg_id] = self.clock()
            self.stats.beats_sent += 1

    # --- jobs ---------------------------------------------------------------------------------

    def _start(self, start: StartJob, frame_id: str) -> None:
        self._reply(Ack(ids=[frame_id]))
        key = (start.job_id, start.attempt)
        if key in self._jobs:  # sent again after a reconnect: it runs already
            return
        self.stats.jobs_started += 1
        self._jobs[key] = asyncio.create_task(self._job(key))

    def _cancel(self, cancel: CancelJob, frame_id: str) -> None:
        self._reply(Ack(ids=[frame_id]))
        self._stop((cancel.job_id, cancel.attempt), stale=cancel.stale)

    def _stop(self, key: tuple[str, int], stale: bool) -> None:
        task = self._jobs.pop(key, None)
        if task is None:
            return
        task.cancel()
        if not stale:  # a stale attempt is not reported on any more
            self._reply(self._event(key, "exited", exit_code=None, signal=15,
                                    signalled=True))
            self.stats.jobs_ended += 1

    async def _job(self, key: tuple[str, int]) -> None:
        await self._send(self._event(key, "accepted"))
        await self._send(self._event(key, "started", pid=1))
        offset, line = 0, b"x" * (self.config.chunk_bytes - 1) + b"\n"
        for _ in range(self.config.log_chunks):
            await self._send(LogChunk(job_id=key[0], attempt=key[1], seq=self._seq(key),
                                      stream="stdout", offset=offset,
                                      data=base64.b64encode(line).decode(), time=time.time()))
            offset += len(line)
        await asyncio.sleep(self.config.run_s)
        self._jobs.pop(key, None)
        await self._send(self._event(key, "exited", exit_code=self.config.exit_code,
                                     exited_at=time.time()))
        self.stats.jobs_ended += 1

    def _seq(self, key: tuple[str, int]) -> int:
        return next(self._seqs.setdefault(key, itertools.count()))

    def _event(self, key: tuple[str, int], kind: EventKind, **data: Any) -> JobEvent:
        return JobEvent(job_id=key[0], attempt=key[1], seq=self._seq(key), kind=kind,
                        time=time.time(), data=data)

    # --- sending ------------------------------------------------------------------------------

    async def _send(self, body: Wire) -> str:
        if self._channel is None:
            raise ChannelClosed(reason="not connected")
        msg_id = f"{self.config.name}:{next(self._ids)}"
        await self._channel.send(envelope(msg_id, body).model_dump_json())
        return msg_id

    def _reply(self, body: Wire) -> None:
        """Send without waiting (from the receiving loop): in order, as a task."""
        task = asyncio.create_task(self._send(body))
        task.add_done_callback(_quiet)


def _quiet(task: asyncio.Task[str]) -> None:
    if not task.cancelled():
        task.exception()  # a closed channel: the session is ending anyway


def websocket_dial(url: str, credential: str, keep_alive_s: float) -> Dial:
    """Dial the coordinator's agent WebSocket (``ws://…/api/v1/agent/ws``) as a real agent
    does, pings and all."""
    def dial() -> contextlib.AbstractAsyncContextManager[Channel]:
        return _as_channel(socket.dial(url, credential, keep_alive_s))
    return dial


@contextlib.asynccontextmanager
async def _as_channel(
        opened: contextlib.AbstractAsyncContextManager[socket.WebSocketChannel],
) -> AsyncIterator[Channel]:
    async with opened as channel:
        yield channel
