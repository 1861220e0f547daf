"""``bourse cost``: what the exchange's attempts cost, by day, node, job or project."""

from __future__ import annotations

import time

import click

from bourse.cli import client as seam
from bourse.cli.errors import handles_errors
from bourse.cli.render import dollars, echo_json, seconds, table
from bourse.core.cost import saving
from bourse.core.units import parse_duration
from bourse.protocol.api import CostRow
from bourse.protocol.clouds import LaunchView

HEADERS = ("{by}", "ATTEMPTS", "PREEMPTED", "COST", "ON DEMAND", "SAVED", "LOST WORK")


@click.command()
@click.option("--by", type=click.Choice(["day", "node", "job", "project"]), default="day",
              show_default=True, help="How to group attempts.")
@click.option("--since", help="Only attempts started this long ago or later, e.g. 7d, 12h.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def cost(by: str, since: str | None, as_json: bool) -> None:
    """Cost of the attempts that ran, against the same work at on-demand list prices; SAVED is
    what spot capacity saved against its on-demand price."""
    start = time.time() - parse_duration(since, field="--since") if since else None
    with seam.open_client() as client:
        summary = client.cost(by, start)
    if as_json:
        echo_json(summary)
        return
    rows = [_row(r) for r in [*summary.rows, summary.total]]
    headers = (by.upper(), *HEADERS[1:])
    click.echo(table(headers, rows, right=(1, 2, 3, 4, 5, 6)))
    if summary.launched:
        click.echo("\nlaunched nodes (launch to termination, at their price):")
        click.echo(launched_table(summary.launched))


LAUNCHED_HEADERS = ("NODE", "JOB", "TYPE", "MARKET", "UP", "BOOT", "BUSY", "IDLE", "COST",
                    "ON DEMAND", "SAVED")


def launched_table(views: list[LaunchView]) -> str:
    """Each launched node's cost, its boot and idle time apart from the time jobs ran, and
    for spot nodes what they saved against the same hours on demand."""
    rows = []
    for v in views:
        up = v.up_s
        on_demand = None if v.on_demand is None else up / 3600 * v.on_demand
        saved = saving(v.cost, on_demand) if v.spot else None
        rows.append([v.node_name or v.node_id, v.job_id or "-", v.instance_type,
                     "spot" if v.spot else "on-demand", seconds(up),
                     "-" if v.boot_s is None else seconds(v.boot_s), seconds(v.busy_s),
                     seconds(v.idle_s), dollars(v.cost), dollars(on_demand),
                     "-" if saved is None else f"{100 * saved:.0f} %"])
    total = sum(v.cost for v in views)
    rows.append(["total", "", "", "", "", "", "", "", dollars(total), "", ""])
    return table(LAUNCHED_HEADERS, rows, right=(4, 5, 6, 7, 8, 9, 10))


def _row(row: CostRow) -> list[str]:
    """SAVED compares spot attempts only with the same capacity on demand: an on-demand
    attempt saves nothing."""
    saved = saving(row.spot_cost, row.spot_on_demand_cost)
    return [row.key, str(row.attempts), str(row.preempted), dollars(row.cost),
            dollars(row.on_demand_cost), "-" if saved is None else f"{100 * saved:.0f} %",
            seconds(row.lost_work_s)]
