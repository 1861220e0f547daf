"""``bourse agent``: run a node agent in the foreground."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import click

from bourse.agent.daemon import AgentConfig, run_agent
from bourse.cli.errors import handles_errors


@click.group(invoke_without_command=True)
@click.option("--server", help="The coordinator's URL, e.g. http://10.0.0.5:8470.")
@click.option("--token", help="One-time enrolment token (`bourse nodes enroll`); not needed "
              "once the node is enrolled.")
@click.option("--name", default=socket.gethostname(), show_default=True,
              help="Name shown for this node.")
@click.option("--keep-alive", type=click.FloatRange(min=0.1), default=20.0, show_default=True,
              help="Seconds between heartbeats and WebSocket pings: keep it below the idle "
                   "timeout of any load balancer or NAT on the way.")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path("~/.bourse/agent"),
              show_default=True, help="Jobs, logs, the spool and the node credential live here.")
@click.option("--cpus", type=click.IntRange(min=1), help="CPUs to offer (default: all).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
@click.pass_context
@handles_errors
def agent(ctx: click.Context, server: str | None, token: str | None, name: str,
          keep_alive: float, work_dir: Path, cpus: int | None, log_level: str) -> None:
    """Run a node agent: it dials out to the coordinator and runs the jobs placed here."""
    if ctx.invoked_subcommand is not None:
        return
    if not server:
        raise click.UsageError("--server is required, e.g. --server http://127.0.0.1:8470")
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise click.BadParameter("use letters, digits, '-', '_' and '.'", param_hint="--name")
    logging.basicConfig(level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = AgentConfig(server=server.rstrip("/"), work_dir=work_dir.expanduser(), name=name,
                         token=token, keep_alive_s=keep_alive, cpus=cpus)
    asyncio.run(run_agent(config))
