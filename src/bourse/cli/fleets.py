"""``bourse fleets``: machines reached over SSH that join the exchange as nodes.

``bourse fleets add NAME --ssh user@host[:port] ...`` installs, enrols and starts the agent on
each host (``fleets.join``), in parallel; a host that fails is reported with the step and
why, and does not stop the others. ``bourse fleets`` lists the fleets with their hosts' nodes;
``bourse fleets remove NAME [--host H]`` drains the hosts and stops their agents. The fleets
are kept on this machine (``fleets.store``; docs/clouds.md says why).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

import click

from bourse.cli import client as seam
from bourse.cli.confirm import confirm, yes_option
from bourse.cli.errors import EXIT_NO_RESULT, handles_errors
from bourse.cli.nodes import last_seen
from bourse.cli.render import echo_json, money, table
from bourse.cli.suggest import SuggestingGroup
from bourse.core.agent_values import LABEL, PYTHON
from bourse.core.errors import BourseError, InvalidInput
from bourse.core.units import parse_duration, parse_share
from bourse.fleets import join as joins
from bourse.fleets import ssh as fleet_ssh
from bourse.fleets import store as fleet_store
from bourse.fleets.hosts import SshHost, SshOptions, parse_host
from bourse.fleets.join import Join, Leave, Report
from bourse.fleets.store import Fleet, FleetHost
from bourse.fleets.wheel import find_wheel
from bourse.protocol.api import EnrollmentToken, NodeView

HEADERS = ("FLEET", "HOST", "NODE", "STATE", "VERIFIED", "$/H", "NETWORK", "LAST SEEN")
REPORT_HEADERS = ("HOST", "RESULT", "STEP", "NODE", "DETAIL")
PARALLEL = 8
T = TypeVar("T")


def _ssh_options(func: click.decorators.FC) -> click.decorators.FC:
    for option in reversed((
        click.option("--identity", "-i", type=click.Path(path_type=Path),
                     help="The private key to log in with (key authentication only); "
                          "default: ssh's own (its agent, ~/.ssh/id_*)."),
        click.option("--ssh-config", type=click.Path(path_type=Path),
                     help="An ssh_config file for every host (ssh -F): ProxyJump, "
                          "UserKnownHostsFile..."),
        click.option("--accept-new-host-keys", is_flag=True,
                     help="Trust a host key seen for the first time (never a changed one); "
                          "default: the host must be in known_hosts."),
    )):
        func = option(func)
    return func


@click.group(cls=SuggestingGroup, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handles_errors
def fleets(ctx: click.Context, as_json: bool) -> None:
    """SSH fleets: their hosts, each one's node, state and last seen (`fleets add`,
    `fleets remove` or `rm`)."""
    if ctx.invoked_subcommand is not None:
        return
    with seam.open_client() as client:
        listing = fleet_store.load(client.url)
        nodes = {n.id: n for n in client.nodes()} if listing else {}
    if as_json:
        echo_json([_fleet_json(f, nodes) for f in listing])
    elif listing:
        now = time.time()
        rows = [_host_row(f, h, nodes.get(h.node_id or ""), now)
                for f in listing for h in f.hosts]
        click.echo(table(HEADERS, rows, right=(5,)))
    else:
        click.echo("no fleets (bourse fleets add NAME --ssh user@host)", err=True)


def _host_row(fleet: Fleet, host: FleetHost, node: NodeView | None, now: float) -> list[str]:
    state = "-" if node is None else ("draining" if node.drained_at else node.state)
    return [fleet.name, host.ssh, host.node_id or "-", state,
            node.verification_status if node else "-", money(fleet.price_per_hour),
            fleet.network or "-", last_seen(node, now) if node else "-"]


def _fleet_json(fleet: Fleet, nodes: dict[str, NodeView]) -> dict[str, object]:
    body = {k: v for k, v in asdict(fleet).items() if k != "hosts"}
    body["network"] = fleet.network
    body["hosts"] = [{**asdict(h), **_node_json(nodes.get(h.node_id or ""))}
                     for h in fleet.hosts]
    return body


def _node_json(node: NodeView | None) -> dict[str, object]:
    if node is None:
        return {"state": None, "verification": None, "connected": False, "last_seen": None}
    return {"state": node.state, "verification": node.verification_status,
            "connected": node.connected, "last_seen": node.last_seen,
            "drained": node.drained_at is not None}


fleets.aliases = {"rm": "remove"}


@fleets.command("add")
@click.argument("name")
@click.option("--ssh", "targets", multiple=True, required=True, metavar="USER@HOST[:PORT]",
              help="A host to add (repeatable).")
@_ssh_options
@click.option("--price-per-hour", type=float,
              help="What each host costs per hour, the whole machine, in $ (required for a "
                   "new fleet: an on-prem node is never priced at $0).")
@click.option("--region", default="on-prem", show_default=True,
              help="Where the hosts are (a site name): jobs whose data lives there prefer it.")
@click.option("--hosts-reach-each-other", is_flag=True,
              help="The hosts reach each other (one network): multi-node jobs may span them.")
@click.option("--declare-sla", metavar="SHARE",
              help="The availability the fleet promises for its hosts (99.5% or 0.995): "
                   "each node declares it, and `bourse nodes show` sets it beside what was "
                   "measured.")
@click.option("--agent-python", metavar="PATH",
              help="An interpreter on the hosts that has bourse[agent] at the coordinator's "
                   "version already; default: install it in ~/.bourse/agent-venv.")
@click.option("--wheel", type=click.Path(path_type=Path), envvar="BOURSE_AGENT_WHEEL",
              show_envvar=True, help="The bourse wheel to install on the hosts (default: "
                                    "built from this bourse's source tree).")
@click.option("--timeout", default="5m", show_default=True,
              help="How long each host may take to enrol and be verified.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def add(name: str, targets: tuple[str, ...], identity: Path | None, ssh_config: Path | None,
        accept_new_host_keys: bool, price_per_hour: float | None, region: str,
        hosts_reach_each_other: bool, declare_sla: str | None, agent_python: str | None,
        wheel: Path | None, timeout: str, as_json: bool) -> None:
    """Install the agent on each host over SSH, enrol it, start it (a systemd service where
    systemd runs and the user is root, else a detached process), and report each host."""
    fleet_store.check_name(name)
    hosts = _hosts(targets)
    options = SshOptions(identity=identity, config=ssh_config, accept_new=accept_new_host_keys)
    options.check()
    _check_add(region, agent_python, price_per_hour)
    sla = None if declare_sla is None else parse_share(declare_sla, field="--declare-sla")
    timeout_s = parse_duration(timeout, field="--timeout")
    fleet_ssh.require_client()
    with seam.open_client() as client:
        fleet = joining_fleet(client.url, name, Terms(price_per_hour, region,
                                                      hosts_reach_each_other, sla), hosts)
        tokens = [client.create_enrollment(name=joins.node_name(name, h),
                                           expires_in_s=joins.TOKEN_LIFE_S,
                                           price_per_hour=fleet.price_per_hour)
                  for h in hosts]  # one per host; the answer names the coordinator's version
    version = tokens[0].agent_version
    if not version:
        raise InvalidInput("the exchange did not say which version its agents run (a "
                           "coordinator older than `bourse fleets`)", field="--ssh",
                           hint="upgrade the coordinator first")
    join = Join(fleet=name, region=fleet.region, network=fleet.network, ssh=options,
                timeout_s=timeout_s, version=version, agent_python=agent_python,
                wheel=None if agent_python else find_wheel(version, wheel),
                declared_sla=fleet.declared_sla)
    reports = _each(list(zip(hosts, tokens, strict=True)),
                    lambda pair: _join_one(join, pair[0], pair[1]),
                    say=None if as_json else "installing the agent on")
    now = time.time()
    for host, report in zip(hosts, reports, strict=True):
        if report.ok:
            fleet.hosts.append(FleetHost(ssh=host.label, node_name=report.node_name or "",
                                         node_id=report.node_id, added_at=now))
    fleet_store.save(fleet)
    _show(reports, as_json)


def _hosts(targets: tuple[str, ...]) -> list[SshHost]:
    hosts = [parse_host(t) for t in targets]
    labels = [h.label for h in hosts]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise InvalidInput(f"--ssh {twice[0]} is given twice", field="--ssh")
    return hosts


def _check_add(region: str, agent_python: str | None, price: float | None) -> None:
    if not LABEL.match(region):
        raise InvalidInput(f"--region {region!r}: use letters, digits, '.', '_' and '-'",
                           field="--region", hint="e.g. basement-a")
    if agent_python is not None and not (PYTHON.match(agent_python)
                                         and agent_python.startswith("/")):
        raise InvalidInput(f"--agent-python {agent_python!r} is not an absolute path",
                           field="--agent-python", hint="e.g. /opt/bourse/venv/bin/python")
    if price is not None and not 0 < price <= 10_000:
        raise InvalidInput(f"--price-per-hour {price:g}: a price in $/h, above 0 and at most "
                           "10000", field="--price-per-hour")


@dataclass(frozen=True)
class Terms:
    """What ``fleets add`` was told of the fleet (None: not given)."""

    price: float | None
    region: str
    reach: bool
    sla: float | None = None


def joining_fleet(url: str, name: str, terms: Terms, hosts: list[SshHost]) -> Fleet:
    """The fleet the hosts join: the one of that name, or a new one."""
    fleets = fleet_store.load(url)
    for other in fleets:
        for host in hosts:
            if other.host(host.label) is not None:
                raise InvalidInput(f"{host.label} is in fleet {other.name} already",
                                   field="--ssh", hint=f"bourse fleets remove {other.name} "
                                                       f"--host {host.label} first")
    fleet = next((f for f in fleets if f.name == name), None)
    if fleet is None:
        if terms.price is None:
            raise InvalidInput("a new fleet needs --price-per-hour: what each host costs per "
                               "hour, in $", field="--price-per-hour",
                               hint="the exchange never sells a node at $0 by default")
        return Fleet(name=name, exchange=url, price_per_hour=terms.price, region=terms.region,
                     reach_each_other=terms.reach, created_at=time.time(),
                     declared_sla=terms.sla)
    if terms.price is not None and terms.price != fleet.price_per_hour:
        raise InvalidInput(f"fleet {name} is priced at ${money(fleet.price_per_hour)}/h",
                           field="--price-per-hour", hint="leave it out to add hosts at that "
                                                         "price")
    if terms.sla is not None and terms.sla != fleet.declared_sla:
        declared = "no SLA" if fleet.declared_sla is None else f"{fleet.declared_sla:.2%}"
        raise InvalidInput(f"fleet {name} declares {declared}", field="--declare-sla",
                           hint="leave it out to add hosts under the fleet's declaration")
    return fleet


def _join_one(join: Join, host: SshHost, token: EnrollmentToken) -> Report:
    try:
        with seam.open_client() as client:
            return joins.join(client, join, host, token)
    except BourseError as exc:  # the exchange refused: this host's report says so
        return Report(host=host.label, ok=False, step="enrol", detail=str(exc))
    except Exception as exc:  # a host's failure never stops the others
        return Report(host=host.label, ok=False, step="enrol",
                      detail=f"{type(exc).__name__}: {exc}", hint="a bug of bourse: report it")


def _each(items: Sequence[T], work: Callable[[T], Report], *, say: str | None) -> list[Report]:
    """``work`` on every host, a few at once; the reports in the hosts' order. ``say``: what
    is done to them, said on stderr at the start and as each host is done (None: quiet, as
    for --json)."""
    if say:
        click.echo(f"bourse: {say} {len(items)} host(s), {min(PARALLEL, len(items))} at once",
                   err=True)
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(items))) as pool:
        futures = [pool.submit(work, item) for item in items]
        for n, done in enumerate(as_completed(futures), 1):
            report = done.result()
            if say:
                click.echo(f"bourse: {report.host}: {'ok' if report.ok else 'failed'} at "
                           f"{report.step} ({n} of {len(futures)} done)", err=True)
        return [f.result() for f in futures]


def _show(reports: list[Report], as_json: bool) -> None:
    if as_json:
        echo_json([asdict(r) for r in reports])
    else:
        rows = [[r.host, "ok" if r.ok else "failed", r.step, r.node_id or "-",
                 r.detail + (f" (hint: {r.hint})" if r.hint and not r.ok else "")]
                for r in reports]
        click.echo(table(REPORT_HEADERS, rows))
    if not all(r.ok for r in reports):
        sys.exit(EXIT_NO_RESULT)


@fleets.command("remove")
@click.argument("name")
@click.option("--host", "only", multiple=True, metavar="USER@HOST[:PORT]",
              help="Remove only this host (repeatable); default: every host of the fleet.")
@_ssh_options
@click.option("--wait", default="1h", show_default=True,
              help="How long running work may take to finish on a drained host.")
@click.option("--force", is_flag=True,
              help="Past --wait, stop the agent anyway: its jobs are retried elsewhere.")
@click.option("--forget", is_flag=True,
              help="Drop a host from the fleet even if its agent could not be stopped.")
@yes_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def remove(name: str, only: tuple[str, ...], identity: Path | None, ssh_config: Path | None,
           accept_new_host_keys: bool, wait: str, force: bool, forget: bool, yes: bool,
           as_json: bool) -> None:
    """Drain hosts (no new work; running work finishes) and stop their agents over SSH
    (`fleets rm` too); asks first, unless -y."""
    options = SshOptions(identity=identity, config=ssh_config, accept_new=accept_new_host_keys)
    options.check()
    leave = Leave(ssh=options, wait_s=parse_duration(wait, field="--wait"), force=force)
    fleet_ssh.require_client()
    with seam.open_client() as client:
        fleet = next((f for f in fleet_store.load(client.url) if f.name == name), None)
    if fleet is None:
        raise InvalidInput(f"no fleet {name!r} on this exchange", field="NAME",
                           hint="`bourse fleets` lists them")
    chosen = _chosen(fleet, only)
    hosts = f"{len(chosen)} host(s) of fleet {name}"
    confirm(f"remove {hosts} ({', '.join(h.ssh for h in chosen[:5])}"
            f"{', ...' if len(chosen) > 5 else ''})? their agents stop once their work ends",
            yes=yes, what=f"remove {hosts}")
    reports = _each([parse_host(h.ssh) for h in chosen],
                    lambda host: _leave_one(leave, host, fleet.host(host.label)),
                    say=None if as_json else "draining")
    gone = {r.host for r in reports if r.ok or forget}
    fleet.hosts = [h for h in fleet.hosts if h.ssh not in gone]
    fleet_store.save(fleet)
    _show(reports, as_json)


def _chosen(fleet: Fleet, only: tuple[str, ...]) -> list[FleetHost]:
    if not only:
        return list(fleet.hosts)
    labels = [parse_host(h).label for h in only]
    missing = [label for label in labels if fleet.host(label) is None]
    if missing:
        raise InvalidInput(f"{missing[0]} is not a host of fleet {fleet.name}", field="--host",
                           hint="its hosts: " + ", ".join(h.ssh for h in fleet.hosts))
    return [h for h in fleet.hosts if h.ssh in labels]


def _leave_one(leave: Leave, host: SshHost, known: FleetHost | None) -> Report:
    try:
        with seam.open_client() as client:
            return joins.leave(client, leave, host, known.node_id if known else None)
    except BourseError as exc:
        return Report(host=host.label, ok=False, step="drain", detail=str(exc))
    except Exception as exc:  # a host's failure never stops the others
        return Report(host=host.label, ok=False, step="drain",
                      detail=f"{type(exc).__name__}: {exc}", hint="a bug of bourse: report it")
