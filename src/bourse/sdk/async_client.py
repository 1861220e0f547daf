"""``AsyncClient``: the SDK's client for asyncio (or trio), over the same I/O-free calls as
``Client`` (``bourse.sdk.core``, ``access``, ``clouds``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import httpx

from bourse.core.compute import Compute
from bourse.protocol.access import (
    AuditList,
    AuditVerdict,
    ProjectView,
    Role,
    SecretView,
    TokenCreate,
    TokenCreated,
    TokenView,
)
from bourse.protocol.api import (
    BurstResult,
    CostSummary,
    DataGrant,
    DataHome,
    DataSummary,
    DrainResult,
    EnrollmentToken,
    EventView,
    JobDetail,
    JobList,
    JobView,
    LogChunkView,
    LogPage,
    NodeView,
    OfferList,
    ProviderReliabilityView,
    ReclaimResult,
    RunCancelled,
    RunDetail,
    RunLease,
    RunView,
)
from bourse.protocol.clouds import CloudList, LaunchView, ProjectLimitsView
from bourse.protocol.common import JobSpec
from bourse.protocol.metrics import MetricsView
from bourse.protocol.tracking import ChartView, ExperimentView, SeriesView
from bourse.protocol.tracking import RunList as TrackedRuns
from bourse.protocol.tracking import TrackedRunDetail as TrackedRun
from bourse.sdk import access, clouds, core, tracking
from bourse.sdk.bundle import Progress, aiter_file
from bourse.sdk.client import DAY, SSE_HEADERS, Base, Source, body_headers, dropped, give_up
from bourse.sdk.core import Call, StoredBundle
from bourse.sdk.errors import ServerError, Unreachable, WaitTimeout, transport_errors
from bourse.sdk.sse import FollowItem, LogFollower

T = TypeVar("T")


class AsyncClient(Base):
    """The same API for asyncio (or trio): every method is a coroutine or async iterator."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 context: str | None = None) -> None:
        super().__init__(url, token, context)
        self._http = httpx.AsyncClient(base_url=self._base_url, headers=self._headers,
                                       timeout=timeout, transport=transport)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T], **extra: Any) -> T:
        with transport_errors(self.url):
            response = await self._http.request(call.method, call.path, params=call.params,
                                                json=call.json, **extra)
        return call.read(response)

    async def submit(self, spec: JobSpec) -> JobView:
        return await self._send(core.submit(spec))

    async def submit_many(self, specs: Sequence[JobSpec]) -> list[JobView]:
        """Up to 1,000 jobs in one request, all accepted or none."""
        return await self._send(core.submit_many(specs))

    async def jobs(self, state: str | None = None, limit: int = 100,
                   run: str | None = None, before: str | None = None) -> list[JobView]:
        """Jobs newest first; ``before``: only those older than that job."""
        return await self._send(core.jobs(state, limit, run, before))

    async def jobs_page(self, state: str | None = None, limit: int = 100,
                        run: str | None = None, before: str | None = None) -> JobList:
        """A page of jobs and the cursor of the next one (``next``: pass it as ``before``)."""
        return await self._send(core.jobs_page(state, limit, run, before))

    async def runs(self, limit: int = 50, app: str | None = None) -> list[RunView]:
        return await self._send(core.runs(limit, app))

    async def run(self, run_id: str) -> RunDetail:
        return await self._send(core.run(run_id))

    async def renew_lease(self, run_id: str) -> RunLease:
        return await self._send(core.renew_lease(run_id))

    async def end_lease(self, run_id: str) -> None:
        await self._send(core.end_lease(run_id))

    async def cancel_run(self, run_id: str,
                         reason: str = "cancelled by its owner") -> RunCancelled:
        return await self._send(core.cancel_run(run_id, reason))

    async def job(self, job_id: str) -> JobDetail:
        return await self._send(core.job(job_id))

    async def cancel(self, job_id: str) -> JobView:
        return await self._send(core.cancel(job_id))

    async def events(self, job_id: str, after: int = 0) -> list[EventView]:
        return await self._send(core.events(job_id, after))

    async def logs(self, job_id: str, after: int = 0, limit: int = 1000, *,
                   rank: int | None = None) -> LogPage:
        """A page of the job's log; only gang member ``rank``'s chunks when given."""
        return await self._send(core.logs(job_id, after, limit, rank))

    async def job_metrics(self, job_id: str, since: float = 0.0,
                          limit: int = 5000, *, rank: int | None = None) -> MetricsView:
        return await self._send(core.job_metrics(job_id, since, limit, rank))

    async def node_metrics(self, node_id: str, since: float = 0.0,
                           limit: int = 5000) -> MetricsView:
        return await self._send(core.node_metrics(node_id, since, limit))

    async def iter_logs(self, job_id: str, after: int = 0, *,
                        rank: int | None = None) -> AsyncIterator[LogChunkView]:
        while True:
            page = await self.logs(job_id, after, rank=rank)
            for chunk in page.chunks:
                yield chunk
            if page.done or not page.chunks:
                return
            after = page.cursor

    async def follow(self, job_id: str, after: int = 0, *,
                     rank: int | None = None) -> AsyncIterator[FollowItem]:
        follower, failures = LogFollower(after, rank), 0
        while True:
            seen = follower.received
            try:
                async for item in self._follow_once(job_id, follower):
                    yield item
                if follower.done:
                    return
                error: Exception = dropped(self.url)
            except (Unreachable, ServerError) as exc:
                error = exc
            failures = 1 if follower.received > seen else failures + 1
            await anyio.sleep(give_up(failures, self.reconnect_delays, error))
            follower.reconnected()

    async def _follow_once(self, job_id: str,
                           follower: LogFollower) -> AsyncIterator[FollowItem]:
        call = core.follow(job_id, follower.cursor, follower.rank)
        with transport_errors(self.url):
            async with self._http.stream(call.method, call.path, params=call.params,
                                         headers=SSE_HEADERS) as response:
                if not response.is_success:
                    await response.aread()
                call.read(response)
                async for line in response.aiter_lines():
                    item = follower.feed(line)
                    if item is not None:
                        yield item
                    if follower.done:
                        return

    async def wait(self, job_id: str, *, poll_s: float = 1.0,
                   timeout_s: float | None = None) -> JobDetail:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not core.is_terminal(detail := await self.job(job_id)):
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"job {job_id} is still {detail.state} after {timeout_s}s")
            await anyio.sleep(poll_s)
        return detail

    async def nodes(self) -> list[NodeView]:
        return await self._send(core.nodes())

    async def providers(self) -> list[ProviderReliabilityView]:
        """Each provider's nodes measured together (availability, interruptions, score)."""
        return await self._send(core.providers())

    async def node(self, node_id: str) -> NodeView:
        return await self._send(core.node(node_id))

    async def drain(self, node_id: str) -> DrainResult:
        """Give a node no new work (its provider or an admin); what runs there finishes.
        Said again, it counts what still runs (``running``)."""
        return await self._send(core.drain(node_id))

    async def reclaim(self, node_id: str, notice_s: float = 30.0,
                      reason: str | None = None) -> ReclaimResult:
        return await self._send(core.reclaim(node_id, notice_s, reason))

    async def burst(self, job_id: str, compute: Compute | None = None, *, local: bool = False,
                    notice_s: float = 60.0, reason: str | None = None) -> BurstResult:
        return await self._send(core.burst(job_id, compute, local=local, notice_s=notice_s,
                                           reason=reason))

    async def cost(self, by: str = "day", since: float | None = None) -> CostSummary:
        return await self._send(core.cost(by, since))

    async def clouds(self) -> CloudList:
        return await self._send(clouds.clouds())

    async def launches(self, live: bool = False) -> list[LaunchView]:
        return await self._send(clouds.launches(live))

    async def limits(self, project: str) -> ProjectLimitsView:
        return await self._send(clouds.limits(project))

    async def set_limits(self, project: str, **fields: Any) -> ProjectLimitsView:
        return await self._send(clouds.set_limits(project, **fields))

    async def experiments(self) -> list[ExperimentView]:
        """The project's tracking experiments (``bourse experiments``)."""
        return await self._send(tracking.experiments())

    async def search_runs(self, experiment_ids: Sequence[str] = (), filter_text: str | None = None,
                    order_by: Sequence[str] = (), limit: int = 100,
                    offset: int = 0) -> TrackedRuns:
        """Tracking runs by MLflow's search syntax (``metrics.loss < 0.2 and params.lr =
        "1e-3"``), ``order_by`` like ``metrics.loss ASC``; newest first otherwise."""
        return await self._send(tracking.search_runs(experiment_ids, filter_text, order_by, limit,
                                                offset))

    async def tracked_run(self, run_id: str) -> TrackedRun:
        """A tracking run (a job's id is its run's): params, tags, latest metrics, cost."""
        return await self._send(tracking.tracked_run(run_id))

    async def metric(self, run_id: str, key: str, points: int = 1000) -> SeriesView:
        """A run's curve of ``key``, downsampled on the server to at most ``points``."""
        return await self._send(tracking.metric(run_id, key, points))

    async def chart(self, run_ids: Sequence[str], keys: Sequence[str],
              points: int = 1000) -> ChartView:
        """The curves of several runs (up to 100) and keys (up to 20) in one call."""
        return await self._send(tracking.chart(run_ids, keys, points))

    async def create_enrollment(self, name: str | None = None,
                                expires_in_s: float = DAY, project: str | None = None,
                                price_per_hour: float | None = None) -> EnrollmentToken:
        """A one-time token enrolling a node into ``project`` (admins; a provider's own by
        default)."""
        return await self._send(core.create_enrollment(name, expires_in_s, project,
                                                        price_per_hour))

    async def bundle_exists(self, sha256: str) -> bool:
        return await self._send(core.bundle_exists(sha256))

    async def upload_bundle(self, source: Source, sha256: str, *,
                            progress: Progress | None = None) -> StoredBundle:
        headers = body_headers(source)
        content = source if isinstance(source, bytes) else aiter_file(Path(source),
                                                            progress=progress)
        return await self._send(core.upload_bundle(sha256), content=content, headers=headers)

    async def ensure_bundle(self, source: Source, sha256: str, *,
                            progress: Progress | None = None) -> bool:
        if await self.bundle_exists(sha256):
            return False
        await self.upload_bundle(source, sha256, progress=progress)
        return True

    async def data_summary(self, uri: str) -> DataSummary:
        """What the exchange's store holds at ``uri``: objects, bytes, digest."""
        return await self._send(core.data_summary(uri))

    async def data_home(self) -> DataHome:
        """The exchange's bucket and this project's home in it (``projects/<project>/``)."""
        return await self._send(core.data_home())

    async def data_credentials(self, read: Sequence[str] = (), write: Sequence[str] = (),
                         ttl_s: float = 3600.0) -> DataGrant:
        """Store credentials of this project's that read ``read`` and write below
        ``write``, for ``ttl_s`` seconds (``bourse.sdk.data.granted`` revokes them after)."""
        return await self._send(core.data_credentials(read, write, ttl_s))

    async def revoke_data_credentials(self, grant_id: str) -> None:
        await self._send(core.revoke_data_credentials(grant_id))

    async def offers(self, compute: Compute | None = None, limit: int = 20,
                     explain: bool = False, launchable: bool = False) -> OfferList:
        return await self._send(core.offers(compute, limit, explain, launchable))

    # tenancy (admins manage projects and tokens; members their project's secrets)
    async def projects(self) -> list[ProjectView]:
        return await self._send(access.projects())

    async def create_project(self, name: str, required_tags: Sequence[str] = ()) -> ProjectView:
        return await self._send(access.create_project(name, list(required_tags)))

    async def tokens(self) -> list[TokenView]:
        return await self._send(access.tokens())

    async def create_token(self, project: str = "default", role: Role = "member", *,
                     name: str | None = None, expires_in_s: float | None = None) -> TokenCreated:
        return await self._send(access.create_token(TokenCreate(
            project=project, role=role, name=name, expires_in_s=expires_in_s)))

    async def revoke_token(self, token_id: str) -> TokenView:
        return await self._send(access.revoke_token(token_id))

    async def secrets(self) -> list[SecretView]:
        return await self._send(access.secrets())

    async def set_secret(self, name: str, value: str) -> SecretView:
        return await self._send(access.set_secret(name, value))

    async def delete_secret(self, name: str) -> SecretView:
        return await self._send(access.delete_secret(name))

    async def audit(self, since: float | None = None, after: int = 0,
              limit: int = 1000) -> AuditList:
        return await self._send(access.audit(since, after, limit))

    async def verify_audit(self) -> AuditVerdict:
        return await self._send(access.verify_audit())

    async def set_node_tags(self, node_id: str, tags: Sequence[str]) -> NodeView:
        """A node's compliance tags (admin)."""
        return await self._send(access.set_node_tags(node_id, list(tags)))

    async def health(self) -> bool:
        return await self._send(core.health(self.url))
