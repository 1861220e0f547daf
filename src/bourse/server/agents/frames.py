"""What the hub reads from an agent's channel: a frame's validation (`parse_frame`), the
messages of a connection queued for one transaction (`Batch`), and the connection itself."""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field

from pydantic import ValidationError

from bourse.channel import Channel
from bourse.protocol.agent import (
    AGENT_TO_SERVER,
    Ack,
    Envelope,
    Error,
    Heartbeat,
    Hello,
    Interruption,
    JobEvent,
    LogChunk,
    Metrics,
    ProbeReportMessage,
    envelope,
)
from bourse.protocol.common import ProbeReport, Wire
from bourse.protocol.track import TrackBatch
from bourse.protocol.version import PROTOCOL_VERSION


class Malformed(Exception):
    """A frame that is not a valid message: the connection is closed."""


@dataclass(eq=False)  # compared and hashed by identity
class Connection:
    node_id: str
    session: str
    channel: Channel
    outbox: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    features: frozenset[str] = frozenset()  # what the agent said it speaks (Hello.features)
    busy: bool = False  # its reader holds a message the intake has no room for yet
    direct: bool = False  # its node shares our loopback (``tunnel.loopback``)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def send(self, message: Wire) -> None:
        frame = envelope(f"{self.session}:{next(self._ids)}", message)
        self.outbox.put_nowait(frame.model_dump_json())


@dataclass
class Batch:
    ids: list[str] = field(default_factory=list)
    events: list[JobEvent] = field(default_factory=list)
    chunks: list[LogChunk] = field(default_factory=list)
    heartbeat: Heartbeat | None = None
    # attempts named by events that came after the heartbeat: the heartbeat may predate them
    # (events are recorded before it), so its silence about them proves nothing
    after_beat: set[tuple[str, int]] = field(default_factory=set)
    reports: list[ProbeReport] = field(default_factory=list)
    metrics: list[Metrics] = field(default_factory=list)
    tracks: list[TrackBatch] = field(default_factory=list)
    log_bytes: int = 0
    frames: list[tuple[Envelope, Wire]] = field(default_factory=list)

    @property
    def interruption(self) -> Interruption | None:
        """The cloud takes the node back (the last notice the batch holds)."""
        return next((b for _, b in reversed(self.frames) if isinstance(b, Interruption)), None)

    @property
    def frees_capacity(self) -> bool:
        return any(e.kind in ("exited", "start_failed") for e in self.events)

    def split(self) -> list[Batch]:
        """One batch per message, in order."""
        singles = []
        for frame, body in self.frames:
            single = Batch()
            add_frame(single, frame, body)
            singles.append(single)
        return singles


def parse_frame(text: str) -> tuple[Envelope, Wire | None]:
    """An envelope and its validated body; body None for a type we do not know."""
    try:
        frame = Envelope.model_validate(json.loads(text, parse_constant=_not_json))
    except (ValueError, ValidationError, RecursionError) as exc:
        raise Malformed(f"not a protocol frame: {str(exc)[:200]}") from None
    if frame.v != PROTOCOL_VERSION:
        raise Malformed(f"protocol version {frame.v} is not supported "
                        f"(this coordinator speaks {PROTOCOL_VERSION})")
    model = AGENT_TO_SERVER.get(frame.type)
    if model is None:
        return frame, None
    try:
        return frame, model.model_validate(frame.body)
    except ValidationError as exc:
        raise Malformed(f"invalid {frame.type} body: {str(exc)[:300]}") from None


def _not_json(constant: str) -> None:
    """NaN and Infinity: Python reads them, JSON has neither, and a database refuses them."""
    raise ValueError(f"{constant} is not JSON")


def add_frame(batch: Batch, frame: Envelope, body: Wire | None) -> None:
    if body is not None:
        batch.frames.append((frame, body))
    if isinstance(body, JobEvent):
        batch.events.append(body)
        if batch.heartbeat is not None:
            batch.after_beat.add((body.job_id, body.attempt))
    elif isinstance(body, LogChunk):
        batch.chunks.append(body)
        batch.log_bytes += len(body.data)
    elif isinstance(body, Heartbeat):
        batch.heartbeat = body
        batch.after_beat.clear()
    elif not _collect(batch, body) and isinstance(body, Hello):
        return  # a second hello on the same connection changes nothing
    if not isinstance(body, Ack | Error):
        batch.ids.append(frame.id)


def _collect(batch: Batch, body: Wire | None) -> bool:
    """Probe reports, samples and tracking records, each to its list; False for others."""
    if isinstance(body, ProbeReportMessage):
        batch.reports.append(body.report)
    elif isinstance(body, Metrics):
        batch.metrics.append(body)
    elif isinstance(body, TrackBatch):
        batch.tracks.append(body)
    else:
        return False
    return True
