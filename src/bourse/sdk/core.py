"""What the sync and async clients share: building requests and reading answers (I/O-free).

Each API operation is a function returning a :class:`Call`: the request to send and how to read
its answer. :class:`~bourse.sdk.client.Client` and
:class:`~bourse.sdk.async_client.AsyncClient` only send calls, so both speak the API
identically and errors are mapped in one place (:func:`bourse.sdk.errors.error_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from bourse import __version__
from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.protocol.api import (
    BurstRequest,
    BurstResult,
    CostSummary,
    DataGrant,
    DataGrantRequest,
    DataHome,
    DataSummary,
    DrainResult,
    EnrollmentCreate,
    EnrollmentToken,
    EventList,
    EventView,
    JobBatch,
    JobDetail,
    JobList,
    JobView,
    LogPage,
    NodeList,
    NodeView,
    OfferList,
    OfferQuery,
    ProviderReliabilityList,
    ProviderReliabilityView,
    ReclaimRequest,
    ReclaimResult,
    RunCancel,
    RunCancelled,
    RunDetail,
    RunLease,
    RunList,
    RunView,
)
from bourse.protocol.common import JobSpec, Wire
from bourse.protocol.metrics import MetricsView
from bourse.sdk.errors import ProtocolError, error_for

API_PREFIX = "/api/v1"
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class StoredBundle(Wire):
    """The answer to ``PUT /bundles/{sha256}``."""

    sha256: str
    size: int


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the function that reads its (successful or not) response."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, str | int | list[str]] = field(default_factory=dict)
    json: Any = None


def root_url(url: str) -> str:
    """The exchange's root for a URL given with or without ``/api/v1``."""
    root = url.strip().rstrip("/")
    if not root.startswith(("http://", "https://")):
        raise InvalidInput(f"exchange URL {url!r} must start with http:// or https://",
                           field="url")
    return root.removesuffix(API_PREFIX)


def base_url(url: str) -> str:
    """The API root: every call's path is relative to it."""
    return root_url(url) + API_PREFIX


def headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "User-Agent": f"bourse/{__version__}"}


def check(response: httpx.Response) -> httpx.Response:
    """The response itself when it succeeded; the mapped error otherwise."""
    if response.is_success:
        return response
    raise error_for(response.status_code, response.content, str(response.request.url))


def model(kind: type[M]) -> Callable[[httpx.Response], M]:
    def read(response: httpx.Response) -> M:
        try:
            return kind.model_validate_json(check(response).content)
        except ValidationError as exc:
            raise ProtocolError(
                f"unreadable {kind.__name__} from {response.request.url}: "
                f"{exc.errors()[0]['msg']}", hint="is the exchange the same bourse version?",
            ) from exc

    return read


def _nothing(response: httpx.Response) -> None:
    check(response)


def _exists(response: httpx.Response) -> bool:
    return response.status_code != 404 and check(response).is_success


def _path_id(value: str) -> str:
    if not value or "/" in value or value in (".", ".."):
        raise InvalidInput(f"{value!r} is not an id", field="id")
    return value


def submit(spec: JobSpec) -> Call[JobView]:
    return Call("POST", "/jobs", model(JobView), json=spec.model_dump(mode="json"))


def submit_many(specs: Sequence[JobSpec]) -> Call[list[JobView]]:
    body = JobBatch(jobs=list(specs)).model_dump(mode="json")
    return Call("POST", "/jobs/batch", lambda r: model(JobList)(r).jobs, json=body)


def jobs(state: str | None = None, limit: int = 100, run: str | None = None,
         before: str | None = None) -> Call[list[JobView]]:
    page = jobs_page(state, limit, run, before)
    return Call(page.method, page.path, lambda r: model(JobList)(r).jobs, params=page.params)


def jobs_page(state: str | None = None, limit: int = 100, run: str | None = None,
              before: str | None = None) -> Call[JobList]:
    """A page of jobs, newest first; its ``next`` is the ``before`` of the page after."""
    params: dict[str, str | int] = {"limit": limit}
    if state:
        params["state"] = state.upper()
    if run:
        params["run"] = run
    if before:
        params["before"] = before
    return Call("GET", "/jobs", model(JobList), params=params)


def runs(limit: int = 50, app: str | None = None) -> Call[list[RunView]]:
    params: dict[str, Any] = {"limit": limit} | ({"app": app} if app else {})
    return Call("GET", "/runs", lambda r: model(RunList)(r).runs, params=params)


def run(run_id: str) -> Call[RunDetail]:
    return Call("GET", f"/runs/{_path_id(run_id)}", model(RunDetail))


def renew_lease(run_id: str) -> Call[RunLease]:
    """The run's driver is alive (``services.runs``)."""
    return Call("POST", f"/runs/{_path_id(run_id)}/lease", model(RunLease))


def end_lease(run_id: str) -> Call[None]:
    return Call("DELETE", f"/runs/{_path_id(run_id)}/lease", _nothing)


def cancel_run(run_id: str, reason: str) -> Call[RunCancelled]:
    return Call("POST", f"/runs/{_path_id(run_id)}/cancel", model(RunCancelled),
                json=RunCancel(reason=reason).model_dump())


def job(job_id: str) -> Call[JobDetail]:
    return Call("GET", f"/jobs/{_path_id(job_id)}", model(JobDetail))


def cancel(job_id: str) -> Call[JobView]:
    return Call("POST", f"/jobs/{_path_id(job_id)}/cancel", model(JobView))


def events(job_id: str, after: int = 0) -> Call[list[EventView]]:
    return Call("GET", f"/jobs/{_path_id(job_id)}/events", lambda r: model(EventList)(r).events,
                params={"after": after})


def logs(job_id: str, after: int = 0, limit: int = 1000, rank: int | None = None) -> Call[LogPage]:
    """A page of the job's log: every member's chunks, or gang member ``rank``'s."""
    return Call("GET", f"/jobs/{_path_id(job_id)}/logs", model(LogPage),
                params={"after": after, "limit": limit, **_rank(rank)})


def follow(job_id: str, after: int, rank: int | None = None) -> Call[httpx.Response]:
    """The SSE request; the clients stream it and feed lines to a LogFollower."""
    return Call("GET", f"/jobs/{_path_id(job_id)}/logs/follow", check,
                params={"after": after, **_rank(rank)})


def _rank(rank: int | None) -> dict[str, int]:
    return {} if rank is None else {"rank": rank}


def job_metrics(job_id: str, since: float = 0.0, limit: int = 5000,
                rank: int | None = None) -> Call[MetricsView]:
    params: dict[str, Any] = {"since": _since(since), "limit": limit}
    if rank is not None:
        params["rank"] = rank
    return Call("GET", f"/jobs/{_path_id(job_id)}/metrics", model(MetricsView), params=params)


def node_metrics(node_id: str, since: float = 0.0, limit: int = 5000) -> Call[MetricsView]:
    return Call("GET", f"/nodes/{_path_id(node_id)}/metrics", model(MetricsView),
                params={"since": _since(since), "limit": limit})


def _since(value: float) -> str:
    return repr(float(value))


def nodes() -> Call[list[NodeView]]:
    return Call("GET", "/nodes", lambda r: model(NodeList)(r).nodes)


def providers() -> Call[list[ProviderReliabilityView]]:
    return Call("GET", "/providers", lambda r: model(ProviderReliabilityList)(r).providers)


def node(node_id: str) -> Call[NodeView]:
    return Call("GET", f"/nodes/{_path_id(node_id)}", model(NodeView))


def reclaim(node_id: str, notice_s: float, reason: str | None = None) -> Call[ReclaimResult]:
    body = ReclaimRequest(notice_s=notice_s, **({"reason": reason} if reason else {}))
    return Call("POST", f"/nodes/{_path_id(node_id)}/reclaim", model(ReclaimResult),
                json=body.model_dump(mode="json"))


def burst(job_id: str, compute: Compute | None = None, *, local: bool = False,
          notice_s: float = 60.0, reason: str | None = None) -> Call[BurstResult]:
    body = BurstRequest(compute=compute, local=local, notice_s=notice_s,
                        **({"reason": reason} if reason else {}))
    return Call("POST", f"/jobs/{_path_id(job_id)}/burst", model(BurstResult),
                json=body.model_dump(mode="json", exclude_none=True))


def cost(by: str = "day", since: float | None = None) -> Call[CostSummary]:
    params: dict[str, str | int] = {"by": by}
    if since is not None:
        params["since"] = str(since)
    return Call("GET", "/cost", model(CostSummary), params=params)


def drain(node_id: str) -> Call[DrainResult]:
    return Call("POST", f"/nodes/{_path_id(node_id)}/drain", model(DrainResult))


def create_enrollment(name: str | None, expires_in_s: float, project: str | None = None,
                      price_per_hour: float | None = None) -> Call[EnrollmentToken]:
    body = EnrollmentCreate(name=name, expires_in_s=expires_in_s, project=project,
                            price_per_hour=price_per_hour)
    return Call("POST", "/enrollments", model(EnrollmentToken),
                json=body.model_dump(mode="json", exclude_none=True))


def bundle_exists(sha256: str) -> Call[bool]:
    return Call("HEAD", f"/bundles/{_sha(sha256)}", _exists)


def upload_bundle(sha256: str) -> Call[StoredBundle]:
    """The PUT; the clients attach the (streamed) body."""
    return Call("PUT", f"/bundles/{_sha(sha256)}", model(StoredBundle))


def data_summary(uri: str) -> Call[DataSummary]:
    return Call("GET", "/data/summary", model(DataSummary), params={"uri": uri})


def data_home() -> Call[DataHome]:
    return Call("GET", "/data/home", model(DataHome))


def data_credentials(read: Sequence[str], write: Sequence[str],
                     ttl_s: float) -> Call[DataGrant]:
    body = DataGrantRequest(read=list(read), write=list(write), ttl_s=ttl_s)
    return Call("POST", "/data/credentials", model(DataGrant), json=body.model_dump())


def revoke_data_credentials(grant_id: str) -> Call[None]:
    return Call("DELETE", f"/data/credentials/{_path_id(grant_id)}", _nothing)


def offers(compute: Compute | None, limit: int, explain: bool,
           launchable: bool = False) -> Call[OfferList]:
    query = OfferQuery(compute=compute or Compute(), limit=limit, explain=explain,
                       launchable=launchable)
    return Call("POST", "/offers", model(OfferList), json=query.model_dump(mode="json"))


def health(url: str) -> Call[bool]:
    """``GET /healthz`` sits at the exchange's root, outside the versioned API."""
    return Call("GET", root_url(url) + "/healthz", _ok)


def _ok(response: httpx.Response) -> bool:
    try:
        body = check(response).json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("ok") is True


def _sha(value: str) -> str:
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise InvalidInput(f"{value!r} is not a lowercase hex SHA-256", field="sha256")
    return value


def job_spec(command: list[str], **fields: Any) -> JobSpec:
    """A JobSpec whose validation errors read as :class:`InvalidInput` (None fields omitted)."""
    try:
        return JobSpec(command=command, **{k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or None
        raise InvalidInput(error["msg"], field=where) from None


def is_terminal(job: JobView) -> bool:
    return job.state.terminal


def reconnect_delay(failures: int, delays: tuple[float, ...]) -> float | None:
    """Seconds to wait before reconnect number ``failures`` (1-based); None: give up."""
    return delays[failures - 1] if 1 <= failures <= len(delays) else None
