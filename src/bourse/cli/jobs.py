"""``bourse jobs``, ``bourse jobs show`` and ``bourse stop``: jobs on the exchange."""

from __future__ import annotations

import shlex
import time

import click

from bourse.cli import client as seam
from bourse.cli import complete
from bourse.cli.confirm import confirm, yes_option
from bourse.cli.data import data_facts
from bourse.cli.errors import handles_errors
from bourse.cli.metrics import metrics
from bourse.cli.render import age, clock, dollars, echo_json, seconds, shorten, table
from bourse.cli.suggest import SuggestingGroup
from bourse.core.states import JobState
from bourse.protocol.api import AttemptView, EventView, JobDetail, JobView
from bourse.sdk.client import Client

STATES = tuple(s.value for s in JobState)
UNFINISHED = tuple(s.value for s in JobState if not s.terminal)
STOP_LIMIT = 10000  # jobs stopped by one --all or --state (the exchange's largest page)
HEADERS = ("ID", "NAME", "STATE", "NODE", "AGE", "COMMAND")
ATTEMPT_HEADERS = ("#", "NODE", "STATE", "PLACED", "STARTED", "ENDED", "EXIT", "$/H", "COST",
                   "LOST", "REASON")


def job_row(job: JobView, now: float) -> list[str]:
    return [job.id, job.name or "-", job.state, node_of(job), age(now - job.created_at),
            shorten(shlex.join(job.spec.command), 50)]


@click.group(cls=SuggestingGroup, invoke_without_command=True)
@click.option("--state", type=click.Choice(STATES, case_sensitive=False),
              help="Only jobs in this state.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--before", metavar="JOB_ID",
              help="Only jobs older than this one: the next page after a listing ended "
                   "there.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handles_errors
def jobs(ctx: click.Context, state: str | None, limit: int, before: str | None,
         as_json: bool) -> None:
    """List jobs, newest first (a page of --limit; --before pages on); `bourse jobs show ID`
    for one."""
    if ctx.invoked_subcommand is not None:
        return
    with seam.open_client() as client:
        page = client.jobs_page(state, limit, before=before)
    if as_json:
        echo_json(page.jobs)
    elif page.jobs:
        now = time.time()
        click.echo(table(HEADERS, [job_row(j, now) for j in page.jobs]))
    else:
        click.echo("no jobs" + (f" in state {state.upper()}" if state else "")
                   + (f" older than {before}" if before else ""), err=True)
    if page.next and not as_json:
        click.echo(f"older jobs: bourse jobs --before {page.next}"
                   + (f" --state {state.upper()}" if state else ""), err=True)


def node_of(job: JobView) -> str:
    """The job's node by name (its id when the node is another project's), ``-`` for none."""
    return job.node_name or job.node_id or "-"


@jobs.command("show")
@click.argument("job_id", shell_complete=complete.job_ids)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def show(job_id: str, as_json: bool) -> None:
    """A job's spec, state, timeline and attempts."""
    with seam.open_client() as client:
        detail = client.job(job_id)
        timeline = client.events(job_id)
    if as_json:
        echo_json({**detail.model_dump(mode="json"),
                   "events": [e.model_dump(mode="json") for e in timeline]})
    else:
        click.echo("\n".join(describe_job(detail, timeline)))


def describe_job(job: JobDetail, timeline: list[EventView]) -> list[str]:
    lines = [line for k, v in _facts(job).items() if v is not None for line in fact(k, v)]
    if timeline:
        lines += ["", "timeline"] + [f"  {_event_line(e)}" for e in timeline]
    if job.attempts:
        gang = job.spec.compute.num_nodes > 1
        rows = [_attempt_row(a, gang) for a in job.attempts]
        lines += ["", "attempts", _indent(table(ATTEMPT_HEADERS, rows, right=(0, 6, 7, 8, 9)))]
        lines += [f"  placement #{a.number}{f'.{a.rank}' if gang else ''}: {a.placement}"
                  for a in job.attempts if a.placement]
    return lines


def fact(key: str, value: str) -> list[str]:
    """``key  value``; the lines after a value's first (the matcher's table of why a job
    waits) are indented under it."""
    first, *rest = value.splitlines() or [""]
    return [f"{key:<10} {first}", *(f"{'':<10} {line}".rstrip() for line in rest)]


def _facts(job: JobDetail) -> dict[str, str | None]:
    spec = job.spec
    ended = job.state.terminal
    return {
        "id": job.id, "name": job.name,
        "state": job.state + (" (stop requested)" if job.cancel_requested and not ended else ""),
        "pending": job.pending_reason if job.state == JobState.PENDING else None,
        "command": shlex.join(spec.command), "compute": spec.compute.describe(),
        "code": spec.bundle[:12] if spec.bundle else "none",
        "workdir": spec.workdir or None,
        "env": ", ".join(sorted(spec.env)) or None,  # names only: values may be secrets
        **data_facts(job),
        "ports": ", ".join(f"{p.number} (/jobs/{job.id}/ports/{p.number}/)" for p in spec.ports)
        or None,
        "retries": f"up to {spec.max_retries}",
        "attempt": str(job.attempt) if job.attempt else None,
        "node": _node_fact(job), "created": clock(job.created_at), "updated": clock(job.updated_at),
        "exit code": None if job.exit_code is None else str(job.exit_code),
        "cost": None if job.cost is None else dollars(job.cost),
        "on demand": None if job.on_demand_cost is None else
        f"{dollars(job.on_demand_cost)} (the same work at on-demand list prices)",
        "lost work": None if job.lost_work_s is None else
        f"{seconds(job.lost_work_s)} (since the last checkpoint, over all attempts)",
        "reason": job.reason,
        "stalled": job.stalled.message if job.stalled else None,
    }


def _node_fact(job: JobDetail) -> str | None:
    if job.node_name and job.node_id:
        return f"{job.node_name} ({job.node_id})"
    return job.node_id


def _event_line(event: EventView) -> str:
    parts = [clock(event.time), f"#{event.attempt}" if event.attempt else "  ", event.kind]
    parts += [p for p in (event.state, event.message) if p]
    return "  ".join(parts)


def _attempt_row(a: AttemptView, gang: bool) -> list[str]:
    number = f"{a.number}.{a.rank}" if gang else str(a.number)  # a gang's: attempt.rank
    return [number, a.node_name or a.node_id, a.state, clock(a.placed_at),
            clock(a.started_at), clock(a.ended_at),
            "-" if a.exit_code is None else str(a.exit_code),
            dollars(a.price_per_hour) + (" spot" if a.spot else ""),
            dollars(a.cost), "-" if a.lost_work_s is None else seconds(a.lost_work_s),
            a.reason or "-"]


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


@click.command()
@click.argument("job_ids", nargs=-1, shell_complete=complete.job_ids)
@click.option("--all", "every", is_flag=True, help="Every job of the project that has not ended.")
@click.option("--state", type=click.Choice(UNFINISHED, case_sensitive=False),
              help="Every job in this state.")
@yes_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def stop(job_ids: tuple[str, ...], every: bool, state: str | None, yes: bool,
         as_json: bool) -> None:
    """Cancel jobs: pending ones end now, running ones are stopped on their node. More than
    one job, --all or --state asks first (-y does not)."""
    chosen = _choice(job_ids, every, state)
    with seam.open_client() as client:
        targets = list(job_ids) or _unfinished(client, state)
        if not targets:
            click.echo("no jobs to stop", err=True)
            if as_json:
                echo_json([])
            return
        if len(targets) > 1 or chosen:
            listed = ", ".join(targets[:5]) + (", ..." if len(targets) > 5 else "")
            what = f"stop {len(targets)} job{'s' if len(targets) > 1 else ''}"
            confirm(f"{what} ({listed})?", yes=yes, what=what)
        stopped = [client.cancel(job_id) for job_id in targets]
    if as_json:
        echo_json(stopped)
        return
    for view in stopped:
        click.echo(f"{view.id}: {view.state if view.state.terminal else 'stopping'}")


def _choice(job_ids: tuple[str, ...], every: bool, state: str | None) -> bool:
    """Whether the jobs are chosen by a filter (--all, --state) rather than named."""
    if job_ids and (every or state):
        raise click.UsageError("name jobs or choose them with --all/--state, not both")
    if every and state:
        raise click.UsageError("--all already stops every state: drop --state")
    if not (job_ids or every or state):
        raise click.UsageError("name the jobs to stop (bourse stop ID...), or pass --all or "
                               "--state STATE")
    return every or state is not None


def _unfinished(client: Client, state: str | None) -> list[str]:
    """The ids of the jobs --all or --state chose, oldest first, skipping those already told
    to stop."""
    found = client.jobs(state.upper() if state else None, STOP_LIMIT)
    return [j.id for j in reversed(found) if not j.state.terminal and not j.cancel_requested]


jobs.add_command(metrics)
