"""One welcomed connection of the agent to the coordinator (``daemon.Agent`` makes one per
connection): a sender that replays the spool's outbox within a send window, a receiver that
hands the coordinator's messages to the agent, heartbeats that renew the attempts' lease, the
probe report, stream frames and metrics samples."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import ValidationError

from bourse.agent.tunnel import NodeTunnel
from bourse.channel import Channel
from bourse.protocol.agent import (
    SERVER_TO_AGENT,
    Ack,
    CancelJob,
    Envelope,
    Error,
    Heartbeat,
    Preempt,
    ProbeReportMessage,
    StartJob,
    envelope,
)
from bourse.protocol.common import Wire
from bourse.protocol.stream import STREAM_MESSAGES

if TYPE_CHECKING:
    from bourse.agent.daemon import Agent

log = logging.getLogger("bourse.agent")
SEND_WINDOW = 1000  # outbox rows in flight before waiting for acks
SEND_WINDOW_BYTES = 8 * 1024 * 1024  # and bytes: bounds memory on both ends


class Session:
    """One live connection: a sender (outbox replay), a receiver and a heartbeat."""

    def __init__(self, agent: Agent, channel: Channel) -> None:
        self.agent, self.channel = agent, channel
        self.lock = asyncio.Lock()
        self.in_flight: dict[int, int] = {}  # row id -> frame size
        self.acked = asyncio.Event()
        self._ids = itertools.count()
        self.stream_out: asyncio.Queue[Wire] = asyncio.Queue()  # bounded by flow control
        self.tunnel = NodeTunnel(self.stream_out.put_nowait, agent.spool.get_attempt)
        self.accepts: frozenset[str] = frozenset()  # optional messages the coordinator takes
        self.beats: dict[str, float] = {}  # heartbeats not yet acknowledged: id -> sent at

    async def send(self, body: Wire | Callable[[], Wire], msg_id: str | None = None) -> str:
        async with self.lock:
            message = body() if callable(body) else body
            frame = envelope(msg_id or f"a{next(self._ids)}", message)
            await self.channel.send(frame.model_dump_json())
            return frame.id

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._sender()), asyncio.create_task(self._receiver()),
                 asyncio.create_task(self._heartbeat()), asyncio.create_task(self._reporter()),
                 asyncio.create_task(self._streams())]
        if "metrics" in self.accepts and self.agent.config.metrics_interval_s > 0:
            tasks.append(asyncio.create_task(self._metrics()))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.tunnel.close()

    async def _streams(self) -> None:
        """Stream frames for the coordinator (not spooled: streams end with the connection)."""
        while True:
            await self.send(await self.stream_out.get())

    async def _sender(self) -> None:
        spool, after = self.agent.spool, 0
        while True:
            spool.changed.clear()
            rows = spool.pending(after, 200)
            if not rows:
                await spool.changed.wait()
                continue
            for row in rows:
                if row.type == "track" and "track" not in self.accepts:
                    spool.ack([row.id])  # an older coordinator: it has nowhere to put them
                    after = row.id
                    continue
                while (len(self.in_flight) >= SEND_WINDOW
                       or sum(self.in_flight.values()) >= SEND_WINDOW_BYTES):
                    self.acked.clear()
                    await self.acked.wait()
                self.in_flight[row.id] = await self._send_row(row.message(), row.id)
                after = row.id

    async def _send_row(self, message: Wire, row_id: int) -> int:
        text = envelope(f"o{row_id}", message).model_dump_json()
        async with self.lock:
            await self.channel.send(text)
        return len(text)

    async def _receiver(self) -> None:
        while True:
            frame = Envelope.model_validate(json.loads(await self.channel.receive()))
            model = SERVER_TO_AGENT.get(frame.type)
            if model is None:
                await self.send(Error(message=f"unknown message type {frame.type!r}",
                                      ref=frame.id))
                continue
            try:
                body = model.model_validate(frame.body)
            except ValidationError as exc:  # without the input: a start carries a secret
                log.error("invalid %s from the coordinator: %s", frame.type,
                          exc.errors(include_input=False, include_url=False))
                continue
            await self._handle(frame, body)

    async def _handle(self, frame: Envelope, body: Wire) -> None:
        if isinstance(body, STREAM_MESSAGES):
            self.tunnel.handle(body)
        elif isinstance(body, Ack):
            self._heard(body.ids)
            rows = [int(i[1:]) for i in body.ids if i.startswith("o") and i[1:].isdigit()]
            self.agent.spool.ack(rows)
            self.agent.runtime.sweep()
            for row in rows:
                self.in_flight.pop(row, None)
            self.acked.set()
        elif isinstance(body, StartJob):
            self.agent.start(body)
            await self.send(Ack(ids=[frame.id]))
        elif isinstance(body, CancelJob):
            self.agent.cancel(body)
            await self.send(Ack(ids=[frame.id]))
        elif isinstance(body, Preempt):
            self.agent.preempt(body)
            await self.send(Ack(ids=[frame.id]))
        elif isinstance(body, Error):
            log.error("coordinator error: %s (about %s)", body.message, body.ref)

    async def _reporter(self) -> None:
        """Send the probe report on every connection; probe again when it is due."""
        while True:
            report = await self.agent.current_report()
            await self.send(ProbeReportMessage(report=report))
            await asyncio.sleep(max(1.0, self.agent.report_due_in()))

    def _heard(self, ids: list[str]) -> None:
        """Acknowledged heartbeats prove the coordinator heard the node: renew its lease from
        when the newest of them was sent."""
        sent = [self.beats.pop(i) for i in ids if i in self.beats]
        if sent:
            self.agent.lease.renew(max(sent))

    async def _heartbeat(self) -> None:
        runtime = self.agent.runtime
        while True:
            await asyncio.sleep(self.agent.config.keep_alive_s)
            sent = time.time()
            beat = await self.send(Heartbeat(running=runtime.running(), time=sent))
            self.beats[beat] = sent
            if len(self.beats) > 1000:  # never acknowledged: an old coordinator, or trouble
                self.beats.pop(next(iter(self.beats)))

    async def _metrics(self) -> None:
        """Sample the running jobs and the node every interval; best effort, not spooled."""
        while True:
            await asyncio.sleep(self.agent.config.metrics_interval_s)
            message = await asyncio.to_thread(self.agent.sampler.sample, self.agent.live())
            await self.send(message, msg_id=f"m{next(self._ids)}")
