"""``bourse nodes``, ``bourse nodes show`` and ``bourse nodes providers``: the machines that
run jobs, and what was measured of them."""

from __future__ import annotations

import time
from collections import Counter

import click

from bourse.cli import client as seam
from bourse.cli import complete
from bourse.cli.confirm import confirm, yes_option
from bourse.cli.errors import handles_errors
from bourse.cli.render import age, clock, echo_json, money, table
from bourse.cli.suggest import SuggestingGroup
from bourse.cli.verification import render_probe
from bourse.core.errors import InvalidInput
from bourse.core.reliability import Reliability, against_declared, period
from bourse.core.reliability import describe as describe_reliability
from bourse.core.units import parse_duration
from bourse.protocol.api import NodeView, ProviderReliabilityView, ReliabilityView
from bourse.protocol.common import Capabilities
from bourse.sdk.client import Client
from bourse.sdk.errors import ApiNotFound

HEADERS = ("ID", "NAME", "STATE", "VERIFIED", "CPUS", "MEMORY", "GPUS", "LAST SEEN",
           "RUNNING")


def gpu_summary(caps: Capabilities | None) -> str:
    """``2x h100-80gb`` (several models joined with ``+``), ``-`` for none."""
    if caps is None or not caps.gpus:
        return "-"
    counts = Counter(g.model or g.name for g in caps.gpus)
    return " + ".join(f"{n}x {model}" for model, n in sorted(counts.items()))


def last_seen(node: NodeView, now: float) -> str:
    if node.connected:
        return "now"
    return "-" if node.last_seen is None else f"{age(now - node.last_seen)} ago"


def node_row(node: NodeView, now: float) -> list[str]:
    caps = node.capabilities
    state = f"{node.state} (drained)" if node.drained_at is not None else node.state
    return [node.id, node.name, state, node.verification_status,
            str(caps.cpus) if caps else "-",
            f"{caps.memory_gib:.0f}GiB" if caps else "-", gpu_summary(caps),
            last_seen(node, now), str(len(node.running))]


@click.group(cls=SuggestingGroup, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handles_errors
def nodes(ctx: click.Context, as_json: bool) -> None:
    """List the nodes enrolled on the exchange; `bourse nodes show ID` for one."""
    if ctx.invoked_subcommand is not None:
        return
    with seam.open_client() as client:
        listing = client.nodes()
    if as_json:
        echo_json(listing)
    elif listing:
        now = time.time()
        click.echo(table(HEADERS, [node_row(n, now) for n in listing], right=(3, 4, 7)))
    else:
        click.echo("no nodes enrolled", err=True)


@nodes.command("show")
@click.argument("node_id", metavar="NODE", shell_complete=complete.node_refs)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def show(node_id: str, as_json: bool) -> None:
    """A node's capabilities, state, verification report and running jobs (NODE: its id or
    its name)."""
    with seam.open_client() as client:
        node = find_node(client, node_id)
    if as_json:
        echo_json(node)
    else:
        click.echo("\n".join(describe_node(node, time.time())))


PROVIDER_HEADERS = ("PROVIDER", "NODES", "WATCHED", "AVAILABLE", "INTERRUPTED", "PER H",
                    "SCORE", "DECLARED")


@nodes.command("providers")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def providers(as_json: bool) -> None:
    """What the exchange measured of each provider's nodes together (those heard in the last
    30 days): availability, interruptions, score, and its declared SLA."""
    with seam.open_client() as client:
        found = client.providers()
    if as_json:
        echo_json(found)
    elif found:
        click.echo(table(PROVIDER_HEADERS, [provider_row(p) for p in found],
                         right=(1, 2, 3, 4, 5, 6, 7)))
    else:
        click.echo("no nodes enrolled", err=True)


def provider_row(view: ProviderReliabilityView) -> list[str]:
    r = view.reliability
    rate = "-" if r.interruptions_per_hour is None else f"{r.interruptions_per_hour:.2f}"
    score = "-" if r.score is None else f"{r.score:.1%}"
    declared = "-" if r.declared is None else f"{r.declared:.1%}" + (
        "" if r.meets_declared is None else " (met)" if r.meets_declared else " (missed)")
    return [view.provider, str(view.nodes), period(r.observed_s), f"{r.availability:.1%}",
            f"{r.attempts_interrupted}/{r.attempts_ended}", rate, score, declared]


def find_node(client: Client, ref: str) -> NodeView:
    """The node with id ``ref``, else the one node named ``ref`` (names need not be unique)."""
    try:
        return client.node(ref)
    except ApiNotFound:
        named = [n for n in client.nodes() if n.name == ref]
        if len(named) != 1:
            if named:
                raise InvalidInput(f"{len(named)} nodes are named {ref!r}", field="NODE",
                                   hint="name one by its id: " + ", ".join(
                                       n.id for n in named)) from None
            raise
        return client.node(named[0].id)


def reliability_line(view: ReliabilityView) -> str:
    """What the exchange measured of the node (``core.reliability.describe``), and what its
    provider declared beside it."""
    measured = Reliability(
        observed_s=view.observed_s, availability=view.availability,
        ended=view.attempts_ended, interrupted=view.attempts_interrupted, work_h=view.work_h,
        interruptions_per_hour=view.interruptions_per_hour, score=view.score)
    declared = against_declared(view.declared, measured)
    return describe_reliability(measured) + (f"; {declared}" if declared else "")


def describe_node(node: NodeView, now: float) -> list[str]:
    caps = node.capabilities
    facts: dict[str, str | None] = {
        "id": node.id, "name": node.name, "state": node.state + (
            f" (drained {clock(node.drained_at)}: no new work)" if node.drained_at else ""),
        "connected": "yes" if node.connected else "no", "last seen": last_seen(node, now),
        "keep-alive": f"{node.keep_alive_s:g}s", "price": money(node.price) + "/h"
        if node.price is not None else None,
        "running": ", ".join(node.running) or "nothing", "enrolled": clock(node.created_at),
        "tags": ", ".join(node.tags) or None,
        "reliability": reliability_line(node.reliability) if node.reliability else None,
    }
    if caps is not None:
        facts |= _capabilities(caps)
    facts["verification"] = node.verification_status + (
        f" (since {clock(node.verified_at)})" if node.verified_at else "")
    lines = [f"{k:<12} {v}" for k, v in facts.items() if v]
    if caps is not None and node.report is None:
        lines += [f"  gpu {i}: {g.name}" + (f" ({g.memory_mib} MiB)" if g.memory_mib else "")
                  for i, g in enumerate(caps.gpus)]
    if node.report is not None and node.verification is not None:
        lines += ["", "Verification report (measured by the agent, judged by the exchange)",
                  *("  " + line for line in
                    render_probe(node.report, node.verification).splitlines())]
    return lines


def _capabilities(caps: Capabilities) -> dict[str, str | None]:
    return {
        "hostname": caps.hostname or None, "os": caps.os or None,
        "cpus": f"{caps.cpus}" + (f" ({caps.cpu_model})" if caps.cpu_model else ""),
        "memory": f"{caps.memory_gib:.1f} GiB", "disk free": f"{caps.disk_free_gib:.1f} GiB",
        "gpus": gpu_summary(caps), "driver": caps.driver, "python": caps.python or None,
        "job python": _job_python(caps), "agent": caps.agent_version or None,
        "spot": (f"interruptible at {money(caps.spot_price)}/h" if caps.spot_price
                 else "interruptible") if caps.interruptible else None,
        "provider": caps.provider, "region": caps.region,
    }


def _job_python(caps: Capabilities) -> str | None:
    """The Python the node's jobs run with, as its agent checked it at start."""
    found = caps.job_python
    if found is None:
        return None  # an older agent: jobs get whatever python is first on its PATH
    return f"{found.path} ({found.version})" if found.version else found.path


@nodes.command("reclaim")
@click.argument("node_id", shell_complete=complete.node_ids)
@click.option("--notice", default="30s", show_default=True,
              help="Time the node's jobs get to checkpoint and exit (SIGTERM, then SIGKILL), "
                   "e.g. 30s, 2m.")
@click.option("--reason", help="Why, for the jobs' timelines.")
@yes_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def reclaim(node_id: str, notice: str, reason: str | None, yes: bool, as_json: bool) -> None:
    """Reclaim an interruptible node (admin): its jobs get a preemption notice and are
    retried elsewhere, resuming from their last checkpoint (asks first; -y does not)."""
    notice_s = parse_duration(notice, field="--notice")
    if notice_s > 3600:
        raise InvalidInput(f"--notice {notice}: at most an hour", field="--notice")
    confirm(f"reclaim node {node_id}? its jobs get {notice_s:g} s to stop", yes=yes,
            what=f"reclaim node {node_id}")
    with seam.open_client() as client:
        result = client.reclaim(node_id, notice_s, reason)
    if as_json:
        echo_json(result)
        return
    jobs = ", ".join(result.attempts) or "no running jobs"
    click.echo(f"node {result.node_id} reclaimed with {result.notice_s:g} s notice: {jobs}")


@nodes.command("tag")
@click.argument("node_id", shell_complete=complete.node_ids)
@click.argument("tags", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def tag(node_id: str, tags: tuple[str, ...], as_json: bool) -> None:
    """Set a node's compliance tags (admin); no TAGS clears them."""
    with seam.open_client() as client:
        node = client.set_node_tags(node_id, tags)
    if as_json:
        echo_json(node)
        return
    click.echo(f"{node.id}: {', '.join(node.tags) or 'no tags'}", err=True)


@nodes.command("enroll")
@click.option("--name", help="A label for the token (the node picks its own name).")
@click.option("--expires", "expires_h", type=click.FloatRange(min=0.01, max=24 * 365),
              default=24.0, show_default=True, help="Hours until the token expires.")
@click.option("--project", help="The project the node joins (admins; default: your own).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def enroll(name: str | None, expires_h: float, project: str | None, as_json: bool) -> None:
    """Create a one-time enrolment token for a new node (admin or provider)."""
    with seam.open_client() as client:
        token = client.create_enrollment(name=name, expires_in_s=expires_h * 3600,
                                         project=project)
        url = client.url
    if as_json:
        echo_json({"token": token.token, "expires_at": token.expires_at, "server": url})
        return
    click.echo(token.token)
    click.echo(f"on the new node (valid until {clock(token.expires_at)}, usable once):\n"
               f"  bourse agent --server {url} --token {token.token}", err=True)
