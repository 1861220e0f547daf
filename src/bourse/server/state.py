"""Everything a running coordinator holds, reachable from routes as ``request.app.state``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bourse.core.uri import StoreURI
from bourse.protocol.common import JobSpec
from bourse.server.agents.connections import Connections
from bourse.server.agents.dispatch import Dispatch
from bourse.server.agents.hub import Hub
from bourse.server.agents.intake import Intake
from bourse.server.audit.seal import SEAL_FILE, SealFile
from bourse.server.audit.writer import AuditWriter
from bourse.server.config import ServerConfig
from bourse.server.dataplane import DataPlane
from bourse.server.db.database import Database
from bourse.server.db.schema import Job
from bourse.server.files import keys
from bourse.server.files.bundles import BundleStore
from bourse.server.launcher.clouds import Clouds
from bourse.server.launcher.launcher import Launcher
from bourse.server.logs.archive import LogArchive
from bourse.server.logs.meter import LogMeter
from bourse.server.logs.retention import LogRetention
from bourse.server.notifier import Notifier
from bourse.server.scheduler import Scheduler
from bourse.server.services import audit
from bourse.server.services.secrets import SecretBox, SecretKeeper
from bourse.server.services.tokens import PrincipalCache
from bourse.server.serving.direct import Direct
from bourse.server.serving.gateway import Gateway
from bourse.server.submitter import Submitter


@dataclass
class ServerState:
    config: ServerConfig
    db: Database
    notifier: Notifier
    hub: Hub
    scheduler: Scheduler
    bundles: BundleStore
    secrets: SecretKeeper  # the hub's: fills starts with secrets, redacts what attempts say
    clock: Callable[[], float] = time.time
    principals: PrincipalCache = field(default_factory=PrincipalCache)
    dataplane: DataPlane | None = None
    logs: LogArchive | None = None  # ended jobs' logs in the store (with a data plane)
    retention: LogRetention | None = None  # deletes old jobs' logs (--log-retention)
    launcher: Launcher | None = None  # with clouds enabled (docs/clouds.md)
    key: bytes = b""  # the server key (``keys``), loaded at start
    gateway: Gateway = field(default_factory=Gateway)  # services' replicas (``serving``)
    direct: Direct = field(default_factory=Direct)  # its connections to loopback replicas
    # group commits of audit records and of single submits (``db.group``)
    audit_writer: AuditWriter = field(init=False)
    submitter: Submitter = field(init=False)

    def __post_init__(self) -> None:
        self.audit_writer = AuditWriter(self.db, lambda: self.audit_key)  # key read per group
        # the store and the key are wired in at start
        self.submitter = Submitter(self.db, lambda: self.store_root, lambda: self.secret_box)

    def open_key(self) -> None:
        self.key = keys.load_or_create(self.config.data_dir)
        self.secrets.open(self.secret_box)
        self.hub.dispatch.use_tracking(self.key, self.config.tracking_url)

    async def open_audit_seal(self) -> None:
        """The audit trail's seal in the data dir (``audit_seal``), once the chain's head is
        in the database."""
        seal = SealFile(self.config.data_dir / SEAL_FILE, keys.subkey(self.key, "audit-seal"))
        await self.audit_writer.open_seal(seal)

    @property
    def secret_box(self) -> SecretBox:
        assert self.key, "the server key is loaded at start"
        return SecretBox(self.key)

    @property
    def audit_key(self) -> bytes:
        assert self.key, "the server key is loaded at start"
        return keys.subkey(self.key, "audit")

    async def record_audit(self, entry: audit.Entry) -> None:
        await self.audit_writer.write(entry)

    async def submit(self, spec: JobSpec, project_id: str) -> Job:
        """Accept one job, group-committed with concurrent submits (``submitter``)."""
        return await self.submitter.submit(spec, project_id, self.clock())

    @classmethod
    def build(cls, config: ServerConfig, clock: Callable[[], float] = time.time) -> ServerState:
        """Each part is given its collaborators when it is made: connections, then what is
        sent to agents, the scheduler (which sends), what agents report (which places in its
        transaction and kicks the scheduler), and the hub over all three."""
        db, notifier, secrets = Database(config.db_url), Notifier(), SecretKeeper()
        connections = Connections()
        dispatch = Dispatch(db, notifier, connections, secrets, clock)
        db.after_commit.append(dispatch.after_commit)
        launcher = (Launcher(db, Clouds.from_config(config.clouds), config, connections,
                             notifier, clock=clock) if config.clouds.enabled else None)
        scheduler = Scheduler(db, dispatch, connections, notifier, config, clock=clock,
                              launcher=launcher)
        intake = Intake(db, notifier, dispatch, place_in=scheduler.place_in,
                        on_change=scheduler.kick, secrets=secrets,
                        meter=LogMeter(config.log_limit), metrics=config.metrics, clock=clock)
        hub = Hub(db, notifier, connections, dispatch, intake, on_change=scheduler.kick,
                  loss_window_s=config.loss_window_s, start_lease_s=config.start_lease_s,
                  clock=clock)
        bundles = BundleStore(config.bundles_dir, config.bundle_max_bytes)
        return cls(config, db, notifier, hub, scheduler, bundles, secrets, clock,
                   launcher=launcher)

    @property
    def store_root(self) -> StoreURI | None:
        """The exchange's bucket, None without a data plane."""
        return self.dataplane.root if self.dataplane is not None else None

    def use_dataplane(self, dataplane: DataPlane | None) -> None:
        """Wire a data plane in (at start): starts get data plans, ended attempts lose their
        credentials after each commit, and bundles go to the store."""
        self.dataplane = dataplane
        self.hub.dispatch.use_dataplane(dataplane)
        self.bundles.remote = dataplane.store if dataplane is not None else None
        self.logs = (LogArchive(self.db, dataplane.store, self.clock,
                                self.config.archive_logs_after_s)
                     if dataplane is not None else None)
        keep = self.config.log_retention_s
        self.retention = (LogRetention(self.db, dataplane.store if dataplane else None,
                                       self.clock, keep) if keep is not None else None)
        if dataplane is not None:
            self.db.after_commit.append(dataplane.on_commit)
