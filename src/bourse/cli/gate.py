"""``bourse gate RESULT --baseline BASELINE --metric NAME``: fail a CI check on a regression.

RESULT is a JSON object of metrics, or a log (what ``bourse run`` printed) whose last line
that is a JSON object holds them: an evaluation job prints ``{"accuracy": 0.97}`` as its last
line and the workflow saves ``bourse run``'s output. Exit 0: every metric within its
tolerance; 1: a regression (or a metric missing), each metric's line on stderr.
docs/ci.md has the GitHub Actions workflow.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from bourse.cli.render import echo_json
from bourse.core.gate import Check, gate, parse_tolerance


def read_metrics(path: Path) -> dict[str, Any]:
    """A JSON object, or the last line of a log that is one."""
    text = path.read_text(errors="replace")
    for candidate in [text, *reversed(text.splitlines())]:
        try:
            found = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    raise click.BadParameter(f"{path} holds no JSON object (nor a line that is one)",
                             param_hint="RESULT")


@click.command("gate")
@click.argument("result", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--baseline", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The baseline's metrics (a JSON object).")
@click.option("--metric", "metrics", multiple=True, required=True, metavar="NAME",
              help="A metric to gate on (repeatable); higher is better unless --lower.")
@click.option("--lower", "lower", multiple=True, metavar="NAME",
              help="A metric where lower is better (a loss); repeatable.")
@click.option("--tolerance", default="0", show_default=True,
              help="The largest worsening accepted: absolute (0.01) or relative (1%).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def gate_command(result: Path, baseline: Path, metrics: tuple[str, ...],
                 lower: tuple[str, ...], tolerance: str, as_json: bool) -> None:
    """Compare a run's metrics with a baseline; exit 1 on a regression."""
    try:
        amount, relative = parse_tolerance(tolerance)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--tolerance") from None
    checks = [Check(m, m in lower, amount, relative) for m in dict.fromkeys(metrics + lower)]
    outcomes = gate(checks, read_metrics(result), read_metrics(baseline))
    if as_json:
        echo_json([{"metric": o.metric, "passed": o.passed, "message": o.message}
                   for o in outcomes])
    else:
        for o in outcomes:
            click.echo(f"{'ok  ' if o.passed else 'FAIL'} {o.message}", err=True)
    sys.exit(0 if all(o.passed for o in outcomes) else 1)
