"""``bourse run app.py``: run a multi-stage app on the exchange (or ``--local``), or submit its
flow driver as a job of its own (``--detach``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import click

from bourse.app.context import using
from bourse.app.driver import driving, say
from bourse.app.exchange import ExchangeBackend, new_run_id
from bourse.app.loader import load_app, preflight
from bourse.app.local import LocalBackend
from bourse.app.result import Result
from bourse.cli.render import table
from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.extras import needs
from bourse.protocol.api import JobView
from bourse.protocol.common import JobSpec
from bourse.sdk.client import Client
from bourse.sdk.config import load_credentials
from bourse.sdk.errors import NotConfigured, Unreachable

DRIVER_COMPUTE = "cpu"  # the flow driver only submits and waits


def is_app(command: tuple[str, ...]) -> bool:
    return bool(command) and command[0].endswith(".py") and Path(command[0]).is_file()


def connect() -> Client:
    """The configured exchange; the embedded local one, started if needed, when there is
    none (or the configured local one is down)."""
    try:
        client = Client()
        client.health()
        return client
    except (NotConfigured, Unreachable):
        if os.environ.get("BOURSE_JOB_ID"):  # a detached driver: never an exchange of its own
            raise
        from bourse.sdk.config import bourse_home

        with needs("bourse run app.py with no exchange configured (it starts a local one)",
                   ("server", "agent")):
            from bourse.local.exchange import LocalExchange
        click.echo("no exchange is running: starting the local one (bourse up) ...", err=True)
        LocalExchange(bourse_home() / "local", keep_alive_s=5.0).up()
        return Client()


def run_app(path: Path, args: tuple[str, ...], local: bool, run_id: str | None = None) -> Any:
    if args[:1] == ("--",):  # bourse run app.py -- ARGS
        args = args[1:]
    app = load_app(path)
    root, run_id = Path.cwd(), run_id or new_run_id()
    stages = preflight(app, root)
    mode = "local processes" if local else "the exchange"
    click.echo(f"run {run_id}: {len(stages)} stage(s) of {path.name} on {mode}", err=True)
    backend = (LocalBackend(root, run_id) if local
               else ExchangeBackend(connect(), root, run_id, app=path.name))
    started = time.monotonic()
    with using(backend) as recorded:
        try:
            with driving(backend):  # SIGHUP, SIGTERM, Ctrl-C: its stages are stopped
                value = app.root.run(*args)
        finally:
            say(summary(run_id, recorded, time.monotonic() - started))
    shown = value.value if isinstance(value, Result) else value  # a lone stage: its body's
    if shown is not None:
        click.echo(json.dumps(shown, indent=2, default=str))
    return value


def detach_app(path: Path, args: tuple[str, ...], upload: Any) -> JobView:
    """Submit the flow driver itself as a small CPU job: it runs ``bourse run app.py`` there,
    with the user's exchange credentials as secret env variables (see docs/app.md)."""
    if args[:1] == ("--",):
        args = args[1:]
    root = Path.cwd().resolve()
    try:
        relative = path.resolve().relative_to(root)
    except ValueError:
        raise InvalidInput(f"{path} is outside the project {root}", field="app",
                           hint="run bourse from the project's directory") from None
    preflight(load_app(path), root)  # bad input fails here, before anything is submitted
    client = connect()
    creds = load_credentials()
    run_id = new_run_id()
    spec = JobSpec(
        command=["python", "-m", "bourse", "run", "--run-id", run_id, str(relative), "--",
                 *args],
        name=f"{run_id}/driver", compute=Compute(DRIVER_COMPUTE), bundle=upload(client, root),
        env={"BOURSE_URL": creds.url, "BOURSE_TOKEN": creds.token, "PYTHONUNBUFFERED": "1"},
        secrets=["BOURSE_TOKEN"], max_retries=0, run=run_id, app=path.name)
    with client:
        return client.submit(spec)


def summary(run_id: str, results: list[Result], seconds: float) -> str:
    """One line per stage: where it ran, why there, how long, what it cost."""
    rows = [[r.work, r.status + (" (cached)" if r.cached else ""), r.node or "-",
             f"{r.duration_s:.1f} s" if r.duration_s is not None else "-",
             f"${r.cost:.4f}" if r.cost is not None else "-", r.job_id or "-",
             r.placement or "-"] for r in results]
    lines = table(("STAGE", "STATUS", "NODE", "DURATION", "COST", "JOB", "PLACEMENT"), rows)
    return f"\nrun {run_id}: {len(results)} stage(s) in {seconds:.1f} s\n{lines}"
