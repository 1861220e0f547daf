"""A throwaway local exchange for benchmarks: a coordinator and N agents in a temp dir."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bourse.local.exchange import LocalExchange, Status
from bourse.local.processes import free_port
from bourse.sdk.client import Client
from bourse.sdk.config import load_credentials


@contextlib.contextmanager
def local_exchange(agents: int = 1, cpus: int | None = None, keep_alive_s: float = 5.0,
                   reachable: bool = False, *, loss_window_s: float | None = None,
                   server_args: list[str] | None = None,
                   ) -> Iterator[tuple[Client, Status, Path]]:
    """``loss_window_s``: the coordinator's (default: its own); ``server_args``: more
    ``bourse server`` options."""
    root = Path(tempfile.mkdtemp(prefix="bourse-bench-"))
    if reachable:  # a root agent then runs each job as its own user (docs/security.md)
        root.chmod(0o711)
    previous = os.environ.get("BOURSE_HOME")
    os.environ["BOURSE_HOME"] = str(root / "home")
    exchange = LocalExchange(root / "local", keep_alive_s=keep_alive_s,
                             server_args=server_args or [])
    if loss_window_s is not None:
        exchange.loss_window_s = loss_window_s
    try:
        # a port of its own: another exchange may take the default one meanwhile
        status = exchange.up(agents=agents, cpus=cpus, port=free_port())
        creds = load_credentials()
        with Client(creds.url, creds.token, timeout=120) as client:
            yield client, status, root
    finally:
        exchange.down()
        if previous is None:
            os.environ.pop("BOURSE_HOME", None)
        else:
            os.environ["BOURSE_HOME"] = previous
        shutil.rmtree(root, ignore_errors=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]
