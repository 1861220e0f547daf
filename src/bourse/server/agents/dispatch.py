"""Commands to agents, after the commit that made them (``server.commands``).

Most go straight to their node's connection. A start first gets what must not be in the
placing transaction — its data plan, whose store credentials are issued by a network call
(``dataplane``), and the values of the secrets it names — from one dispatcher task, and
whatever is sent while it works queues behind it, so commands reach a node in the order they
were made. A command for a node that is not connected is dropped: its node is told again
when it says hello (``services.agents``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from bourse.core.errors import BourseError
from bourse.protocol.agent import StartJob
from bourse.server.agents.connections import Connections
from bourse.server.commands import Command, noted_commands
from bourse.server.dataplane import DataPlane, Failure
from bourse.server.db.database import Database
from bourse.server.notifier import Notifier
from bourse.server.services.burst_tokens import with_burst
from bourse.server.services.lifecycle import add_event
from bourse.server.services.secrets import SecretKeeper
from bourse.server.services.tracking_tokens import with_tracking

log = logging.getLogger(__name__)


class Dispatch:
    def __init__(self, db: Database, notifier: Notifier, connections: Connections,
                 secrets: SecretKeeper, clock: Callable[[], float] = time.time) -> None:
        self.db, self.notifier, self.connections = db, notifier, connections
        self.secrets, self.clock = secrets, clock
        self.dataplane: DataPlane | None = None  # opened at start (``use_dataplane``)
        # the server key and the URL jobs reach MLflow at (``use_tracking``), from start
        self.tracking: tuple[bytes, str] | None = None
        self._queue: asyncio.Queue[list[Command]] = asyncio.Queue()
        self._queued = 0  # batches in the queue or being dispatched
        self._task: asyncio.Task[None] | None = None

    def use_dataplane(self, dataplane: DataPlane | None) -> None:
        self.dataplane = dataplane

    def use_tracking(self, key: bytes, url: str) -> None:
        """Give every start MLflow's variables (``services.tracking_tokens``)."""
        self.tracking = (key, url)

    def send(self, commands: Sequence[Command]) -> None:
        """Queue commands for their nodes, in order (see the module's docstring)."""
        if not commands:
            return
        if self._queued == 0 and not any(self._needs_completion(c) for c in commands):
            self._deliver(commands)
            return
        self._queued += 1
        self._queue.put_nowait(list(commands))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._dispatch_all())

    def after_commit(self, info: dict[str, Any]) -> None:
        """Send what a committed transaction noted (``commands.note_commands``)."""
        self.send(noted_commands(info))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _needs_completion(self, command: Command) -> bool:
        return ((self.dataplane is not None and self.dataplane.needs_plan(command))
                or (self.secrets.ready and self.secrets.needs(command)))

    def _deliver(self, commands: Sequence[Command]) -> None:
        for command in commands:
            if self.secrets.ready:
                self.secrets.note_start(command.message)
            connection = self.connections.get(command.node_id)
            if connection is not None:
                connection.send(self._tracked(command.message))

    def _tracked(self, message: Any) -> Any:
        if self.tracking is None or not isinstance(message, StartJob):
            return message
        return with_burst(with_tracking(message, *self.tracking), *self.tracking)

    async def _dispatch_all(self) -> None:
        while True:
            batch = await self._queue.get()
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
        if self.secrets.ready and any(self.secrets.needs(c) for c in ready):
            ready, more = await self._with_secrets(ready)
            failures += more
        self._deliver(ready)
        if failures:
            await self._record(failures)

    async def _with_secrets(self, batch: list[Command]) -> tuple[list[Command], list[Failure]]:
        """Starts with the values of the secrets they name (read after the placing commit);
        one whose secret has gone is not sent."""
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
