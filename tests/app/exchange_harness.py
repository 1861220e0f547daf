"""A real local exchange for the app tests: a coordinator (with its embedded SeaweedFS) and two
agents as background processes, under a BOURSE_HOME of their own, and the real `bourse`
command run against it in a subprocess."""

from __future__ import annotations

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


class ExchangeUnderTest:
    def __init__(self, status: Status, env: dict[str, str], client: Client) -> None:
        self.status, self.env, self.client = status, env, client

    def cli(self, *args: str, cwd: Path,
            timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """The real ``bourse ARGS`` against this exchange."""
        return subprocess.run([str(BOURSE), *args], cwd=cwd, env=self.env, text=True,
                              capture_output=True, timeout=timeout, check=False)

    def jobs(self) -> list[JobView]:
        return self.client.jobs(limit=10000)


@contextmanager
def local_exchange(root: Path) -> Iterator[ExchangeUnderTest]:
    exchange = LocalExchange(root / "local", keep_alive_s=2.0)
    with bourse_home_at(root / "home") as env:
        status = exchange.up(agents=2, port=free_port())
        creds = load_credentials()
    try:
        with Client(creds.url, creds.token) as client:
            yield ExchangeUnderTest(status, env, client)
    finally:
        with bourse_home_at(root / "home"):
            exchange.down()
