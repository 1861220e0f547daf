"""A real local exchange for the app tests: a coordinator (with its embedded SeaweedFS) and two
agents as background processes, under a BOURSE_HOME of their own, and the real `bourse`
command run against it in a subprocess."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app_harness import BOURSE, CLI_TIMEOUT_S

from bourse.local.exchange import LocalExchange, Status, bourse_home_at
from bourse.local.processes import free_port
from bourse.protocol.api import JobView
from bourse.sdk.client import Client
from bourse.sdk.config import load_credentials
from bourse.storage.remote import open_store
from bourse.storage.seaweed import load_root_key
from bourse.storage.settings import StoreSettings
from bourse.storage.store import ObjectStore


class ExchangeUnderTest:
    def __init__(self, status: Status, env: dict[str, str], client: Client,
                 seaweed: Path) -> None:
        self.status, self.env, self.client, self.seaweed = status, env, client, seaweed

    def store(self) -> ObjectStore:
        """The exchange's own bucket with its SeaweedFS's root key: to put data of one's own
        in, or take some away, as a user with store credentials would."""
        ports = json.loads((self.seaweed / "ports.json").read_text())
        settings = StoreSettings(endpoint=f"http://127.0.0.1:{ports['s3']}", region="us-east-1",
                                 path_style=True, access_key=load_root_key(self.seaweed))
        return open_store("s3://bourse/", settings)

    def cli(self, *args: str, cwd: Path,
            timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """The real ``bourse ARGS`` against this exchange."""
        return subprocess.run([str(BOURSE), *args], cwd=cwd, env=self.env, text=True,
                              capture_output=True, timeout=timeout, check=False)

    def jobs(self) -> list[JobView]:
        return self.client.jobs(limit=10000)


@contextmanager
def local_exchange(root: Path) -> Iterator[ExchangeUnderTest]:
    # a short loss window (and so driver lease): a run whose driver was killed ends within 10 s
    exchange = LocalExchange(root / "local", keep_alive_s=2.0, loss_window_s=10.0)
    with bourse_home_at(root / "home") as env:
        status = exchange.up(agents=2, port=free_port())
        creds = load_credentials()
    try:
        with Client(creds.url, creds.token) as client:
            yield ExchangeUnderTest(status, env, client, root / "local" / "server" / "seaweed")
    finally:
        with bourse_home_at(root / "home"):
            exchange.down()
