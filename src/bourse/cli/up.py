"""``bourse up`` / ``bourse down``: a local exchange (coordinator + agents) in the background."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click

from bourse.cli.cloud_options import cloud_options, clouds_config, server_args
from bourse.cli.errors import handles_errors
from bourse.cli.render import echo_json
from bourse.core.liveness import DEFAULT_LOSS_WINDOW_S
from bourse.local.exchange import CONTEXT, LocalExchange
from bourse.sdk.config import bourse_home
from bourse.sdk.contexts import contexts_path


def _data_dir(value: Path | None) -> Path:
    return (value or bourse_home() / "local").expanduser()


@click.command()
@click.option("--data-dir", type=click.Path(path_type=Path),
              help="Where the exchange keeps its state (default: ~/.bourse/local).")
@click.option("--agents", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Local agents to start.")
@click.option("--port", type=click.IntRange(1, 65535),
              help="Coordinator port (default 8470, or a free one if taken).")
@click.option("--keep-alive", type=click.FloatRange(min=0.1, max=86400), default=5.0,
              show_default=True, help="Agent heartbeat interval in seconds.")
@click.option("--loss-window", type=click.FloatRange(min=1, max=7 * 86400),
              default=DEFAULT_LOSS_WINDOW_S, show_default=True, metavar="SECONDS",
              help="A node silent this long is lost and its jobs placed again (they stop "
                   "themselves just before); shorter blinks cost nothing.")
@click.option("--cpus", type=click.IntRange(min=1), help="CPUs each agent offers.")
@click.option("--json", "as_json", is_flag=True)
@cloud_options
@handles_errors
def up(data_dir: Path | None, agents: int, port: int | None, keep_alive: float,
       loss_window: float, cpus: int | None, as_json: bool, **clouds: Any) -> None:
    """Start a local exchange in the background; later commands find it automatically."""
    clouds_config(**clouds)  # refused here, not in the coordinator's log
    exchange = LocalExchange(_data_dir(data_dir), keep_alive_s=keep_alive,
                             loss_window_s=loss_window, server_args=server_args(clouds))
    if not as_json:
        _starting(exchange)
    status = exchange.up(agents=agents, port=port, cpus=cpus)
    if as_json:
        echo_json(status.to_json() | {"data_dir": str(exchange.data_dir),
                                      "already_running": status.already_running})
        return
    verb = "already running" if status.already_running else "running"
    click.echo(f"bourse exchange {verb} at {status.url} "
               f"({len(status.agent_pids)} agent{'s' if len(status.agent_pids) != 1 else ''})")
    if status.kept and status.started:
        click.echo(f"kept what was running ({', '.join(status.kept)}); started "
                   f"{', '.join(status.started)}", err=True)
    stop = down_command(exchange.data_dir)
    click.echo(f"context: {CONTEXT} (current, in {contexts_path()})   stop it with: {stop}",
               err=True)
    click.echo(f"web UI: {status.url}/ui/ (`bourse ui` prints a link that signs you in)",
               err=True)


def _starting(exchange: LocalExchange) -> None:
    running = exchange.running()
    if not running:
        click.echo(f"starting a local exchange in {exchange.data_dir} ...", err=True)
    elif "coordinator" not in running:
        click.echo(f"the local exchange in {exchange.data_dir} is partly running "
                   f"({', '.join(running)}): starting the rest ...", err=True)


def down_command(data_dir: Path) -> str:
    """What stops the exchange in ``data_dir``: ``bourse down`` finds only the default one."""
    if data_dir.resolve() == _data_dir(None).resolve():
        return "bourse down"
    return f"bourse down --data-dir {shlex.quote(str(data_dir))}"


@click.command()
@click.option("--data-dir", type=click.Path(path_type=Path),
              help="The exchange's data dir (default: ~/.bourse/local).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def down(data_dir: Path | None, as_json: bool) -> None:
    """Stop the local exchange and everything it started (agents, their jobs, the
    coordinator and its store); waits until they have ended."""
    done = LocalExchange(_data_dir(data_dir)).down()
    if as_json:
        echo_json(done)
        return
    click.echo("stopped: " + ", ".join(done.stopped) if done.stopped else "nothing was running")
    if done.gone:
        click.echo("already gone: " + ", ".join(done.gone))
