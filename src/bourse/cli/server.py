"""``bourse server``: run a coordinator in the foreground."""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import uvicorn

from bourse.cli import loop
from bourse.cli.cloud_options import cloud_options, clouds_config, pop_cloud_options
from bourse.cli.errors import handles_errors
from bourse.cli.settings import Settings, configurable
from bourse.core.errors import InvalidInput
from bourse.core.health import StallRules
from bourse.core.liveness import DEFAULT_LOSS_WINDOW_S
from bourse.core.ratelimit import LogLimit
from bourse.core.units import parse_duration
from bourse.server.app import create_app
from bourse.server.config import MetricsConfig, ServerConfig, StoreConfig
from bourse.server.db.database import sqlite_url
from bourse.server.http.limits import MAX_FRAME_BYTES

# How long a stopping coordinator waits for requests in flight before it cancels them. Log
# follows end at once (`Notifier.close`); what is left is a request or two, and the UI's long
# polls, which answer as soon as the notifier closes.
GRACEFUL_SHUTDOWN_S = 5
MIN_RETENTION_S, MAX_RETENTION_S = 3600.0, 3650 * 86400.0  # --log-retention

# every flag also comes from BOURSE_<FLAG> and from server.toml (cli.settings)
SETTINGS = Settings(command="server", prefix="BOURSE_", file_name="server.toml",
                    config_env="BOURSE_SERVER_CONFIG",
                    env={"database-url": ("BOURSE_DATABASE_URL", "BOURSE_DB_URL")})


class Coordinator(uvicorn.Server):
    """uvicorn's server, which tells the app it is stopping before it waits for open
    connections: uvicorn waits for every response to end, and a log follow ends only with
    its job, so a followed coordinator would not stop until then (and would keep
    supervising its store meanwhile)."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_stop = on_stop

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.on_stop()
        await super().shutdown(sockets)


def bind(host: str, port: int) -> socket.socket:
    """Bind first, so that port 0 yields a known free port before the app starts."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return sock


def write_state(data_dir: Path, url: str) -> None:
    path = data_dir / "server.json"
    tmp = path.with_suffix(".tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        out.write(json.dumps({"url": url, "pid": os.getpid()}))
    os.replace(tmp, path)


def store_config(*, store_endpoint: str | None, store_region: str | None, store_bucket: str,
                 store_role_arn: str | None, store_host: str, no_store: bool) -> StoreConfig:
    if no_store:
        return StoreConfig.none()
    external = bool(store_endpoint or store_region or store_role_arn)
    return StoreConfig(kind="external" if external else "embedded", bucket=store_bucket,
                       endpoint=store_endpoint, region=store_region, role_arn=store_role_arn,
                       host=store_host)


def metrics_config(stall_after: float, disk_warn_percent: float, raw_hours: float,
                   keep_days: float) -> MetricsConfig:
    if raw_hours * 3600 < stall_after:
        raise click.BadParameter(f"raw samples must be kept at least as long as --stall-after "
                                 f"({stall_after:.0f} s)", param_hint="--metrics-raw-hours")
    if keep_days * 86400 < raw_hours * 3600:
        raise click.BadParameter("keep the minute means at least as long as the raw samples",
                                 param_hint="--metrics-keep-days")
    return MetricsConfig(stall=StallRules(after_s=stall_after),
                         disk_warn_fraction=disk_warn_percent / 100,
                         raw_retention_s=raw_hours * 3600, retention_s=keep_days * 86400)


@configurable(SETTINGS)
@click.command()
@click.option("--data-dir", type=click.Path(path_type=Path), default=Path("~/.bourse/server"),
              show_default=True, help="Database (SQLite), bundles and logs live here.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (loopback by default).")
@click.option("--port", type=click.IntRange(0, 65535), default=8470, show_default=True,
              help="Port to listen on; 0 picks a free one.")
@click.option("--database-url", help="e.g. postgresql+asyncpg://user@host/db "
              "(default: SQLite in the data dir).")
@click.option("--keep-alive", type=click.FloatRange(min=0.1, max=86400), default=20.0,
              show_default=True, help="Seconds between heartbeats of the agents this "
              "coordinator enrols.")
@click.option("--loss-window", type=click.FloatRange(min=1, max=7 * 86400),
              default=DEFAULT_LOSS_WINDOW_S, show_default=True, metavar="SECONDS",
              help="A node silent this long (never less than 3 of its keep-alives) is lost "
              "and its jobs are placed again; its jobs stop themselves just before, so two "
              "copies never run at once. Short blinks never cost a running job.")
@click.option("--driver-lease", type=click.FloatRange(min=1, max=86400), metavar="SECONDS",
              help="Cancel an app run whose driver (bourse run app.py) has not renewed its "
                   "lease for this long (default: the loss window).")
@click.option("--credentials", type=click.Path(path_type=Path),
              help="Where the first start writes the admin token (default: "
                   "<data dir>/admin-token).")
@click.option("--allow-unverified", is_flag=True,
              help="Development only: place work on nodes that have not passed verification.")
@click.option("--store-endpoint", metavar="URL", help="An external S3 endpoint for job data "
              "and code (SeaweedFS, MinIO, R2; with --store-region and no endpoint: AWS). "
              "Root credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY. Default: "
              "an embedded SeaweedFS under <data dir>/seaweed.")
@click.option("--store-region", metavar="REGION", help="The external store's region.")
@click.option("--store-bucket", default="bourse", show_default=True,
              help="The exchange's bucket (code bundles, default checkpoints).")
@click.option("--store-role-arn", metavar="ARN", help="AWS: the role job credentials are "
              "assumed from (STS, with a session policy per attempt).")
@click.option("--store-host", default="127.0.0.1", show_default=True,
              help="Where the embedded store listens; agents on other machines need to reach "
              "it.")
@click.option("--no-store", is_flag=True, help="Run without an object store: jobs that name "
              "inputs, outputs or a checkpoint are refused.")
@click.option("--archive-logs-after", type=click.FloatRange(min=0), default=3600.0,
              show_default=True, metavar="SECONDS",
              help="Move an ended job's logs from the database into the store this long after "
              "it ended.")
@click.option("--log-retention", metavar="DURATION",
              help="Delete an ended job's logs this long after it ended (e.g. 30d, 12w; from "
              "its archive in the store and from the database); default: kept for ever.")
@click.option("--stall-after", type=click.FloatRange(min=1, max=7 * 86400), default=300.0,
              show_default=True, metavar="SECONDS", help="Flag a running job as stalled when "
              "its GPUs sat idle, or it printed nothing and used no CPU, this long.")
@click.option("--disk-warn-percent", type=click.FloatRange(min=1, max=100), default=95.0,
              show_default=True, help="Warn a node's jobs when its work dir or cache disk is "
              "this full.")
@click.option("--metrics-raw-hours", type=click.FloatRange(min=0.01, max=24 * 365),
              default=6.0, show_default=True, help="Keep raw resource samples this long, "
              "then one mean per minute.")
@click.option("--metrics-keep-days", type=click.FloatRange(min=0.01, max=3650), default=14.0,
              show_default=True, help="Keep the minute means this long.")
@click.option("--log-rate", default="8MB", show_default=True, metavar="SIZE",
              help="Each job's log rate limit, per second on average (0: none). Agents drop "
              "what goes past it; the coordinator stores nothing past twice the burst plus "
              "this rate since the attempt was placed, whatever the agent does.")
@click.option("--log-burst", default="256MB", show_default=True, metavar="SIZE",
              help="What a job may print at once above --log-rate.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
@cloud_options
@handles_errors
def server(data_dir: Path, host: str, port: int, database_url: str | None, keep_alive: float,
           loss_window: float, driver_lease: float | None, credentials: Path | None,
           allow_unverified: bool, archive_logs_after: float, log_retention: str | None,
           stall_after: float,
           disk_warn_percent: float, metrics_raw_hours: float, metrics_keep_days: float,
           log_rate: str, log_burst: str, log_level: str,
           **store: Any) -> None:
    """Run a coordinator (the exchange's API, agent hub and scheduler)."""
    log_limit = LogLimit.parse(log_rate, log_burst)  # refused before anything starts
    keep_logs_s = retention_s(log_retention)
    clouds = clouds_config(**pop_cloud_options(store))
    data_dir = data_dir.expanduser()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # what the coordinator and its embedded store write is theirs alone (docs/security.md)
    os.umask(0o077)
    logging.basicConfig(level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    url = f"http://{host if ':' not in host else f'[{host}]'}:{bound}"
    config = ServerConfig(data_dir=data_dir, database_url=database_url or sqlite_url(
        data_dir / "bourse.db"), host=host, port=bound, keep_alive_s=keep_alive,
        loss_window_s=loss_window,
        credentials_path=credentials.expanduser() if credentials else None, public_url=url,
        allow_unverified=allow_unverified, store=store_config(**store),
        archive_logs_after_s=archive_logs_after, log_retention_s=keep_logs_s,
        metrics=metrics_config(stall_after, disk_warn_percent, metrics_raw_hours,
                               metrics_keep_days),
        log_limit=log_limit, driver_lease_s=driver_lease, clouds=clouds)
    app = create_app(config)
    uv = Coordinator(uvicorn.Config(app, log_level=log_level, access_log=False,
                                    ws_max_size=MAX_FRAME_BYTES, lifespan="on",
                                    timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S),
                     on_stop=app.state.bourse.notifier.close)
    write_state(data_dir, url)
    click.echo(f"bourse coordinator listening on {url}", err=True)
    loop.run(uv.serve(sockets=[sock]))


def retention_s(text: str | None) -> float | None:
    """``--log-retention`` in seconds: at least an hour (a shorter one would delete the logs
    of a job its owner has not had time to read), at most ten years."""
    if text is None:
        return None
    seconds = parse_duration(text, field="--log-retention", at_most=MAX_RETENTION_S)
    if not MIN_RETENTION_S <= seconds <= MAX_RETENTION_S:
        raise InvalidInput(f"--log-retention {text}: keep logs between 1h and 3650d",
                           field="--log-retention", hint="e.g. --log-retention 30d")
    return seconds

