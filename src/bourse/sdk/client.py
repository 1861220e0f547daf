"""``Client`` (and, in ``async_client``, ``AsyncClient``): the exchange's REST API over httpx.

Both send the :class:`~bourse.sdk.core.Call` values built by :mod:`bourse.sdk.core`, so they
differ only in how they wait. ``transport`` is httpx's seam: ``httpx.MockTransport`` in unit
tests, ``httpx.ASGITransport(app)`` to talk to an in-process server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

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
from bourse.protocol.services import ServiceApply, ServiceDetail, ServiceView
from bourse.protocol.tracking import ChartView, ExperimentView, SeriesView
from bourse.protocol.tracking import RunList as TrackedRuns
from bourse.protocol.tracking import TrackedRunDetail as TrackedRun
from bourse.sdk import access, clouds, core, services, tracking
from bourse.sdk.bundle import Progress, iter_file
from bourse.sdk.config import resolve_credentials
from bourse.sdk.core import Call, StoredBundle
from bourse.sdk.errors import ServerError, Unreachable, WaitTimeout, transport_errors
from bourse.sdk.sse import FollowItem, LogFollower

T = TypeVar("T")
SSE_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0)
DAY = 24 * 3600.0
Source = Path | str | bytes


def dropped(url: str) -> Unreachable:
    return Unreachable(f"the log stream from {url} ended before the job did",
                       hint="is the exchange restarting? retry `bourse logs -f`")


def body_headers(source: Source) -> dict[str, str]:
    size = len(source) if isinstance(source, bytes) else Path(source).stat().st_size
    return {"Content-Type": "application/octet-stream", "Content-Length": str(size)}


def give_up(failures: int, delays: tuple[float, ...], error: Exception) -> float:
    delay = core.reconnect_delay(failures, delays)
    if delay is None:
        raise error
    return delay


class Base:
    reconnect_delays: tuple[float, ...] = RECONNECT_DELAYS

    def __init__(self, url: str | None, token: str | None, context: str | None = None) -> None:
        credentials = resolve_credentials(url, token, context=context)
        self.url = credentials.url
        self._token = credentials.token
        self._base_url = core.base_url(credentials.url)
        self._headers = core.headers(credentials.token)

    @property
    def token(self) -> str:
        """The token this client sends (handed to a process it starts on the user's behalf:
        ``bourse burst --local`` gives it to the run as its MLflow token)."""
        return self._token


class Client(Base):
    """A blocking client; use it as a context manager to close its connections.

    Without ``url`` and ``token`` it finds the exchange as the CLI does (``sdk.config``):
    ``BOURSE_URL``/``BOURSE_TOKEN``, else the context ``context`` names, else
    ``BOURSE_CONTEXT``'s, else the current one (``bourse context use``).
    """

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 timeout: float = 30.0, transport: httpx.BaseTransport | None = None,
                 context: str | None = None) -> None:
        super().__init__(url, token, context)
        self._timeout, self._transport = timeout, transport
        self._http = httpx.Client(base_url=self._base_url, headers=self._headers,
                                  timeout=timeout, transport=transport)

    def fork(self) -> Client:
        """A client of its own (its own connections) to the same exchange with the same
        token: for another thread."""
        return Client(self.url, self._token, timeout=self._timeout, transport=self._transport)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[T], **extra: Any) -> T:
        with transport_errors(self.url):
            response = self._http.request(call.method, call.path, params=call.params,
                                          json=call.json, **extra)
        return call.read(response)

    def submit(self, spec: JobSpec) -> JobView:
        return self._send(core.submit(spec))

    def submit_many(self, specs: Sequence[JobSpec]) -> list[JobView]:
        """Up to 1,000 jobs in one request, all accepted or none."""
        return self._send(core.submit_many(specs))

    def jobs(self, state: str | None = None, limit: int = 100,
             run: str | None = None, before: str | None = None) -> list[JobView]:
        """Jobs newest first; ``before``: only those older than that job."""
        return self._send(core.jobs(state, limit, run, before))

    def jobs_page(self, state: str | None = None, limit: int = 100,
                  run: str | None = None, before: str | None = None) -> JobList:
        """A page of jobs and the cursor of the next one (``next``: pass it as ``before``)."""
        return self._send(core.jobs_page(state, limit, run, before))

    def runs(self, limit: int = 50, app: str | None = None) -> list[RunView]:
        """App runs, newest first; with ``app``, those of apps whose name contains it."""
        return self._send(core.runs(limit, app))

    def run(self, run_id: str) -> RunDetail:
        """One app run and its jobs."""
        return self._send(core.run(run_id))

    def renew_lease(self, run_id: str) -> RunLease:
        """Say the run's driver is alive; a run whose driver stops saying so is cancelled."""
        return self._send(core.renew_lease(run_id))

    def end_lease(self, run_id: str) -> None:
        """The run's driver is done; nothing is cancelled."""
        self._send(core.end_lease(run_id))

    def cancel_run(self, run_id: str, reason: str = "cancelled by its owner") -> RunCancelled:
        """Cancel the run's jobs that have not ended, and any it would submit later."""
        return self._send(core.cancel_run(run_id, reason))

    def job(self, job_id: str) -> JobDetail:
        return self._send(core.job(job_id))

    def cancel(self, job_id: str) -> JobView:
        return self._send(core.cancel(job_id))

    def events(self, job_id: str, after: int = 0) -> list[EventView]:
        return self._send(core.events(job_id, after))

    def logs(self, job_id: str, after: int = 0, limit: int = 1000, *,
             rank: int | None = None) -> LogPage:
        """A page of the job's log; only gang member ``rank``'s chunks when given."""
        return self._send(core.logs(job_id, after, limit, rank))

    def job_metrics(self, job_id: str, since: float = 0.0, limit: int = 5000, *,
                    rank: int | None = None) -> MetricsView:
        """The job's resource samples from ``since`` (the newest ``limit``), and its stall;
        ``rank``: one gang member's."""
        return self._send(core.job_metrics(job_id, since, limit, rank))

    def node_metrics(self, node_id: str, since: float = 0.0, limit: int = 5000) -> MetricsView:
        return self._send(core.node_metrics(node_id, since, limit))

    def iter_logs(self, job_id: str, after: int = 0, *,
                  rank: int | None = None) -> Iterator[LogChunkView]:
        """Every chunk stored so far, page after page (does not wait for more); only gang
        member ``rank``'s when given."""
        while True:
            page = self.logs(job_id, after, rank=rank)
            yield from page.chunks
            if page.done or not page.chunks:
                return
            after = page.cursor

    def follow(self, job_id: str, after: int = 0, *,
               rank: int | None = None) -> Iterator[FollowItem]:
        """Log chunks (only gang member ``rank``'s when given) and job views as they happen,
        ending with the final JobView.

        A stream that drops before its ``end`` event is reopened from the last cursor.
        """
        follower, failures = LogFollower(after, rank), 0
        while True:
            seen = follower.received
            try:
                yield from self._follow_once(job_id, follower)
                if follower.done:
                    return
                error: Exception = dropped(self.url)
            except (Unreachable, ServerError) as exc:
                error = exc
            failures = 1 if follower.received > seen else failures + 1
            time.sleep(give_up(failures, self.reconnect_delays, error))
            follower.reconnected()

    def _follow_once(self, job_id: str, follower: LogFollower) -> Iterator[FollowItem]:
        call = core.follow(job_id, follower.cursor, follower.rank)
        with transport_errors(self.url), self._http.stream(
                call.method, call.path, params=call.params, headers=SSE_HEADERS) as response:
            if not response.is_success:
                response.read()
            call.read(response)
            for line in response.iter_lines():
                item = follower.feed(line)
                if item is not None:
                    yield item
                if follower.done:
                    return

    def wait(self, job_id: str, *, poll_s: float = 1.0,
             timeout_s: float | None = None) -> JobDetail:
        """Poll until the job ends; WaitTimeout after ``timeout_s``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not core.is_terminal(detail := self.job(job_id)):
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"job {job_id} is still {detail.state} after {timeout_s}s")
            time.sleep(poll_s)
        return detail

    def nodes(self) -> list[NodeView]:
        return self._send(core.nodes())

    def providers(self) -> list[ProviderReliabilityView]:
        """Each provider's nodes measured together (availability, interruptions, score)."""
        return self._send(core.providers())

    def node(self, node_id: str) -> NodeView:
        return self._send(core.node(node_id))

    def drain(self, node_id: str) -> DrainResult:
        """Give a node no new work (its provider or an admin); what runs there finishes.
        Said again, it counts what still runs (``running``)."""
        return self._send(core.drain(node_id))

    def reclaim(self, node_id: str, notice_s: float = 30.0,
                reason: str | None = None) -> ReclaimResult:
        """Give a node's jobs a preemption notice (admin): they are retried elsewhere."""
        return self._send(core.reclaim(node_id, notice_s, reason))

    def burst(self, job_id: str, compute: Compute | None = None, *, local: bool = False,
              notice_s: float = 60.0, reason: str | None = None) -> BurstResult:
        """Move a running job to ``compute`` (or, ``local``, off the exchange): it
        checkpoints and exits, and goes on from that checkpoint (docs/burst.md)."""
        return self._send(core.burst(job_id, compute, local=local, notice_s=notice_s,
                                     reason=reason))

    def cost(self, by: str = "day", since: float | None = None) -> CostSummary:
        return self._send(core.cost(by, since))

    def clouds(self) -> CloudList:
        """Which clouds the exchange launches on, which not and why (``bourse clouds``)."""
        return self._send(clouds.clouds())

    def launches(self, live: bool = False) -> list[LaunchView]:
        return self._send(clouds.launches(live))

    def limits(self, project: str) -> ProjectLimitsView:
        return self._send(clouds.limits(project))

    def set_limits(self, project: str, **fields: Any) -> ProjectLimitsView:
        """A project's clouds and spending caps (admins): ``clouds=["aws"]``,
        ``cap_hour=20.0``, ``cap_day=300.0``; None lifts one."""
        return self._send(clouds.set_limits(project, **fields))

    def experiments(self) -> list[ExperimentView]:
        """The project's tracking experiments (``bourse experiments``)."""
        return self._send(tracking.experiments())

    def search_runs(self, experiment_ids: Sequence[str] = (), filter_text: str | None = None,
                    order_by: Sequence[str] = (), limit: int = 100,
                    offset: int = 0) -> TrackedRuns:
        """Tracking runs by MLflow's search syntax (``metrics.loss < 0.2 and params.lr =
        "1e-3"``), ``order_by`` like ``metrics.loss ASC``; newest first otherwise."""
        return self._send(tracking.search_runs(experiment_ids, filter_text, order_by, limit,
                                                offset))

    def tracked_run(self, run_id: str) -> TrackedRun:
        """A tracking run (a job's id is its run's): params, tags, latest metrics, cost."""
        return self._send(tracking.tracked_run(run_id))

    def metric(self, run_id: str, key: str, points: int = 1000) -> SeriesView:
        """A run's curve of ``key``, downsampled on the server to at most ``points``."""
        return self._send(tracking.metric(run_id, key, points))

    def chart(self, run_ids: Sequence[str], keys: Sequence[str],
              points: int = 1000) -> ChartView:
        """The curves of several runs (up to 100) and keys (up to 20) in one call."""
        return self._send(tracking.chart(run_ids, keys, points))

    def create_enrollment(self, name: str | None = None,
                          expires_in_s: float = DAY, project: str | None = None,
                          price_per_hour: float | None = None) -> EnrollmentToken:
        """A one-time token enrolling a node into ``project`` (admins; a provider's own by
        default)."""
        return self._send(core.create_enrollment(name, expires_in_s, project,
                                                 price_per_hour))

    def bundle_exists(self, sha256: str) -> bool:
        return self._send(core.bundle_exists(sha256))

    def upload_bundle(self, source: Source, sha256: str, *,
                      progress: Progress | None = None) -> StoredBundle:
        """PUT a bundle: bytes as they are, a file streamed in chunks."""
        headers = body_headers(source)
        content = source if isinstance(source, bytes) else iter_file(Path(source),
                                                            progress=progress)
        return self._send(core.upload_bundle(sha256), content=content, headers=headers)

    def ensure_bundle(self, source: Source, sha256: str, *,
                      progress: Progress | None = None) -> bool:
        """Upload unless the exchange has it already; True when it was uploaded."""
        if self.bundle_exists(sha256):
            return False
        self.upload_bundle(source, sha256, progress=progress)
        return True

    def data_summary(self, uri: str) -> DataSummary:
        """What the exchange's store holds at ``uri``: objects, bytes, digest."""
        return self._send(core.data_summary(uri))

    def data_home(self) -> DataHome:
        """The exchange's bucket and this project's home in it (``projects/<project>/``)."""
        return self._send(core.data_home())

    def data_credentials(self, read: Sequence[str] = (), write: Sequence[str] = (),
                         ttl_s: float = 3600.0) -> DataGrant:
        """Store credentials of this project's that read ``read`` and write below
        ``write``, for ``ttl_s`` seconds (``bourse.sdk.data.granted`` revokes them after)."""
        return self._send(core.data_credentials(read, write, ttl_s))

    def revoke_data_credentials(self, grant_id: str) -> None:
        self._send(core.revoke_data_credentials(grant_id))

    def offers(self, compute: Compute | None = None, limit: int = 20,
               explain: bool = False, launchable: bool = False) -> OfferList:
        """The exchange's live offers; ``launchable``: what its clouds could launch now
        for this token's project instead."""
        return self._send(core.offers(compute, limit, explain, launchable))

    # tenancy (admins manage projects and tokens; members their project's secrets)
    def projects(self) -> list[ProjectView]:
        return self._send(access.projects())

    def create_project(self, name: str, required_tags: Sequence[str] = ()) -> ProjectView:
        return self._send(access.create_project(name, list(required_tags)))

    def tokens(self) -> list[TokenView]:
        return self._send(access.tokens())

    def create_token(self, project: str = "default", role: Role = "member", *,
                     name: str | None = None, expires_in_s: float | None = None) -> TokenCreated:
        return self._send(access.create_token(TokenCreate(
            project=project, role=role, name=name, expires_in_s=expires_in_s)))

    def revoke_token(self, token_id: str) -> TokenView:
        return self._send(access.revoke_token(token_id))

    def secrets(self) -> list[SecretView]:
        return self._send(access.secrets())

    def set_secret(self, name: str, value: str) -> SecretView:
        return self._send(access.set_secret(name, value))

    def delete_secret(self, name: str) -> SecretView:
        return self._send(access.delete_secret(name))

    def audit(self, since: float | None = None, after: int = 0,
              limit: int = 1000) -> AuditList:
        return self._send(access.audit(since, after, limit))

    def verify_audit(self) -> AuditVerdict:
        return self._send(access.verify_audit())

    def set_node_tags(self, node_id: str, tags: Sequence[str]) -> NodeView:
        """A node's compliance tags (admin)."""
        return self._send(access.set_node_tags(node_id, list(tags)))

    # services (docs/serving.md)
    def apply_service(self, body: ServiceApply) -> ServiceView:
        """Create a service, or start a rollout of a changed version."""
        return self._send(services.apply_service(body))

    def services(self) -> list[ServiceView]:
        return self._send(services.services())

    def service(self, name: str) -> ServiceDetail:
        return self._send(services.service(name))

    def rollback_service(self, name: str) -> ServiceView:
        return self._send(services.rollback_service(name))

    def stop_service(self, name: str) -> ServiceView:
        return self._send(services.stop_service(name))

    def health(self) -> bool:
        return self._send(core.health(self.url))
