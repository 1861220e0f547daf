"""What agents report, stored: group commit of every connection's queued messages.

Each connection's reader queues the frames it validated; one processor applies what has
queued — across connections — in one database transaction (so a burst of log chunks costs one
commit and one placement pass), acknowledges the ids only after the commit, and sends what the
handlers asked to send. Capacity an attempt freed is filled in the same transaction. A message
the database refuses is acknowledged and reported instead of wedging its agent, which would
replay it forever; any other failure closes the connections, whose agents reconnect and
replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from sqlalchemy.exc import DataError, IntegrityError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.protocol.agent import Ack, Envelope, Error
from bourse.protocol.common import Wire
from bourse.server.agents.connections import CLOSE_POLICY
from bourse.server.agents.dispatch import Dispatch
from bourse.server.agents.frames import Batch, Connection, add_frame
from bourse.server.commands import Command
from bourse.server.config import MetricsConfig
from bourse.server.db.database import Database
from bourse.server.logs.meter import LogMeter
from bourse.server.notifier import Notifier
from bourse.server.services.agents import (
    node_heartbeat,
    nodes_heartbeat,
    record_job_events,
    record_log_chunks,
)
from bourse.server.services.metrics import record_metrics
from bourse.server.services.reclaim import interrupt_node
from bourse.server.services.secrets import SecretKeeper
from bourse.server.services.tracking_intake import record_tracks
from bourse.server.services.verification import record_report

log = logging.getLogger(__name__)
MAX_BATCH = 500  # messages per transaction
MAX_BATCH_BYTES = 8 * 1024 * 1024  # and log bytes: a burst of output never balloons memory
# The database refusing what a message says (a value out of range, a broken constraint): the
# message is dropped and reported. Anything else (a lost connection) is retried by replay.
REFUSED = (DataError, IntegrityError, ProgrammingError, OverflowError)
PlaceIn = Callable[[AsyncSession, float], Awaitable[list[Command]]]


class Intake:
    def __init__(self, db: Database, notifier: Notifier, dispatch: Dispatch, *,
                 place_in: PlaceIn, on_change: Callable[[], None], secrets: SecretKeeper,
                 meter: LogMeter, metrics: MetricsConfig,
                 clock: Callable[[], float] = time.time) -> None:
        """``place_in``: placement inside a transaction (the scheduler's); ``on_change``: a
        node may take work now (the scheduler's kick)."""
        self.db, self.notifier, self.dispatch = db, notifier, dispatch
        self.place_in, self.on_change = place_in, on_change
        self.secrets, self.meter, self.metrics, self.clock = secrets, meter, metrics, clock
        self.inbox: asyncio.Queue[tuple[Connection, Envelope, Wire]] = asyncio.Queue(
            maxsize=256)
        self._processor: asyncio.Task[None] | None = None

    async def put(self, connection: Connection, frame: Envelope, body: Wire) -> None:
        """Queue a validated frame (waits while the queue is full: backpressure)."""
        if self._processor is None or self._processor.done():
            self._processor = asyncio.create_task(self._process_all())
        await self.inbox.put((connection, frame, body))

    async def close(self) -> None:
        if self._processor is not None:
            self._processor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._processor

    async def _process_all(self) -> None:
        while True:
            group = await self._next_group()
            await self._apply_group(group)

    async def _next_group(self) -> dict[Connection, Batch]:
        """What has queued, up to MAX_BATCH messages and MAX_BATCH_BYTES of logs."""
        group: dict[Connection, Batch] = {}
        count = size = 0
        item = await self.inbox.get()
        while True:
            connection, frame, body = item
            batch = group.setdefault(connection, Batch())
            before = batch.log_bytes
            add_frame(batch, frame, body)
            count, size = count + 1, size + batch.log_bytes - before
            if self.inbox.empty() or count >= MAX_BATCH or size >= MAX_BATCH_BYTES:
                return group
            item = self.inbox.get_nowait()

    async def _apply_group(self, group: dict[Connection, Batch]) -> None:
        try:
            if len(group) == 1:
                connection, batch = next(iter(group.items()))
                await self._apply(connection, batch)
                return
            try:
                await self._commit(group)
            except REFUSED:
                for connection, batch in group.items():
                    await self._apply(connection, batch)
        except Exception:
            log.exception("applying agent messages failed; their agents will reconnect and "
                          "replay them")
            for connection in group:
                await connection.channel.close(CLOSE_POLICY, "coordinator error")

    async def _apply(self, connection: Connection, batch: Batch) -> None:
        if len(batch.frames) == 1:
            await self._apply_alone(connection, batch)
            return
        try:
            await self._commit({connection: batch})
        except REFUSED:
            log.warning("agent %s: a batch of %d messages failed; applying them one by one",
                        connection.node_id, len(batch.ids))
            for single in batch.split():
                await self._apply_alone(connection, single)

    async def _apply_alone(self, connection: Connection, batch: Batch) -> None:
        try:
            await self._commit({connection: batch})
        except REFUSED as exc:
            log.error("agent %s: message %s cannot be stored, dropping it: %s",
                      connection.node_id, batch.ids, str(exc)[:200])
            connection.send(Error(message="message refused by the coordinator's database",
                                  ref=batch.ids[0] if batch.ids else None))
            connection.send(Ack(ids=batch.ids))

    async def _commit(self, group: dict[Connection, Batch]) -> None:
        now = self.clock()
        commands: list[Command] = []
        timeline = False  # samples changed a job's timeline (a stall, a disk warning)
        async with self.db.write() as session:
            for connection, batch in group.items():
                commands += await self.record(session, connection.node_id, batch, now,
                                              beat=False)
                if batch.metrics:
                    timeline |= await record_metrics(session, connection.node_id,
                                                     batch.metrics, self.metrics, now)
            # every connection's heartbeat in a few statements (after its events, as alone)
            commands += await nodes_heartbeat(session, {
                c.node_id: (b.heartbeat, b.after_beat) for c, b in group.items()
                if b.heartbeat is not None}, now)
            if any(batch.frees_capacity for batch in group.values()):
                # capacity was freed: fill it in the same transaction, without a round trip
                # through the scheduler loop (this is what keeps short jobs flowing)
                commands += await self.place_in(session, now)
        for connection, batch in group.items():
            if batch.ids:
                connection.send(Ack(ids=batch.ids))
        self.dispatch.send(commands)
        if timeline or any(b.events or b.chunks or b.reports or b.interruption
                           for b in group.values()):
            self.notifier.notify()
        if any(b.reports for b in group.values()):
            self.on_change()  # a newly verified node can take work

    async def record(self, session: AsyncSession, node_id: str, batch: Batch,
                     now: float, *, beat: bool = True) -> list[Command]:
        """One connection's messages, in the caller's transaction; secrets redacted first.
        ``beat``: its heartbeat too (else the caller applies it, after the events)."""
        secrets = self.secrets if self.secrets.ready else None
        commands: list[Command] = []
        if batch.interruption is not None:  # first: it decides how the attempts' ends count
            commands += await interrupt_node(session, node_id, batch.interruption, now)
        if batch.chunks:
            patterns = None if secrets is None else await secrets.patterns(
                session, {c.job_id for c in batch.chunks})
            await record_log_chunks(session, node_id, batch.chunks, patterns=patterns,
                                    meter=self.meter, now=now)
        if batch.events:
            events = batch.events if secrets is None else await secrets.scrub_events(
                session, batch.events)
            commands += await record_job_events(session, node_id, events, now)
        if beat and batch.heartbeat is not None:
            commands += await node_heartbeat(session, node_id, batch.heartbeat, now,
                                             spared=batch.after_beat)
        for report in batch.reports:
            await record_report(session, node_id, report, now)
        if batch.tracks:
            await record_tracks(session, node_id, batch.tracks, now)
        return commands
