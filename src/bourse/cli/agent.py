"""``bourse agent``: run a node agent in the foreground; ``bourse agent probe``: check this
machine without joining an exchange."""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import click
from click.core import ParameterSource

from bourse.agent import imds, interpreter
from bourse.agent.daemon import AgentConfig, Spot, run_agent
from bourse.agent.gang import outbound_address
from bourse.agent.indexes import PackageSources
from bourse.agent.lock import hold
from bourse.agent.probe import ProbeOptions, run_probe
from bourse.cli import loop
from bourse.cli.errors import EXIT_NO_RESULT, EXIT_OK, handles_errors
from bourse.cli.render import echo_json
from bourse.cli.settings import Settings, configurable
from bourse.cli.suggest import SuggestingGroup
from bourse.cli.verification import render_probe
from bourse.core.compute import Compute
from bourse.core.cuda import PYTORCH_INDEX
from bourse.core.interruption import base_url
from bourse.core.ratelimit import LogLimit
from bourse.core.units import parse_share
from bourse.core.verification import verify
from bourse.protocol.common import Declared, ip_literal

LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # as protocol.common.Label
NETWORK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")  # as protocol.common.Network

# every flag also comes from BOURSE_AGENT_<FLAG> (a few kept the names they had) and from
# agent.toml (cli.settings); the agent's variables are its own, so that a shell set up for a
# coordinator, or for the CLI (BOURSE_TOKEN), configures no agent by accident
SETTINGS = Settings(command="agent", prefix="BOURSE_AGENT_", file_name="agent.toml",
                    config_env="BOURSE_AGENT_CONFIG", secrets=frozenset({"token"}),
                    doc_defaults={"name": "the machine's host name"})


@configurable(SETTINGS)
@click.group(cls=SuggestingGroup, invoke_without_command=True)
@click.option("--server", help="The coordinator's URL, e.g. http://10.0.0.5:8470.")
@click.option("--token", help="One-time enrolment token (`bourse nodes enroll`); not needed "
              "once the node is enrolled.")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False),
              help="Read the enrolment token from this file (keep it mode 0600): unlike "
                   "--token, it never shows in the process list.")
@click.option("--name", default=socket.gethostname, show_default="this machine's hostname",
              help="Name shown for this node.")
@click.option("--keep-alive", type=click.FloatRange(min=0.1), default=20.0, show_default=True,
              help="Seconds between heartbeats and WebSocket pings: keep it below the idle "
                   "timeout of any load balancer or NAT on the way.")
@click.option("--work-dir", type=click.Path(path_type=Path), default=None,
              help="Jobs, logs, the spool and the node credential live here (default: "
                   "/var/lib/bourse/agent as root, where job users can reach it; else "
                   "~/.bourse/agent).")
@click.option("--cpus", type=click.IntRange(min=1), help="CPUs to offer (default: all).")
@click.option("--declare-gpus", help="GPUs the provider claims, e.g. a100-80gb:8; the probe "
              "must confirm them or the node is rejected.")
@click.option("--declare-cpus", type=click.IntRange(min=1), help="CPUs the provider claims.")
@click.option("--declare-memory", type=click.FloatRange(min=0), help="Memory claimed, GiB.")
@click.option("--declare-sla", metavar="SHARE", help="The availability this node's provider "
              "promises (99.5% or 0.995): shown beside what the exchange measures "
              "(`bourse nodes show`, /metrics), never a reason to refuse the node.")
@click.option("--verify-every", type=click.FloatRange(min=0.01), default=24.0,
              show_default=True, help="Hours between probes (also on restart and when the "
              "hardware changes).")
@click.option("--storage-mb", type=click.IntRange(1, 100_000), default=100, show_default=True,
              help="Size of the storage check (write, fsync, read back).")
@click.option("--cache-gb", type=click.FloatRange(min=0.001), help="Size limit of the "
              "node's input cache (<work dir>/cache), GB; default: 20 % of the free disk, at "
              "most 100 GB.")
@click.option("--interruptible", is_flag=True, help="Sell this node as spot capacity: "
              "cheaper, and reclaimable with notice (`bourse nodes reclaim`).")
@click.option("--spot-price", type=click.FloatRange(min=0, min_open=True, max=10_000),
              help="Spot price in $/h for the whole node (needs --interruptible); default: a "
                   "share of its list price.")
@click.option("--spot-notice", type=click.Choice(["none", "imds"]), default="none",
              show_default=True, help="Watch the cloud's spot interruption notice: imds, the "
              "instance metadata service (EC2, IMDSv2); on a notice the node's jobs "
              "checkpoint and resume elsewhere (needs --interruptible).")
@click.option("--metadata-url", metavar="URL", envvar=imds.URL_ENV,
              help=f"The instance metadata service's base URL (default: "
                   f"{imds.DEFAULT_URL}).")
@click.option("--spot-notice-interval", type=click.FloatRange(min=0.1, max=300),
              default=imds.POLL_S, show_default=True,
              help="Seconds between looks at the interruption notice.")
@click.option("--provider", "provider_label", help="Who sells this node (a label, e.g. "
              "acme-dc): placement avoids a provider whose node just failed a job.")
@click.option("--region", metavar="REGION", help="Where this node is (a cloud region such as "
              "us-east-1, or a site name): jobs whose data lives there prefer it, and "
              "placement avoids a region whose node just failed a job.")
@click.option("--network", metavar="NAME", envvar="BOURSE_NETWORK",
              help="The network this node shares with others that reach it (a fleet, a "
                   "cluster, a cloud zone): multi-node jobs run on nodes of one network "
                   "(default: none, the node runs no multi-node job).")
@click.option("--address", metavar="IP", envvar="BOURSE_ADDRESS",
              help="Where the other nodes of its network reach this one (default with "
                   "--network: the address this machine reaches the coordinator from).")
@click.option("--python", "python", metavar="PATH", envvar="BOURSE_AGENT_PYTHON",
              help="The Python jobs run with: its bin directory goes first on their PATH, "
                   "so python, pip and its console scripts resolve there; job environments "
                   "(packages, torch) are built on it (default: the Python this agent "
                   "runs on).")
@click.option("--index-url", metavar="URL", help="Package index for job environments "
              "(default: what pip's configuration on this machine says).")
@click.option("--extra-index-url", metavar="URL", multiple=True,
              help="More package indexes (repeatable).")
@click.option("--find-links", metavar="DIR|URL", multiple=True,
              help="Wheel directories or pages (repeatable).")
@click.option("--no-index", is_flag=True, help="Use only --find-links for job environments.")
@click.option("--torch-index", metavar="URL", default=PYTORCH_INDEX, show_default=True,
              help="Where PyTorch's per-CUDA indexes are (<URL>/cu121, <URL>/cpu...): a "
                   "mirror of download.pytorch.org/whl.")
@click.option("--metrics-interval", type=click.FloatRange(min=0, max=3600), default=5.0,
              show_default=True, help="Seconds between resource samples of the running jobs "
              "and the node (CPU, memory, GPUs, disk); 0 sends none.")
@click.option("--job-users", type=click.Choice(["auto", "on", "off"]), default="auto",
              show_default=True, help="Run each attempt as its own unprivileged user (needs "
              "root and a work dir other users can reach): auto where possible, on or fail, "
              "off never (docs/security.md).")
@click.option("--tmpfs-work-dir", "tmpfs_size", metavar="SIZE", help="Mount a tmpfs of SIZE "
              "(e.g. 8g) on each attempt's work and temp dirs, so its files never reach a "
              "disk; needs root.")
@click.option("--log-rate", default="8MB", show_default=True, metavar="SIZE",
              help="Each job's log rate limit, per second on average (0: none); output past "
              "it is dropped and a line in the log says how much (docs/security.md).")
@click.option("--log-burst", default="256MB", show_default=True, metavar="SIZE",
              help="What a job may print at once above --log-rate.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
@click.pass_context
@handles_errors
def agent(ctx: click.Context, server: str | None, token: str | None, name: str,
          keep_alive: float, work_dir: Path | None, cpus: int | None,
          declare_gpus: str | None,
          declare_cpus: int | None, declare_memory: float | None, declare_sla: str | None,
          verify_every: float,
          storage_mb: int, cache_gb: float | None, interruptible: bool,
          spot_price: float | None, token_file: Path | None, spot_notice: str,
          metadata_url: str | None, spot_notice_interval: float,
          provider_label: str | None, region: str | None, network: str | None,
          address: str | None, python: str | None, index_url: str | None,
          extra_index_url: tuple[str, ...],
          find_links: tuple[str, ...], no_index: bool, torch_index: str,
          metrics_interval: float, job_users: str,
          tmpfs_size: str | None, log_rate: str, log_burst: str, log_level: str) -> None:
    """Run a node agent: it dials out to the coordinator and runs the jobs placed here."""
    if ctx.invoked_subcommand is not None:
        return
    if not server:
        raise click.UsageError("--server is required, e.g. --server http://127.0.0.1:8470 "
                               "(or BOURSE_AGENT_SERVER, or server = \"...\" in agent.toml)")
    if 0 < metrics_interval < 0.5:
        raise click.BadParameter("sample at most twice a second (or 0 for never)",
                                 param_hint="--metrics-interval")
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise click.BadParameter("use letters, digits, '-', '_' and '.'", param_hint="--name")
    logging.basicConfig(level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    declared = None
    sla = None if declare_sla is None else parse_share(declare_sla, field="--declare-sla")
    if declare_gpus or declare_cpus or declare_memory is not None or sla is not None:
        if declare_gpus:
            Compute(gpu=declare_gpus)  # a wrong label fails here, not at verification
        declared = Declared(gpus=declare_gpus, cpus=declare_cpus, memory_gib=declare_memory,
                            sla=sla)
    work_dir = (work_dir or default_work_dir(os.geteuid(), Path.home())).expanduser()
    job_python = interpreter.find(python)
    logging.getLogger("bourse.agent").info("jobs run with %s (Python %s)", job_python.path,
                                           job_python.version)
    config = AgentConfig(server=server.rstrip("/"), work_dir=work_dir, name=name,
                         token=enrol_token(token, token_file), keep_alive_s=keep_alive,
                         cpus=cpus, declared=declared,
                         verify_every_s=verify_every * 3600, storage_mb=storage_mb,
                         cache_bytes=int(cache_gb * (1 << 30)) if cache_gb else None,
                         spot=spot_of(interruptible, spot_price, notice_of(
                             ctx, spot_notice, metadata_url, spot_notice_interval)),
                         provider=label(provider_label, "--provider"),
                         region=label(region, "--region"),
                         **gang_place(network, address, server),
                         sources=package_sources(index_url, extra_index_url, find_links,
                                                 no_index),
                         torch_index=torch_index, metrics_interval_s=metrics_interval,
                         job_users=job_users, tmpfs_size=tmpfs_size,
                         log_limit=LogLimit.parse(log_rate, log_burst), python=job_python)
    with hold(work_dir):  # one agent per work dir: it owns the credential and the spool
        loop.run(run_agent(config))


def package_sources(index_url: str | None, extra: tuple[str, ...], find_links: tuple[str, ...],
                    no_index: bool) -> PackageSources | None:
    """The sources the options name; None (pip's configuration) when they name none."""
    if not (index_url or extra or find_links or no_index):
        return None
    return PackageSources(index_url=index_url, extra_index_urls=extra, find_links=find_links,
                          no_index=no_index)


def spot_of(interruptible: bool, price: float | None,
            notice: tuple[str, float] | None = None) -> Spot | None:
    if price is not None and not interruptible:
        raise click.BadParameter("a spot price needs --interruptible (a node that cannot be "
                                 "reclaimed is sold on demand)", param_hint="--spot-price")
    if notice is not None and not interruptible:
        raise click.BadParameter("watching the interruption notice needs --interruptible "
                                 "(only spot capacity is reclaimed)", param_hint="--spot-notice")
    if not interruptible:
        return None
    url, every_s = notice or (None, imds.POLL_S)
    return Spot(price, notice_url=url, notice_every_s=every_s)


def notice_of(ctx: click.Context, source: str, url: str | None,
              every_s: float) -> tuple[str, float] | None:
    """(the metadata service's URL, seconds between looks) when the notice is watched."""
    if source == "none":
        if url and ctx.get_parameter_source("metadata_url") == ParameterSource.COMMANDLINE:
            raise click.BadParameter("it is read only with --spot-notice imds",
                                     param_hint="--metadata-url")
        return None
    try:
        return base_url(url or imds.DEFAULT_URL), every_s
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--metadata-url") from None


def enrol_token(token: str | None, path: Path | None) -> str | None:
    """The enrolment token, from --token or read from --token-file (not both)."""
    if path is None:
        return token
    if token is not None:
        raise click.BadParameter("give the token once: --token or --token-file",
                                 param_hint="--token-file")
    try:
        text = path.expanduser().read_text().strip()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}",
                                 param_hint="--token-file") from None
    if not text or any(c.isspace() for c in text):
        raise click.BadParameter(f"{path} does not hold one token (one line, no spaces)",
                                 param_hint="--token-file")
    return text


def gang_place(network: str | None, address: str | None, server: str) -> dict[str, str | None]:
    """``--network`` and ``--address`` checked; the address found when only the network is
    given (the one this machine reaches the coordinator from)."""
    if network is not None and not NETWORK.match(network):
        raise click.BadParameter("use 1-128 letters, digits, '.', '_', ':', '/' and '-', "
                                 "starting with a letter or digit, e.g. lab or "
                                 "aws:us-east-1a", param_hint="--network")
    if address is not None:
        try:
            address = ip_literal(address)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--address") from None
    elif network is not None:
        parsed = urlsplit(server)
        address = outbound_address(parsed.hostname or "127.0.0.1",
                                   parsed.port or (443 if parsed.scheme == "https" else 80))
        if address is None:
            raise click.BadParameter("cannot tell which address the other nodes reach this "
                                     "one at: give it", param_hint="--address")
    return {"network": network, "address": address}


def label(value: str | None, flag: str) -> str | None:
    if value is not None and not LABEL.match(value):
        raise click.BadParameter("use 1-64 letters, digits, '.', '_' and '-', starting with "
                                 "a letter or digit, e.g. us-east-1", param_hint=flag)
    return value


@agent.command("probe")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path("~/.bourse/agent"),
              show_default=True, help="Where the storage check writes (the agent's work dir).")
@click.option("--storage-mb", type=click.IntRange(min=1, max=100_000), default=100,
              show_default=True, help="MB to write, fsync and read back in the work dir.")
@click.option("--skip-checks", is_flag=True, help="Only probe: no storage or compute checks.")
@click.option("--declared-gpus", metavar="LABEL",
              help="GPUs the provider declares, e.g. a100-80gb:8; checked against the probe.")
@click.option("--declared-cpus", type=click.IntRange(min=1), help="CPUs declared.")
@click.option("--declared-memory", type=click.FloatRange(min=0), metavar="GIB",
              help="Memory declared, in GiB.")
@handles_errors
def probe_command(as_json: bool, work_dir: Path, storage_mb: int, skip_checks: bool,
                  declared_gpus: str | None, declared_cpus: int | None,
                  declared_memory: float | None) -> None:
    """Probe this machine and run the local checks, without joining an exchange.

    What a provider runs before registering a machine: GPUs, host, checks with pass/warn/fail
    and reasons, and the hardware fingerprint. Exit 0 when no check failed, 1 when one did,
    2 on bad input.
    """
    declared = Declared(gpus=declared_gpus, cpus=declared_cpus, memory_gib=declared_memory)
    any_declared = declared_gpus or declared_cpus or declared_memory is not None
    started = time.monotonic()
    report = run_probe(ProbeOptions(work_dir=work_dir.expanduser(), storage_mb=storage_mb,
                                    checks=not skip_checks))
    verification = verify(report, declared if any_declared else None)
    elapsed = time.monotonic() - started
    if as_json:
        echo_json({"report": report, "verification": verification,
                   "seconds": round(elapsed, 3)})
    else:
        click.echo(render_probe(report, verification, elapsed))
    sys.exit(EXIT_NO_RESULT if verification.status == "fail" else EXIT_OK)


ROOT_WORK_DIR = Path("/var/lib/bourse/agent")


def default_work_dir(euid: int, home: Path) -> Path:
    """Where an agent keeps its state when not told: as root, a system directory other users
    can reach (each job then runs as its own user; a private home such as /root would leave
    them out: docs/security.md) — unless an agent already enrolled in the old default, whose
    credential and spool stay where they are."""
    personal = home / ".bourse" / "agent"
    if euid != 0 or (personal / "node.json").exists():
        return personal
    return ROOT_WORK_DIR
