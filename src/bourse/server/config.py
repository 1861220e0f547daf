"""Coordinator settings. Defaults make one machine a complete exchange."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bourse.server.db.database import sqlite_url


@dataclass(frozen=True)
class ServerConfig:
    data_dir: Path
    database_url: str | None = None  # default: SQLite file in the data dir
    host: str = "127.0.0.1"
    port: int = 8470
    keep_alive_s: float = 20.0  # agents heartbeat this often; silent for 3x this = lost
    start_lease_s: float = 30.0  # a placement not acknowledged within this is re-placed
    tick_interval_s: float = 1.0  # the scheduler also runs on every submit and node change
    bundle_max_bytes: int = 512 * 1024 * 1024
    credentials_path: Path | None = None  # where the first start writes the admin token
    public_url: str | None = None  # how clients reach this coordinator (written with the token)
    allow_unverified: bool = False  # development only: place work on nodes not yet verified

    @property
    def db_url(self) -> str:
        return self.database_url or sqlite_url(self.data_dir / "bourse.db")

    @property
    def bundles_dir(self) -> Path:
        return self.data_dir / "bundles"

    @property
    def url(self) -> str:
        return self.public_url or f"http://{self.host}:{self.port}"
