"""The agent hub: one channel per agent, dialled out from the node (``bourse.channel``).

Per connection a reader validates frames and hands them to the intake (``agents.intake``:
group-committed, acknowledged after the commit), stream frames to the tunnels (jobs' ports and
exec), and a writer sends what the dispatch queued for the node (``agents.dispatch``). A
malformed frame closes that connection with a logged reason; other connections never notice.
The registry of who is connected is ``agents.connections``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from bourse.channel import Channel, ChannelClosed
from bourse.core.liveness import DEFAULT_LOSS_WINDOW_S, loss_window
from bourse.protocol.agent import Ack, Error, Hello, Welcome
from bourse.protocol.stream import STREAM_MESSAGES
from bourse.server.agents.connections import (
    CLOSE_MALFORMED,
    CLOSE_POLICY,
    CLOSE_REPLACED,
    CLOSE_TRY_AGAIN,
    MAX_WAITING_PER_NODE,
    Connections,
)
from bourse.server.agents.dispatch import Dispatch
from bourse.server.agents.frames import Connection, Malformed, parse_frame
from bourse.server.agents.intake import Intake
from bourse.server.commands import Command
from bourse.server.db.database import Database
from bourse.server.ids import new_id
from bourse.server.notifier import Notifier
from bourse.server.services.agents import node_disconnected, node_hello
from bourse.server.streams.tunnels import Tunnels
from bourse.tunnel.loopback import host_mark, same_loopback

log = logging.getLogger(__name__)
HELLO_TIMEOUT_S = 15.0


class Hub:
    def __init__(self, db: Database, notifier: Notifier, connections: Connections,
                 dispatch: Dispatch, intake: Intake, *, on_change: Callable[[], None],
                 loss_window_s: float = DEFAULT_LOSS_WINDOW_S, start_lease_s: float = 30.0,
                 clock: Callable[[], float] = time.time) -> None:
        """``on_change``: a node connected and may take work (the scheduler's kick)."""
        self.db, self.notifier, self.connections = db, notifier, connections
        self.dispatch, self.intake, self.on_change = dispatch, intake, on_change
        self.loss_window_s, self.start_lease_s, self.clock = loss_window_s, start_lease_s, clock
        self.tunnels = Tunnels()  # streams to jobs' ports and exec sessions

    def connected(self, node_id: str) -> bool:
        return node_id in self.connections

    def send(self, commands: Sequence[Command]) -> None:
        self.dispatch.send(commands)

    async def close_node(self, node_id: str, reason: str) -> None:
        await self.connections.close(node_id, reason)

    async def close(self) -> None:
        await self.intake.close()
        await self.dispatch.close()

    async def serve(self, channel: Channel, node_id: str, peer: str | None = None) -> None:
        """Run one agent connection until it ends. The caller has authenticated the node;
        ``peer`` is the address it connected from."""
        if not self.connections.wait(node_id):
            log.warning("agent %s: refusing a connection, %d are waiting for their hello",
                        node_id, MAX_WAITING_PER_NODE)
            await channel.close(CLOSE_TRY_AGAIN, f"node {node_id} already has "
                                f"{MAX_WAITING_PER_NODE} connections waiting to say hello")
            return
        try:
            hello = await self._hello(channel)
        except (Malformed, TimeoutError, ChannelClosed) as exc:
            log.warning("agent %s: no valid hello (%s)", node_id, exc)
            await channel.close(CLOSE_POLICY, "the first message must be a valid hello")
            return
        finally:
            self.connections.waited(node_id)
        connection = await self._register(channel, node_id, hello, peer)
        try:
            await self._run(connection)
        except Exception:
            log.exception("agent %s: connection failed; the agent will reconnect and replay",
                          node_id)
        finally:
            await self._unregister(connection)
            await channel.close(CLOSE_POLICY, "connection ended")

    async def _hello(self, channel: Channel) -> Hello:
        text = await asyncio.wait_for(channel.receive(), HELLO_TIMEOUT_S)
        frame, body = parse_frame(text)
        if not isinstance(body, Hello):
            raise Malformed(f"expected hello, got {frame.type}")
        return body

    async def _register(self, channel: Channel, node_id: str, hello: Hello,
                        peer: str | None) -> Connection:
        connection = Connection(node_id, new_id("s"), channel,
                                features=frozenset(hello.features),
                                direct=same_loopback(hello.host, host_mark(), peer))
        previous = self.connections.add(connection)
        if previous is not None:
            await previous.channel.close(CLOSE_REPLACED, "replaced by a newer connection "
                                         "with this node's credential (is a second agent "
                                         "using it?)")
        now = self.clock()
        try:
            async with self.db.write() as session:
                commands = await node_hello(session, node_id, hello, connection.session, now,
                                            lease_s=self.start_lease_s)
        except BaseException:  # not registered after all: never listed as connected
            self.connections.remove(connection)
            raise
        connection.send(Welcome(node_id=node_id, keep_alive_s=hello.keep_alive_s,
                                server_time=now, accepts=["metrics", "interruption", "track"],
                                loss_window_s=loss_window(self.loss_window_s,
                                                          hello.keep_alive_s)))
        self.dispatch.send(commands)
        log.info("agent %s (%s) connected%s", node_id, hello.name,
                 " (on this machine's loopback)" if connection.direct else "")
        self.notifier.notify()
        self.on_change()
        return connection

    async def _unregister(self, connection: Connection) -> None:
        self.connections.remove(connection)
        self.tunnels.drop(connection)
        async with self.db.write() as session:
            await node_disconnected(session, connection.node_id, connection.session,
                                    self.clock())
        log.info("agent %s disconnected", connection.node_id)

    async def _run(self, connection: Connection) -> None:
        tasks = [asyncio.create_task(self._read(connection)),
                 asyncio.create_task(_write(connection))]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = None if task.cancelled() else task.exception()
                if exc is not None and not isinstance(exc, ChannelClosed):
                    raise exc
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _read(self, connection: Connection) -> None:
        while True:
            try:
                frame, body = parse_frame(await connection.channel.receive())
                self.connections.heard(connection.node_id, self.clock())
            except Malformed as exc:
                log.warning("agent %s: closing the connection: %s", connection.node_id, exc)
                await connection.channel.close(CLOSE_MALFORMED, str(exc)[:120])
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
            connection.busy = True
            try:
                await self.intake.put(connection, frame, body)
            finally:
                connection.busy = False


async def _write(connection: Connection) -> None:
    while True:
        frame = await connection.outbox.get()
        await connection.channel.send(frame)
