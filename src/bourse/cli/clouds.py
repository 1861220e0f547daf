"""``bourse clouds`` (which clouds the exchange launches on, like ``sky check``),
``bourse launches`` (the machines it launched) and ``bourse projects limits``."""

from __future__ import annotations

from typing import Any

import click

from bourse.cli import client as seam
from bourse.cli.errors import handles_errors
from bourse.cli.render import dollars, echo_json, seconds, table
from bourse.core.launch_figures import LaunchFigures, describe
from bourse.protocol.clouds import CloudList, LaunchFiguresView, LaunchView, ProjectLimitsView

CLOUD_HEADERS = ("CLOUD", "ENABLED", "REGIONS", "OFFERS", "NOTE")
LAUNCH_HEADERS = ("LAUNCH", "NODE", "STATE", "WHERE", "TYPE", "MARKET", "$/H", "UP", "BOOT",
                  "IDLE", "COST", "REASON")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def clouds(as_json: bool) -> None:
    """Which clouds this exchange launches machines on, which not and why, the regions, and
    how each delivered the machines launched there in 30 days."""
    with seam.open_client() as client:
        found = client.clouds()
    if as_json:
        echo_json(found)
        return
    click.echo(render_clouds(found))


def render_clouds(found: CloudList) -> str:
    rows = [[c.name, "yes" if c.enabled else "no", _regions(c.regions), str(c.offers),
             c.reason or (c.identity or "")] for c in found.clouds]
    lines = [table(CLOUD_HEADERS, rows, right=(3,))]
    lines += [f"{c.name} prices and zones: {c.prices}" for c in found.clouds if c.enabled]
    lines += [f"{c.name} launched: {_figures(c.launch_figures)}" for c in found.clouds
              if c.enabled and c.launch_figures is not None]
    if found.note:
        lines.append(found.note)
    if found.idle_timeout_s is not None and found.boot_timeout_s is not None:
        lines.append(f"launched nodes end after {seconds(found.idle_timeout_s)} idle; a node "
                     f"not enrolled after {seconds(found.boot_timeout_s)} is terminated")
    return "\n".join(lines)


def _figures(v: LaunchFiguresView) -> str:
    """``12 launches in 30 days: 10 ready (83%), 2 failed, median 3 min 10 s to enrol ...``"""
    return describe(LaunchFigures(v.launches, v.enrolled, v.failed, v.in_flight, v.withdrawn,
                                  v.success_rate, v.ready_median_s, v.ready_p90_s), v.window_s)


def _regions(regions: list[str]) -> str:
    if len(regions) <= 3:
        return ", ".join(regions)
    return f"{', '.join(regions[:3])} +{len(regions) - 3}"


@click.command()
@click.option("--live", is_flag=True, help="Only launches that may still have an instance.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def launches(live: bool, as_json: bool) -> None:
    """The machines the exchange launched: state, where, price, boot and idle time, cost."""
    with seam.open_client() as client:
        found = client.launches(live)
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo("no machine launched yet" + (" that is still live" if live else ""))
        return
    click.echo(render_launches(found))


def render_launches(found: list[LaunchView]) -> str:
    rows = [[v.id, v.node_name or v.node_id, v.state.value, v.zone or v.region, v.instance_type,
             "spot" if v.spot else "on-demand", f"{v.price:.4f}",
             seconds(v.up_s), "-" if v.boot_s is None else seconds(v.boot_s),
             seconds(v.idle_s), dollars(v.cost), (v.reason or "")[:60]] for v in found]
    return table(LAUNCH_HEADERS, rows, right=(6, 7, 8, 9, 10))


@click.command("limits")
@click.argument("project")
@click.option("--clouds", "cloud_names", metavar="C1,C2",
              help="The clouds the project may launch on ('' for none, 'all' for every one).")
@click.option("--cap-hour", type=click.FloatRange(min=0, max=1e6), metavar="DOLLARS",
              help="At most this many $/h of launched nodes at once.")
@click.option("--cap-day", type=click.FloatRange(min=0, max=1e6), metavar="DOLLARS",
              help="At most this many $ of launched nodes per UTC day.")
@click.option("--no-cap", is_flag=True, help="Lift both caps.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def limits(project: str, cloud_names: str | None, cap_hour: float | None,
           cap_day: float | None, no_cap: bool, as_json: bool) -> None:
    """Show a project's launch limits, or set them (admins)."""
    if no_cap and (cap_hour is not None or cap_day is not None):
        raise click.UsageError("--no-cap lifts the caps: give it alone, or give the caps")
    fields: dict[str, Any] = {}
    if cloud_names is not None:
        fields["clouds"] = (None if cloud_names.strip() == "all" else
                            [c.strip() for c in cloud_names.split(",") if c.strip()])
    if no_cap:
        fields |= {"cap_hour": None, "cap_day": None}
    fields |= {k: v for k, v in (("cap_hour", cap_hour), ("cap_day", cap_day)) if v is not None}
    with seam.open_client() as client:
        view = client.set_limits(project, **fields) if fields else client.limits(project)
    if as_json:
        echo_json(view)
        return
    click.echo(render_limits(view))


def render_limits(v: ProjectLimitsView) -> str:
    where = "every enabled cloud" if v.clouds is None else (", ".join(v.clouds) or "no cloud")
    hour = "no cap" if v.cap_hour is None else f"${v.cap_hour:.2f}/h"
    day = "no cap" if v.cap_day is None else f"${v.cap_day:.2f}/day"
    return (f"project {v.name}: launches on {where}; {hour}, {day}; launched nodes now "
            f"${v.running_per_hour:.2f}/h, ${v.spent_today:.2f} spent today")
