"""Everything a running coordinator holds, reachable from routes as ``request.app.state``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bourse.server.bundles import BundleStore
from bourse.server.config import ServerConfig
from bourse.server.db.database import Database
from bourse.server.hub import Hub
from bourse.server.notifier import Notifier
from bourse.server.scheduler import Scheduler
from bourse.server.services.tokens import PrincipalCache


@dataclass
class ServerState:
    config: ServerConfig
    db: Database
    notifier: Notifier
    hub: Hub
    scheduler: Scheduler
    bundles: BundleStore
    clock: Callable[[], float] = time.time
    principals: PrincipalCache = field(default_factory=PrincipalCache)

    @classmethod
    def build(cls, config: ServerConfig, clock: Callable[[], float] = time.time) -> ServerState:
        db = Database(config.db_url)
        notifier = Notifier()
        hub = Hub(db, notifier, lambda: None, config.keep_alive_s, clock)
        scheduler = Scheduler(db, hub, notifier, config, clock)
        hub.on_change = scheduler.kick
        hub.place_in = scheduler.place_in
        bundles = BundleStore(config.bundles_dir, config.bundle_max_bytes)
        return cls(config, db, notifier, hub, scheduler, bundles, clock)
