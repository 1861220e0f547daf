"""The coordinator's data plane: job-scoped store credentials per attempt.

Credentials are issued when a StartJob is dispatched — after the transaction that placed the
attempt has committed (`complete`) — and kept per (job, attempt) in memory, so a re-sent start
reuses them. They are revoked in the background once the transaction that ended the attempt
has committed (`on_commit`), renewed when half their lifetime has passed, and swept at expiry
(`tick`, the one-shot step of `run`). After a coordinator restart, `recover` finds the
credentials of attempts still active, without their secret: enough to renew and revoke them;
a start sent again gets new ones.

The root settings (``settings``, with the store's root key) never leave the coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bourse.core.uri import StoreURI
from bourse.protocol.agent import StartJob
from bourse.protocol.common import JobSpec
from bourse.server.commands import Command
from bourse.server.dataplane.buckets import Buckets
from bourse.server.dataplane.grants import UserGrants
from bourse.server.dataplane.plan import attempt_scope, data_plan, renewal_due, uses_data
from bourse.server.services.lifecycle import ENDED_INFO
from bourse.storage.credentials import DEFAULT_TTL, CredentialIssuer, ScopedCredentials
from bourse.storage.errors import CredentialError, StorageError
from bourse.storage.remote import Stores, open_store
from bourse.storage.settings import StoreSettings
from bourse.storage.store import ObjectStore, Opener

log = logging.getLogger(__name__)
Key = tuple[str, int]
ENDED_KEPT = 10_000  # recently ended attempts remembered, so a late start issues nothing


@dataclass(frozen=True)
class Failure:
    """A start that could not be given its data plan; it is not sent."""

    node_id: str
    job_id: str
    attempt: int
    reason: str
    what: str = "store credentials could not be issued"


class DataPlane:
    def __init__(self, settings: StoreSettings, bucket: str, issuer: CredentialIssuer, *,
                 ttl: timedelta = DEFAULT_TTL, store: ObjectStore | None = None,
                 opener: Opener | None = None) -> None:
        self.settings, self.issuer, self.ttl = settings, issuer, ttl
        self.root = StoreURI("s3", bucket, "")
        self.store = store or open_store(self.root, settings)  # the exchange's own bucket
        # the other buckets on its endpoint, opened when read
        self.stores: Opener = opener or Stores(settings)
        self.buckets = Buckets(self.root, self.store_for)
        self.users = UserGrants(issuer)  # users' credentials (``bourse cp``)
        self.grants: dict[Key, ScopedCredentials] = {}
        self._issuing: dict[Key, asyncio.Task[ScopedCredentials]] = {}
        self._ended: OrderedDict[Key, None] = OrderedDict()
        self._background: set[asyncio.Task[Any]] = set()

    def store_for(self, uri: StoreURI) -> ObjectStore:
        """The store holding ``uri``'s bucket, read with the root settings."""
        return self.store if uri.root == self.root else self.stores(uri)

    # -- dispatch ---------------------------------------------------------------------------

    async def complete(self, commands: Sequence[Command]) -> tuple[list[Command], list[Failure]]:
        """Fill the data plan of every StartJob (issuing credentials as needed); the starts
        that could not get one are returned as failures instead."""
        done = await asyncio.gather(*(self._complete(c) for c in commands))
        return ([c for c in done if isinstance(c, Command)],
                [f for f in done if isinstance(f, Failure)])

    @staticmethod
    def needs_plan(command: Command) -> bool:
        """A start of a job that names data, without its data plan yet."""
        msg = command.message
        return isinstance(msg, StartJob) and msg.data is None and uses_data(msg.spec)

    async def _complete(self, command: Command) -> Command | Failure:
        msg = command.message
        if not self.needs_plan(command):
            return command
        assert isinstance(msg, StartJob)
        try:
            credentials = await self.credentials(msg.job_id, msg.attempt, msg.spec)
        except StorageError as exc:
            log.warning("job %s attempt %d: no store credentials (%s); not starting it, it is "
                        "placed again when its placement lease expires", msg.job_id,
                        msg.attempt, exc.message)
            return Failure(command.node_id, msg.job_id, msg.attempt, exc.message)
        plan = data_plan(msg.spec, msg.job_id, self.root, self.settings, credentials)
        if msg.gang is not None and msg.gang.rank:  # a gang's outputs are rank 0's
            plan = plan.model_copy(update={"outputs": {}, "lightning_logs": None})
        return Command(command.node_id, msg.model_copy(update={"data": plan}))

    async def credentials(self, job_id: str, attempt: int, spec: JobSpec) -> ScopedCredentials:
        """The attempt's credentials: those issued already (with their secret), else new."""
        key = (job_id, attempt)
        if key in self._ended:
            raise CredentialError(f"attempt {attempt} of job {job_id} has ended")
        held = self.grants.get(key)
        if held is not None and held.access_key.secret_access_key:
            return held
        task = self._issuing.get(key)
        if task is None:
            task = asyncio.ensure_future(self._issue(key, spec))
            self._issuing[key] = task
            task.add_done_callback(lambda _t: self._issuing.pop(key, None))
        return await asyncio.shield(task)

    async def _issue(self, key: Key, spec: JobSpec) -> ScopedCredentials:
        scope = attempt_scope(spec, key[0], self.root)
        credentials = await self.issuer.issue(key[0], key[1], scope.read, scope.write,
                                              ttl=self.ttl)
        self.grants[key] = credentials
        return credentials

    # -- ends -------------------------------------------------------------------------------

    def on_commit(self, info: dict[str, Any]) -> None:
        """After a commit: revoke, in the background, the credentials of attempts it ended."""
        for key in info.get(ENDED_INFO, ()):
            self._ended[key] = None
            self.spawn(self.revoke(*key))
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)

    async def revoke(self, job_id: str, attempt: int) -> None:
        """Revoke what the attempt was given (nothing to do for one that got nothing)."""
        key = (job_id, attempt)
        issuing = self._issuing.get(key)
        if issuing is not None:  # let it finish, or its key would outlive the revocation
            await asyncio.wait([issuing])
        if self.grants.pop(key, None) is None:
            return
        try:
            await self.issuer.revoke(job_id, attempt)
        except StorageError as exc:
            log.warning("could not revoke the credentials of job %s attempt %d (%s); the "
                        "sweeper deletes them when they expire", job_id, attempt, exc.message)

    # -- renewal and expiry -----------------------------------------------------------------

    async def recover(self, attempts: Iterable[tuple[str, int, JobSpec]]) -> int:
        """After a restart: take over the credentials of attempts still active."""
        found = 0
        for job_id, attempt, spec in attempts:
            scope = attempt_scope(spec, job_id, self.root)
            try:
                adopted = await self.issuer.adopt(job_id, attempt, scope)
            except StorageError as exc:
                log.warning("job %s attempt %d: cannot find its credentials (%s)", job_id,
                            attempt, exc.message)
                continue
            if adopted is not None:
                self.grants.setdefault((job_id, attempt), adopted)
                found += 1
        return found

    async def renew_due(self, now: datetime | None = None) -> int:
        """Renew every held credential past half its lifetime; returns how many."""
        now = now or datetime.now(UTC)
        due = [(k, c) for k, c in self.grants.items() if renewal_due(c, now, self.ttl)]
        renewed = 0
        for key, credentials in due:
            try:
                fresh = await self.issuer.renew(credentials, self.ttl, now=now)
            except StorageError as exc:
                log.warning("could not renew the credentials of job %s attempt %d: %s",
                            key[0], key[1], exc.message)
                continue
            if key in self.grants:  # not revoked meanwhile
                self.grants[key] = fresh
                renewed += 1
        return renewed

    async def tick(self, now: datetime | None = None) -> None:
        """One step of the loop: renew, then delete what expired."""
        await self.renew_due(now)
        try:
            await self.issuer.sweep(now)
        except StorageError as exc:
            log.warning("credential sweep failed: %s", exc.message)

    async def run(self, interval_s: float | None = None) -> None:
        interval = interval_s or min(60.0, self.ttl.total_seconds() / 4)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.tick()
            except Exception:
                log.exception("data plane tick failed; retrying on the next one")

    # -- background work --------------------------------------------------------------------

    def spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self, timeout: float = 10.0) -> None:
        """Let background work (revocations) finish, up to ``timeout`` seconds."""
        pending = set(self._background)
        if pending:
            _, late = await asyncio.wait(pending, timeout=timeout)
            for task in late:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*late, return_exceptions=True)
