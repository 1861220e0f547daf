"""``bourse runs``, ``bourse runs show RUN`` and ``bourse runs stop RUN``: app runs on the
exchange, their jobs, and cancelling one."""

from __future__ import annotations

import time
from collections.abc import Sequence

import click

from bourse.cli import client as seam
from bourse.cli.confirm import confirm, yes_option
from bourse.cli.errors import handles_errors
from bourse.cli.render import age, clock, dollars, echo_json, table
from bourse.cli.suggest import SuggestingGroup
from bourse.cli.tracking import compare
from bourse.protocol.api import JobView, RunDetail, RunView

HEADERS = ("RUN", "APP", "STATE", "STAGES", "STARTED", "DURATION", "COST")
JOB_HEADERS = ("STAGE", "JOB", "STATE", "NODE", "DURATION", "COST", "AFTER")


def run_row(run: RunView, now: float) -> list[str]:
    return [run.id, run.app or "-", run.state, str(run.stages), clock(run.started_at),
            age((run.ended_at or now) - run.started_at), dollars(run.cost)]


def job_row(job: JobView, now: float, after: Sequence[str] = ()) -> list[str]:
    """A job of a run; ``after``: the stages whose outputs its stage reads."""
    ended = job.updated_at if job.state.terminal else now
    return [job.spec.stage or "(driver)", job.id, job.state, job.node_name or job.node_id or "-",
            age(ended - job.created_at), dollars(job.cost), ", ".join(after) or "-"]


@click.group(cls=SuggestingGroup, invoke_without_command=True)
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--app", metavar="NAME",
              help="Only runs of apps whose file name contains NAME (any case), e.g. digits.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handles_errors
def runs(ctx: click.Context, limit: int, app: str | None, as_json: bool) -> None:
    """List app runs (`bourse run app.py`), newest first; `bourse runs show RUN` for one,
    `bourse runs stop RUN` to cancel one; `bourse runs compare A B` compares tracking runs."""
    if ctx.invoked_subcommand is not None:
        return
    with seam.open_client() as client:
        listing = client.runs(limit, app)
    if as_json:
        echo_json(listing)
    elif listing:
        now = time.time()
        click.echo(table(HEADERS, [run_row(r, now) for r in listing], right=(3, 6)))
    else:
        click.echo("no runs" + (f" of an app named like {app!r}" if app else ""), err=True)


@runs.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def show(run_id: str, as_json: bool) -> None:
    """A run and its jobs: the flow driver (when detached) and each stage."""
    with seam.open_client() as client:
        detail = client.run(run_id)
    if as_json:
        echo_json(detail)
    else:
        click.echo("\n".join(describe_run(detail, time.time())))


@runs.command("stop")
@click.argument("run_id")
@yes_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def stop(run_id: str, yes: bool, as_json: bool) -> None:
    """Cancel a run: its jobs that have not ended (a detached run's driver included), and
    any stage it would submit later (asks first; -y does not)."""
    confirm(f"stop run {run_id} and every job of it?", yes=yes, what=f"stop run {run_id}")
    with seam.open_client() as client:
        cancelled = client.cancel_run(run_id, "stopped with `bourse runs stop`")
    if as_json:
        echo_json(cancelled)
        return
    jobs = ", ".join(cancelled.jobs) or "none was running"
    click.echo(f"run {cancelled.run} cancelled ({cancelled.reason}); jobs stopped: {jobs}",
               err=True)


def describe_run(run: RunDetail, now: float) -> list[str]:
    facts = {"run": run.id, "app": run.app, "state": run.state, "started": clock(run.started_at),
             "ended": clock(run.ended_at) if run.ended_at else None,
             "cost": dollars(run.cost) if run.cost is not None else None, "driver": run.driver,
             "cancelled": run.cancelled}
    lines = [f"{k:<9} {v}" for k, v in facts.items() if v is not None]
    after: dict[str, list[str]] = {}
    for edge in run.edges:
        after.setdefault(edge.target, []).append(edge.source)
    rows = [job_row(j, now, after.get(j.spec.stage or "", ())) for j in run.jobs]
    return [*lines, "", table(JOB_HEADERS, rows, right=(5,))]


runs.add_command(compare)
