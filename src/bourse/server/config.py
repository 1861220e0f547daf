"""Coordinator settings. Defaults make one machine a complete exchange.

``bourse server`` builds them from its flags, each of which may also come from a ``BOURSE_*``
variable or ``server.toml`` (``cli.settings``; ``--show-config`` says which gave what)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bourse.core.health import StallRules
from bourse.core.liveness import DEFAULT_LOSS_WINDOW_S
from bourse.core.ratelimit import LogLimit
from bourse.server.db.database import sqlite_url

StoreKind = Literal["embedded", "external", "none"]


@dataclass(frozen=True)
class StoreConfig:
    """The exchange's object store (see docs/storage.md).

    ``embedded``: a supervised SeaweedFS under ``<data dir>/seaweed``, bound to ``host``.
    ``external``: any S3 endpoint (``endpoint`` None means AWS); the root credentials come from
    the coordinator's environment; job credentials from STS when ``role_arn`` is set, else from
    the endpoint's IAM API (SeaweedFS). ``none``: no data plane; jobs that name data are
    refused at submit.
    """

    kind: StoreKind = "embedded"
    bucket: str = "bourse"
    endpoint: str | None = None
    region: str | None = None
    path_style: bool | None = None
    role_arn: str | None = None
    host: str = "127.0.0.1"  # where the embedded store listens: loopback unless told
    credential_ttl_s: float = 2 * 3600.0  # job credentials live this long, renewed at half

    @classmethod
    def none(cls) -> StoreConfig:
        return cls(kind="none")


@dataclass(frozen=True)
class MetricsConfig:
    """Resource samples (docs/metrics.md): how long they are kept, when a job is stalled,
    when a disk is near full."""

    stall: StallRules = field(default_factory=StallRules)
    disk_warn_fraction: float = 0.95  # a disk this full raises a warning on the node's jobs
    raw_retention_s: float = 6 * 3600.0  # raw samples; then one row of means per minute
    retention_s: float = 14 * 86400.0  # the minute means
    compact_every_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.disk_warn_fraction <= 1:
            raise ValueError("disk_warn_fraction is a fraction in (0, 1]")
        if self.raw_retention_s < self.stall.after_s:
            raise ValueError("raw samples must be kept at least as long as the stall window")
        if self.retention_s < self.raw_retention_s or self.compact_every_s <= 0:
            raise ValueError("keep minute means at least as long as raw samples")


# the clouds the exchange can launch machines on (docs/clouds.md)
CLOUDS = ("aws", "lambda", "kubernetes")


@dataclass(frozen=True)
class KubeSettings:
    """A Kubernetes cluster to launch pods on (docs/clouds.md). ``gpu_prices``: $/GPU-hour by
    GPU model id, ``*`` for any other model (a model without one is not offered)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    gpu_prices: tuple[tuple[str, float], ...] = ()
    pending_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if not 0 < self.pending_timeout_s <= 86400:
            raise ValueError("the pending timeout is a duration in (0 s, 1 day]")
        for model, price in self.gpu_prices:
            if not (0 <= price <= 10_000):
                raise ValueError(f"the price of {model} must be in [0, 10000] $/GPU-hour")


@dataclass(frozen=True)
class CloudsConfig:
    """Launching machines on clouds (docs/clouds.md). ``enabled``: the clouds to launch on
    (none: the exchange only uses nodes that join it). ``agent_url``: how launched machines
    reach this coordinator (default: its public URL). ``regions``: per cloud, the regions to
    launch in (none: every region of its catalogue)."""

    enabled: tuple[str, ...] = ()
    idle_timeout_s: float = 600.0  # a launched node with no work this long is terminated
    boot_timeout_s: float = 900.0  # a launched node not enrolled this long is terminated
    agent_url: str | None = None
    regions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    image: tuple[tuple[str, str], ...] = ()  # per cloud, the machine image to boot
    ssh_key: tuple[tuple[str, str], ...] = ()  # per cloud, the SSH key name a launch needs
    kube: KubeSettings = field(default_factory=KubeSettings)
    sla: tuple[tuple[str, float], ...] = ()  # per cloud, the availability it declares
    reconcile_every_s: float = 60.0
    max_tries: int = 12  # launch calls per job and pass before it waits for blocks to expire

    def __post_init__(self) -> None:
        for name in self.enabled:
            if name not in CLOUDS:
                raise ValueError(f"unknown cloud {name!r}: bourse launches on "
                                 f"{', '.join(CLOUDS)}")
        for label, value in (("idle timeout", self.idle_timeout_s),
                             ("boot timeout", self.boot_timeout_s)):
            if not 0 < value <= 30 * 86400:
                raise ValueError(f"the {label} is a duration in (0 s, 30 days]")
        if self.reconcile_every_s <= 0 or self.max_tries < 1:
            raise ValueError("reconcile_every_s must be positive and max_tries at least 1")

    def regions_of(self, cloud: str) -> tuple[str, ...]:
        return dict(self.regions).get(cloud, ())

    def image_of(self, cloud: str) -> str | None:
        return dict(self.image).get(cloud)

    def ssh_key_of(self, cloud: str) -> str | None:
        return dict(self.ssh_key).get(cloud)

    def sla_of(self, cloud: str) -> float | None:
        return dict(self.sla).get(cloud)


@dataclass(frozen=True)
class ServerConfig:
    data_dir: Path
    database_url: str | None = None  # default: SQLite file in the data dir
    host: str = "127.0.0.1"
    port: int = 8470
    keep_alive_s: float = 20.0  # agents heartbeat this often
    # a node silent this long (never less than 3 of its keep-alives) is lost, and its attempts
    # are placed again; its attempts stop themselves before then (core.liveness)
    loss_window_s: float = DEFAULT_LOSS_WINDOW_S
    start_lease_s: float = 30.0  # a placement not acknowledged within this is re-placed
    tick_interval_s: float = 1.0  # the scheduler also runs on every submit and node change
    bundle_max_bytes: int = 512 * 1024 * 1024
    credentials_path: Path | None = None  # where the first start writes the admin token
    public_url: str | None = None  # how clients reach this coordinator (written with the token)
    allow_unverified: bool = False  # development only: place work on nodes not yet verified
    store: StoreConfig = field(default_factory=StoreConfig)
    archive_logs_after_s: float = 3600.0  # an ended job's logs move to the store after this
    # an ended job's logs are deleted this long after it ended (None: kept for ever)
    log_retention_s: float | None = None
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    log_limit: LogLimit = field(default_factory=LogLimit)  # per job (docs/security.md)
    # an app run whose driver is silent this long is cancelled (None: the loss window, as
    # nodes: a driver's link that blinks costs no run)
    driver_lease_s: float | None = None
    clouds: CloudsConfig = field(default_factory=CloudsConfig)

    @property
    def driver_lease(self) -> float:
        return self.driver_lease_s or self.loss_window_s

    def __post_init__(self) -> None:
        if not 0 < self.keep_alive_s <= 86400:
            raise ValueError("keep_alive_s is a number of seconds in (0, 86400]")
        if not 0 < self.loss_window_s <= 7 * 86400:
            raise ValueError("loss_window_s is a number of seconds in (0, 604800]")

    @property
    def db_url(self) -> str:
        return self.database_url or sqlite_url(self.data_dir / "bourse.db")

    @property
    def bundles_dir(self) -> Path:
        return self.data_dir / "bundles"

    @property
    def store_dir(self) -> Path:
        return self.data_dir / "seaweed"

    @property
    def url(self) -> str:
        return self.public_url or f"http://{self.host}:{self.port}"

    @property
    def tracking_url(self) -> str:
        """Where jobs' MLflow clients reach this coordinator (``MLFLOW_TRACKING_URI``)."""
        return self.url
