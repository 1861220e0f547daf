"""The coordinator's streams over agent connections (``bourse.protocol.stream``).

``Tunnels.open`` asks a node to connect a stream to a job's port or to start an exec, and
returns the coordinator's end once the node says it is open; a node carries at most
``MAX_STREAMS`` at once (``TooMany``: HTTP 429 with Retry-After, WebSocket close 1013).
Frames coming back are routed by stream id — only from the connection the stream was opened
on, so a node cannot write into another node's streams. When a connection ends, every stream
it carried ends with it.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Protocol

from bourse.core.errors import BourseError, Conflict, TooMany
from bourse.protocol.common import Wire
from bourse.protocol.stream import (
    MAX_STREAMS,
    STREAMS_FEATURE,
    ExecTarget,
    PortTarget,
    StreamClose,
    StreamOpen,
    StreamOpened,
)
from bourse.tunnel.stream import Stream

OPEN_TIMEOUT_S = 15.0


class Unreachable(BourseError):
    """The node could not open the stream (nothing listens on the port, the job ended...)."""

    exit_code = 1
    http_status = 502


class Carrier(Protocol):
    """What a stream needs of an agent connection (``hub.Connection``)."""

    node_id: str
    features: frozenset[str]

    def send(self, message: Wire) -> None: ...


class Tunnels:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._streams: dict[int, tuple[Carrier, Stream]] = {}
        self._opening: dict[int, asyncio.Future[Wire]] = {}

    def count(self, carrier: Carrier) -> int:
        return sum(1 for c, _ in self._streams.values() if c is carrier)

    async def open(self, carrier: Carrier, job_id: str, attempt: int,
                   target: PortTarget | ExecTarget, timeout: float = OPEN_TIMEOUT_S) -> Stream:
        """A stream to ``target`` beside the job's attempt on ``carrier``'s node."""
        stream, answer = self.start(carrier, job_id, attempt, target)
        await self.confirm(carrier, stream, answer, timeout)
        return stream

    def start(self, carrier: Carrier, job_id: str, attempt: int,
              target: PortTarget | ExecTarget) -> tuple[Stream, asyncio.Future[Wire]]:
        """Ask for a stream without waiting: it may be written to at once (the node buffers
        what comes before it has connected, within the window), which saves a round trip to
        the node; ``confirm`` then says whether it opened."""
        if STREAMS_FEATURE not in carrier.features:
            raise Conflict(f"the agent of node {carrier.node_id} does not support ports or "
                           "exec", hint="upgrade bourse on that node and restart its agent")
        if self.count(carrier) >= MAX_STREAMS:
            raise TooMany(f"node {carrier.node_id} already carries {MAX_STREAMS} streams "
                          "(proxied connections and exec sessions)",
                          hint="close some of them, or retry in a few seconds")
        stream = Stream(next(self._ids), carrier.send)
        opened: asyncio.Future[Wire] = asyncio.get_running_loop().create_future()
        self._streams[stream.id] = (carrier, stream)
        self._opening[stream.id] = opened
        carrier.send(StreamOpen(stream=stream.id, job_id=job_id, attempt=attempt,
                                target=target))
        return stream, opened

    async def confirm(self, carrier: Carrier, stream: Stream, answer: asyncio.Future[Wire],
                      timeout: float = OPEN_TIMEOUT_S) -> None:
        """Wait for the node's answer to ``start``; Unreachable if it refused or was silent."""
        try:
            result = await asyncio.wait_for(asyncio.shield(answer), timeout)
        except TimeoutError:
            self.close(stream, "the node did not answer in time")
            raise Unreachable(f"node {carrier.node_id} did not open the stream within "
                              f"{timeout:.0f} s",
                              hint="retry; check the node's agent log") from None
        finally:
            self._opening.pop(stream.id, None)
        if isinstance(result, StreamClose):
            self._streams.pop(stream.id, None)
            raise Unreachable(result.error or "the node refused the stream")

    def close(self, stream: Stream, error: str | None = None) -> None:
        """End a stream from the coordinator's side and forget it."""
        stream.close(error)
        self._streams.pop(stream.id, None)
        self._opening.pop(stream.id, None)

    def deliver(self, carrier: Carrier, message: Wire) -> None:
        """A stream frame from ``carrier``; frames of unknown or foreign streams are dropped."""
        stream_id = getattr(message, "stream", None)
        entry = self._streams.get(stream_id) if isinstance(stream_id, int) else None
        if entry is None or entry[0] is not carrier:
            return
        stream = entry[1]
        opening = self._opening.get(stream.id)
        if opening is not None and isinstance(message, StreamOpened | StreamClose):
            if not opening.done():
                opening.set_result(message)
            if isinstance(message, StreamOpened):
                return
        stream.receive(message)
        if isinstance(message, StreamClose):
            self._streams.pop(stream.id, None)

    def drop(self, carrier: Carrier) -> None:
        """``carrier``'s connection ended: its streams end too."""
        for stream_id, (owner, stream) in list(self._streams.items()):
            if owner is carrier:
                del self._streams[stream_id]
                stream.dropped(f"the connection to node {carrier.node_id} ended")
                opening = self._opening.get(stream_id)
                if opening is not None and not opening.done():
                    opening.set_result(StreamClose(stream=stream_id,
                                                   error="the node disconnected"))
