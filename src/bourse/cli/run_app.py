"""``bourse run app.py``: run a multi-stage app on the exchange (or ``--local``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from bourse.app.context import using
from bourse.app.exchange import ExchangeBackend, new_run_id
from bourse.app.loader import load_app, preflight
from bourse.app.local import LocalBackend
from bourse.app.result import Result
from bourse.cli.render import table
from bourse.sdk.client import Client
from bourse.sdk.errors import NotConfigured, Unreachable


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
        from bourse.local.exchange import LocalExchange
        from bourse.sdk.config import bourse_home

        click.echo("no exchange is running: starting the local one (bourse up) ...", err=True)
        LocalExchange(bourse_home() / "local", keep_alive_s=5.0).up()
        return Client()


def run_app(path: Path, args: tuple[str, ...], local: bool) -> Any:
    if args[:1] == ("--",):  # bourse run app.py -- ARGS
        args = args[1:]
    app = load_app(path)
    root, run_id = Path.cwd(), new_run_id()
    stages = preflight(app, root)
    mode = "local processes" if local else "the exchange"
    click.echo(f"run {run_id}: {len(stages)} stage(s) of {path.name} on {mode}", err=True)
    backend = LocalBackend(root, run_id) if local else ExchangeBackend(connect(), root, run_id)
    started = time.monotonic()
    with using(backend) as recorded:
        try:
            value = app.root.run(*args)
        finally:
            click.echo(summary(run_id, recorded, time.monotonic() - started), err=True)
    shown = value.value if isinstance(value, Result) else value  # a lone stage: its body's
    if shown is not None:
        click.echo(json.dumps(shown, indent=2, default=str))
    return value


def summary(run_id: str, results: list[Result], seconds: float) -> str:
    """One line per stage: where it ran, why there, how long, what it cost."""
    rows = [[r.work, r.status + (" (cached)" if r.cached else ""), r.node or "-",
             f"{r.duration_s:.1f} s" if r.duration_s is not None else "-",
             f"${r.cost:.4f}" if r.cost is not None else "-", r.job_id or "-",
             r.placement or "-"] for r in results]
    lines = table(("STAGE", "STATUS", "NODE", "DURATION", "COST", "JOB", "PLACEMENT"), rows)
    return f"\nrun {run_id}: {len(results)} stage(s) in {seconds:.1f} s\n{lines}"
