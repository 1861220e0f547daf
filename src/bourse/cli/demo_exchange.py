"""The exchange half of ``bourse demo``: a job survives the loss of its machine."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from bourse.local.exchange import LocalExchange, Status
from bourse.protocol.api import JobDetail
from bourse.protocol.common import JobSpec
from bourse.sdk.client import Client
from bourse.sdk.config import load_credentials

JOB = """
import time
import numpy as np
# power iteration: the largest eigenvalue of a random symmetric matrix, one step per half second
rng = np.random.default_rng(0)
m = rng.standard_normal((400, 400))
m = (m + m.T) / 2
v = rng.standard_normal(400)
for step in range(1, 13):
    v = m @ v
    v /= np.linalg.norm(v)
    print(f"step {step:2d}/12  eigenvalue estimate {v @ m @ v:9.4f}", flush=True)
    time.sleep(0.5)
print(f"largest |eigenvalue| by numpy: {max(abs(np.linalg.eigvalsh(m))):9.4f}")
"""

@contextmanager
def throwaway_exchange() -> Iterator[tuple[Client, Status]]:
    """Two agents with a 1 s keep-alive, in a temp dir; the user's ~/.bourse is untouched."""
    root = Path(tempfile.mkdtemp(prefix="bourse-demo-"))
    previous = os.environ.get("BOURSE_HOME")
    os.environ["BOURSE_HOME"] = str(root / "home")
    exchange = LocalExchange(root / "local", keep_alive_s=1.0)
    try:
        status = exchange.up(agents=2, port=None)
        creds = load_credentials()
        with Client(creds.url, creds.token) as client:
            yield client, status
    finally:
        exchange.down()
        if previous is None:
            os.environ.pop("BOURSE_HOME", None)
        else:
            os.environ["BOURSE_HOME"] = previous
        shutil.rmtree(root, ignore_errors=True)


def _wait(client: Client, job_id: str, predicate: str, timeout: float = 60.0) -> JobDetail:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.job(job_id)
        if predicate == "running" and job.state == "RUNNING":
            return job
        if predicate == "ended" and job.state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return job
        time.sleep(0.1)
    raise click.ClickException(f"the demo job did not become {predicate} in {timeout:.0f} s")


def _print_logs(client: Client) -> None:
    for job in client.jobs(limit=1):
        for chunk in client.iter_logs(job.id):
            text = base64.b64decode(chunk.data).decode(errors="replace")
            for line in text.splitlines():
                click.echo(f"  [attempt {chunk.attempt}] {line}")


def exchange_tour() -> None:
    click.echo(click.style("\n== a local exchange: a job survives losing its machine", bold=True))
    with throwaway_exchange() as (client, status):
        click.echo(f"coordinator at {status.url}, agents {', '.join(map(str, status.agent_pids))}")
        job = client.submit(JobSpec(command=[sys.executable, "-c", JOB], name="demo-steps"))
        first = _wait(client, job.id, "running")
        node = first.attempts[-1].node_name
        click.echo(f"job {job.id} running on {node}: {first.attempts[-1].placement}")
        time.sleep(2.0)
        victim = status.agent_pids[int(str(node).rsplit("-", 1)[-1])]
        os.killpg(victim, signal.SIGKILL)
        click.echo(f"killed agent {node} (pid {victim}) with SIGKILL; waiting for the exchange "
                   "to notice (3 keep-alives) and retry elsewhere ...")
        final = _wait(client, job.id, "ended")
        for attempt in final.attempts:
            click.echo(f"  attempt {attempt.number} on {attempt.node_name}: {attempt.state} "
                       f"({attempt.reason})")
        _print_logs(client)
        click.echo(f"job {final.state}, exit code {final.exit_code}")
