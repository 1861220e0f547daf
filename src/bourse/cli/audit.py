"""``bourse audit``: the exchange's audit trail, its verification and a CSV export."""

from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Iterator
from datetime import datetime

import click

from bourse.cli import client as seam
from bourse.cli.errors import EXIT_NO_RESULT, handles_errors
from bourse.cli.render import clock, echo_json, table
from bourse.cli.suggest import SuggestingGroup
from bourse.core.errors import InvalidInput
from bourse.core.units import parse_duration
from bourse.protocol.access import AuditView
from bourse.sdk.client import Client

COLUMNS = ("id", "time", "actor", "actor_kind", "project", "source", "action", "target",
           "params", "outcome")
PAGE = 1000


def parse_since(text: str, now: float) -> float:
    """A date or time (``2026-11-01``, ``2026-11-01T09:00``; local time unless it says) or an
    age (``7d``, ``12h``)."""
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        pass
    try:
        return now - parse_duration(text, field="--since")
    except InvalidInput:
        raise InvalidInput(f"{text!r} is neither a date nor an age", field="--since",
                           hint="write 2026-11-01, 2026-11-01T09:00 or an age like 7d") from None


def records(client: Client, since: float | None) -> Iterator[AuditView]:
    """Every record from ``since`` on, page by page."""
    cursor = 0
    while True:
        page = client.audit(since=since, after=cursor, limit=PAGE)
        yield from page.records
        if len(page.records) < PAGE:
            return
        cursor = page.cursor


def csv_row(record: AuditView) -> list[str]:
    stamp = datetime.fromtimestamp(record.time).astimezone().isoformat(timespec="seconds")
    return [str(record.id), stamp, record.actor, record.actor_kind, record.project or "",
            record.source, record.action, record.target,
            json.dumps(record.params, sort_keys=True), record.outcome]


@click.group(cls=SuggestingGroup, invoke_without_command=True)
@click.option("--since", help="From this date or age on (2026-11-01, 7d); default: 1d.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handles_errors
def audit(ctx: click.Context, since: str | None, as_json: bool) -> None:
    """Recent audit records; `audit verify`, `audit export --csv`."""
    if ctx.invoked_subcommand is not None:
        return
    start = parse_since(since or "1d", time.time())
    with seam.open_client() as client:
        found = list(records(client, start))
    if as_json:
        echo_json(found)
        return
    rows = [[str(r.id), clock(r.time), r.actor, r.source, r.action, r.target, r.outcome]
            for r in found]
    click.echo(table(("ID", "TIME", "ACTOR", "SOURCE", "ACTION", "TARGET", "OUTCOME"), rows))


@audit.command("verify")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def verify(as_json: bool) -> None:
    """Recompute the hash chain and hold its end against the coordinator's seal (admin); exit
    code 1 if a row was edited, deleted or added, or the end of the trail was cut."""
    with seam.open_client() as client:
        verdict = client.verify_audit()
    if as_json:
        echo_json(verdict)
        if not verdict.ok:
            sys.exit(EXIT_NO_RESULT)
        return
    if verdict.ok:
        sealed = "" if verdict.sealed is None else f", sealed at row {verdict.sealed}"
        click.echo(f"audit trail intact: {verdict.checked} records verified{sealed}")
        return
    click.echo(f"audit trail TAMPERED ({verdict.checked} records checked):", err=True)
    for problem in verdict.problems:
        click.echo(f"  {problem}", err=True)
    sys.exit(EXIT_NO_RESULT)


@audit.command("export")
@click.option("--csv", "as_csv", is_flag=True, required=True, help="CSV on stdout.")
@click.option("--since", help="From this date or age on (2026-11-01, 30d); default: all.")
@handles_errors
def export(as_csv: bool, since: str | None) -> None:
    """Export records as CSV (with parameters as JSON), oldest first."""
    assert as_csv
    start = parse_since(since, time.time()) if since else None
    writer = csv.writer(sys.stdout)
    writer.writerow(COLUMNS)
    with seam.open_client() as client:
        for record in records(client, start):
            writer.writerow(csv_row(record))
