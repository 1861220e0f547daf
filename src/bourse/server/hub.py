"""The agent hub: one WebSocket per agent, dialled out from the node.

Per connection a reader validates frames and queues them, a processor handles what has queued
in one database transaction (so a burst of log chunks costs one commit) and acknowledges the
ids only after the commit, and a writer sends what services asked to send. A malformed frame
closes that connection with a logged reason; other connections never notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from sqlalchemy.exc import DataError, IntegrityError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.websockets import WebSocket, WebSocketDisconnect

from bourse.core.errors import BourseError
from bourse.core.liveness import DEFAULT_LOSS_WINDOW_S, loss_window
from bourse.core.ratelimit import LogLimit
from bourse.protocol.agent import (
    Ack,
    Envelope,
    Error,
    Hello,
    StartJob,
    Welcome,
)
from bourse.protocol.common import Wire
from bourse.protocol.stream import STREAM_MESSAGES
from bourse.server.commands import Command
from bourse.server.config import MetricsConfig
from bourse.server.dataplane import DataPlane, Failure
from bourse.server.db.database import Database
from bourse.server.hub_frames import (
    Batch,
    Connection,
    Malformed,
    add_frame,
    parse_frame,
    receive_text,
)
from bourse.server.ids import new_id
from bourse.server.logmeter import LogMeter
from bourse.server.notifier import Notifier
from bourse.server.services.agents import (
    node_disconnected,
    node_heartbeat,
    node_hello,
    record_job_events,
    record_log_chunks,
)
from bourse.server.services.lifecycle import add_event
from bourse.server.services.metrics import record_metrics
from bourse.server.services.secrets import SecretKeeper
from bourse.server.services.verification import record_report
from bourse.server.tunnels import Tunnels

log = logging.getLogger(__name__)
HELLO_TIMEOUT_S = 15.0
MAX_BATCH = 500  # messages per transaction
MAX_BATCH_BYTES = 8 * 1024 * 1024  # and log bytes: a burst of output never balloons memory
CLOSE_MALFORMED, CLOSE_POLICY, CLOSE_TRY_AGAIN, CLOSE_REPLACED = 1003, 1008, 1013, 4000
# A node holds one session (a newer one replaces it: an agent reconnecting after its old TCP
# connection went half-open must not wait for that one to time out), and this many
# connections waiting for their hello (each may wait HELLO_TIMEOUT_S).
MAX_WAITING_PER_NODE = 4
# The database refusing what a message says (a value out of range, a broken constraint): the
# message is dropped and reported. Anything else (a lost connection) is retried by replay.
REFUSED = (DataError, IntegrityError, ProgrammingError, OverflowError)


class Hub:
    def __init__(self, db: Database, notifier: Notifier, on_change: Callable[[], None], *,
                 loss_window_s: float = DEFAULT_LOSS_WINDOW_S,
                 clock: Callable[[], float] = time.time, start_lease_s: float = 30.0) -> None:
        self.db, self.notifier, self.on_change = db, notifier, on_change
        self.place_in: Callable[[AsyncSession, float], Awaitable[list[Command]]] = _no_place
        self.inbox: asyncio.Queue[tuple[Connection, Envelope, Wire]] = asyncio.Queue(
            maxsize=256)
        self._processor: asyncio.Task[None] | None = None
        self.loss_window_s, self.start_lease_s, self.clock = loss_window_s, start_lease_s, clock
        self.connections: dict[str, Connection] = {}
        self._waiting: Counter[str] = Counter()  # connections per node awaiting their hello
        self.dataplane: DataPlane | None = None
        self.secrets: SecretKeeper | None = None  # set at start, with the server key
        self._dispatch: asyncio.Queue[list[Command]] = asyncio.Queue()
        self._queued = 0  # batches in the dispatch queue or being dispatched
        self._dispatcher: asyncio.Task[None] | None = None
        self.tunnels = Tunnels()  # streams to jobs' ports and exec sessions
        self.metrics = MetricsConfig()
        self.log_meter = LogMeter(LogLimit())  # what agents that ignore the limit may send

    def connected(self, node_id: str) -> bool:
        return node_id in self.connections

    def send(self, commands: Sequence[Command]) -> None:
        """Queue commands for their nodes; those of absent nodes are re-derived on hello.

        With a data plane, starts first get their data plan, whose credentials are issued by
        a network call — made here, after the commit that placed the attempt, by one
        dispatcher task; whatever is sent while it works queues behind it, so commands reach
        a node in the order they were made."""
        if not commands:
            return
        if self._queued == 0 and not any(self._needs_completion(c) for c in commands):
            self._deliver(commands)
            return
        self._queued += 1
        self._dispatch.put_nowait(list(commands))
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.create_task(self._dispatch_all())

    def _needs_completion(self, command: Command) -> bool:
        return ((self.dataplane is not None and self.dataplane.needs_plan(command))
                or (self.secrets is not None and self.secrets.needs(command)))

    def _deliver(self, commands: Sequence[Command]) -> None:
        for command in commands:
            if self.secrets is not None:
                self.secrets.note_start(command.message)
            connection = self.connections.get(command.node_id)
            if connection is not None:
                connection.send(command.message)

    async def _dispatch_all(self) -> None:
        while True:
            batch = await self._dispatch.get()
            try:
                await self._dispatch_one(batch)
            except Exception:
                log.exception("dispatching %d command(s) failed", len(batch))
            finally:
                self._queued -= 1

    async def _dispatch_one(self, batch: list[Command]) -> None:
        ready, failures = batch, list[Failure]()
        if self.dataplane is not None:
            ready, failures = await self.dataplane.complete(batch)
        if self.secrets is not None and any(self.secrets.needs(c) for c in ready):
            ready, more = await self._with_secrets(ready)
            failures += more
        self._deliver(ready)
        if failures:
            await self._record(failures)

    async def _with_secrets(self, batch: list[Command]) -> tuple[list[Command], list[Failure]]:
        """Starts with the values of the secrets they name (read after the placing commit);
        one whose secret has gone is not sent."""
        assert self.secrets is not None
        ready: list[Command] = []
        failures: list[Failure] = []
        async with self.db.read() as session:
            for command in batch:
                if not self.secrets.needs(command):
                    ready.append(command)
                    continue
                try:
                    ready.append(await self.secrets.complete(session, command))
                except BourseError as exc:
                    message = command.message
                    assert isinstance(message, StartJob)
                    failures.append(Failure(command.node_id, message.job_id, message.attempt,
                                            exc.message, "the job's secrets could not be read"))
        return ready, failures

    async def _record(self, failures: list[Failure]) -> None:
        """Say on the job's timeline why its node was not told to start it."""
        now = self.clock()
        async with self.db.write() as session:
            for failure in failures:
                add_event(session, failure.job_id, failure.attempt, "info", now, message=(
                    f"{failure.what} ({failure.reason}); the job is "
                    "placed again when this placement's lease expires"))
        self.notifier.notify()

    async def close_node(self, node_id: str, reason: str) -> None:
        connection = self.connections.pop(node_id, None)
        if connection is not None:
            await _close(connection.ws, CLOSE_POLICY, reason)

    async def serve(self, ws: WebSocket, node_id: str) -> None:
        """Run one agent connection until it ends. The route has authenticated the node."""
        if self._waiting[node_id] >= MAX_WAITING_PER_NODE:
            log.warning("agent %s: refusing a connection, %d are waiting for their hello",
                        node_id, MAX_WAITING_PER_NODE)
            await _close(ws, CLOSE_TRY_AGAIN, f"node {node_id} already has "
                         f"{MAX_WAITING_PER_NODE} connections waiting to say hello")
            return
        self._waiting[node_id] += 1
        try:
            hello = await self._hello(ws, node_id)
        except (Malformed, TimeoutError, WebSocketDisconnect) as exc:
            log.warning("agent %s: no valid hello (%s)", node_id, exc)
            await _close(ws, CLOSE_POLICY, "the first message must be a valid hello")
            return
        finally:
            self._waiting[node_id] -= 1
            if not self._waiting[node_id]:
                del self._waiting[node_id]
        connection = await self._register(ws, node_id, hello)
        try:
            await self._run(connection)
        except Exception:
            log.exception("agent %s: connection failed; the agent will reconnect and replay",
                          node_id)
        finally:
            await self._unregister(connection)
            await _close(ws, CLOSE_POLICY, "connection ended")

    async def _hello(self, ws: WebSocket, node_id: str) -> Hello:
        text = await asyncio.wait_for(receive_text(ws), HELLO_TIMEOUT_S)
        frame, body = parse_frame(text)
        if not isinstance(body, Hello):
            raise Malformed(f"expected hello, got {frame.type}")
        return body

    async def _register(self, ws: WebSocket, node_id: str, hello: Hello) -> Connection:
        previous = self.connections.get(node_id)
        connection = Connection(node_id, new_id("s"), ws, features=frozenset(hello.features))
        self.connections[node_id] = connection
        if previous is not None:
            await _close(previous.ws, CLOSE_REPLACED, "replaced by a newer connection with this "
                         "node's credential (is a second agent using it?)")
        now = self.clock()
        try:
            async with self.db.write() as session:
                commands = await node_hello(session, node_id, hello, connection.session, now,
                                            lease_s=self.start_lease_s)
        except BaseException:  # not registered after all: never listed as connected
            if self.connections.get(node_id) is connection:
                del self.connections[node_id]
            raise
        connection.send(Welcome(node_id=node_id, keep_alive_s=hello.keep_alive_s,
                                server_time=now, accepts=["metrics"],
                                loss_window_s=loss_window(self.loss_window_s,
                                                          hello.keep_alive_s)))
        self.send(commands)
        log.info("agent %s (%s) connected", node_id, hello.name)
        self.notifier.notify()
        self.on_change()
        return connection

    async def _unregister(self, connection: Connection) -> None:
        if self.connections.get(connection.node_id) is connection:
            del self.connections[connection.node_id]
        self.tunnels.drop(connection)
        async with self.db.write() as session:
            await node_disconnected(session, connection.node_id, connection.session,
                                    self.clock())
        log.info("agent %s disconnected", connection.node_id)

    async def _run(self, connection: Connection) -> None:
        self._start_processor()
        tasks = [asyncio.create_task(self._read(connection)),
                 asyncio.create_task(_write(connection))]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = None if task.cancelled() else task.exception()
                if exc is not None and not isinstance(exc, WebSocketDisconnect):
                    raise exc
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _read(self, connection: Connection) -> None:
        while True:
            try:
                frame, body = parse_frame(await receive_text(connection.ws))
            except Malformed as exc:
                log.warning("agent %s: closing the connection: %s", connection.node_id, exc)
                await _close(connection.ws, CLOSE_MALFORMED, str(exc)[:120])
                return
            if body is None:
                connection.send(Error(message=f"unknown message type {frame.type!r}",
                                      ref=frame.id))
                continue
            if isinstance(body, STREAM_MESSAGES):  # not stored, not acknowledged
                self.tunnels.deliver(connection, body)
                continue
            if isinstance(body, Ack | Error):  # about our commands: nothing to store
                if isinstance(body, Error):
                    log.warning("agent %s: error about %s: %s", connection.node_id, body.ref,
                                body.message[:200])
                continue
            await self.inbox.put((connection, frame, body))

    def _start_processor(self) -> None:
        if self._processor is None or self._processor.done():
            self._processor = asyncio.create_task(self._process_all())

    async def close(self) -> None:
        for task in (self._processor, self._dispatcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _process_all(self) -> None:
        """Group commit: what every connection has queued is applied in one transaction, so a
        busy exchange pays one commit and one placement pass for many agents' messages."""
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
                await _close(connection.ws, CLOSE_POLICY, "coordinator error")

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
        """A message the database refuses is acknowledged and reported instead of wedging the
        agent, which would otherwise replay it forever."""
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
                commands += await _record(session, connection.node_id, batch, now,
                                          secrets=self.secrets, meter=self.log_meter)
                if batch.metrics:
                    timeline |= await record_metrics(session, connection.node_id,
                                                     batch.metrics, self.metrics, now)
            if any(batch.frees_capacity for batch in group.values()):
                # capacity was freed: fill it in the same transaction, without a round trip
                # through the scheduler loop (this is what keeps short jobs flowing)
                commands += await self.place_in(session, now)
        for connection, batch in group.items():
            if batch.ids:
                connection.send(Ack(ids=batch.ids))
        self.send(commands)
        if timeline or any(b.events or b.chunks or b.reports for b in group.values()):
            self.notifier.notify()
        if any(b.reports for b in group.values()):
            self.on_change()  # a newly verified node can take work


async def _record(session: AsyncSession, node_id: str, batch: Batch, now: float, *,
                  secrets: SecretKeeper | None, meter: LogMeter) -> list[Command]:
    """One connection's messages, in the caller's transaction; secrets redacted first."""
    commands: list[Command] = []
    if batch.chunks:
        patterns = None if secrets is None else await secrets.patterns(
            session, {c.job_id for c in batch.chunks})
        await record_log_chunks(session, node_id, batch.chunks, patterns=patterns,
                                meter=meter, now=now)
    if batch.events:
        events = batch.events if secrets is None else await secrets.scrub_events(
            session, batch.events)
        commands += await record_job_events(session, node_id, events, now)
    if batch.heartbeat is not None:
        commands += await node_heartbeat(session, node_id, batch.heartbeat, now,
                                         spared=batch.after_beat)
    for report in batch.reports:
        await record_report(session, node_id, report, now)
    return commands


async def _no_place(_session: AsyncSession, _now: float) -> list[Command]:
    return []


async def _write(connection: Connection) -> None:
    while True:
        frame = await connection.outbox.get()
        await connection.ws.send_text(frame)


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):  # already closed
        await ws.close(code=code, reason=reason)
