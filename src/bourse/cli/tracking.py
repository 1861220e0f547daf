"""Experiment tracking's reading commands: ``bourse experiments``, ``bourse runs compare A B
C`` (params side by side, the differing ones marked; each metric's latest, min and max) and
``bourse metrics RUN KEY`` (a curve, downsampled on the server, as a table, CSV or JSON)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import click

from bourse.cli import client as seam
from bourse.cli.errors import handles_errors
from bourse.cli.render import clock, echo_json, table
from bourse.core.errors import InvalidInput
from bourse.protocol.tracking import SeriesView, TrackedRunDetail
from bourse.sdk.tracking import MAX_POINTS

DIFFERS = "*"  # marks a param whose value is not the same in every run
MAX_COMPARED = 100  # runs of one comparison (the chart API's limit)
KEYS_PER_CALL = 20


@click.command("experiments")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def experiments(as_json: bool) -> None:
    """List the project's tracking experiments (an app's jobs log to the app's, the others
    to Default, id 0); `bourse runs compare` and `bourse metrics` read their runs."""
    with seam.open_client() as client:
        found = client.experiments()
    if as_json:
        echo_json(found)
        return
    rows = [[e.experiment_id, e.name, e.lifecycle_stage, clock(e.created_at)] for e in found]
    click.echo(table(("ID", "NAME", "STAGE", "CREATED"), rows))


def value_text(value: float | None) -> str:
    return "NaN" if value is None or math.isnan(value) else f"{value:.6g}"


@dataclass(frozen=True)
class Extremes:
    low: float | None
    high: float | None
    exact: bool  # from every point (False: from the downsampled curve)


def extremes(series: SeriesView) -> Extremes:
    """The curve's lowest and highest value; exact when the server sent every point."""
    values = [v for _, v in series.points]
    exact = series.total <= len(series.points) or not values
    return Extremes(min(values) if values else None, max(values) if values else None, exact)


@dataclass(frozen=True)
class Comparison:
    runs: list[TrackedRunDetail]
    params: list[tuple[str, bool]]  # key, differs
    extremes: dict[tuple[str, str], Extremes]  # (run, key)

    @property
    def keys(self) -> list[str]:
        return sorted({k for r in self.runs for k in r.metrics})

    def as_json(self) -> dict[str, object]:
        return {"runs": [r.model_dump(mode="json") for r in self.runs],
                "differing_params": [k for k, d in self.params if d],
                "metrics": {r.run_id: {k: _metric_json(r, k, self.extremes.get((r.run_id, k)))
                                       for k in sorted(r.metrics)} for r in self.runs}}


def _metric_json(run: TrackedRunDetail, key: str, found: Extremes | None) -> dict[str, object]:
    latest = run.metrics[key]
    return {"latest": latest.value, "step": latest.step, "count": latest.count,
            "min": found.low if found else None, "max": found.high if found else None,
            "exact": found.exact if found else True}


def param_rows(runs: Sequence[TrackedRunDetail]) -> list[tuple[str, bool]]:
    keys = sorted({k for r in runs for k in r.params})
    return [(k, len({r.params.get(k) for r in runs}) > 1) for k in keys]


def describe(found: Comparison) -> list[str]:
    names = [r.name or r.run_id for r in found.runs]
    params = [[f"{DIFFERS} {k}" if differs else f"  {k}", *(r.params.get(k, "-")
                                                          for r in found.runs)]
              for k, differs in found.params]
    lines = [table(("PARAM", *names), params) if params else "no params", ""]
    metrics = [[key, *(_metric_cell(r, key, found.extremes.get((r.run_id, key)))
                       for r in found.runs)] for key in found.keys]
    lines.append(table(("METRIC (latest min..max)", *names), metrics) if metrics
                 else "no metrics")
    if any(not e.exact for e in found.extremes.values()):
        lines.append(f"~: min..max of the curve downsampled to {MAX_POINTS:,} points")
    if any(differs for _, differs in found.params):
        lines.append(f"{DIFFERS}: the param differs between the runs")
    return lines


def _metric_cell(run: TrackedRunDetail, key: str, found: Extremes | None) -> str:
    latest = run.metrics.get(key)
    if latest is None:
        return "-"
    if found is None or found.low is None:
        return value_text(latest.value)
    mark = "" if found.exact else "~"
    return f"{value_text(latest.value)} {mark}{value_text(found.low)}..{value_text(found.high)}"


def compared(run_ids: Sequence[str]) -> Comparison:
    with seam.open_client() as client:
        runs = [client.tracked_run(r) for r in run_ids]
        keys = sorted({k for r in runs for k in r.metrics})
        found: dict[tuple[str, str], Extremes] = {}
        for start in range(0, len(keys), KEYS_PER_CALL):
            chart = client.chart(run_ids, keys[start:start + KEYS_PER_CALL], MAX_POINTS)
            found |= {(s.run_id, s.key): extremes(s) for s in chart.series if s.total}
    return Comparison(runs, param_rows(runs), found)


@click.command("compare")
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN...")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def compare(run_ids: tuple[str, ...], as_json: bool) -> None:
    """Tracking runs side by side (a job's id names its run): their params, those that
    differ marked *, and each metric's latest value, min and max."""
    unique = list(dict.fromkeys(run_ids))
    if len(unique) > MAX_COMPARED:
        raise InvalidInput(f"at most {MAX_COMPARED} runs at once, not {len(unique)}",
                           hint="the UI's comparison page takes a search of 1,000")
    found = compared(unique)
    if as_json:
        echo_json(found.as_json())
    else:
        click.echo("\n".join(describe(found)))


def series_csv(series: SeriesView) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("step", series.key))
    writer.writerows((f"{step:g}", repr(value)) for step, value in series.points)
    return out.getvalue()


@click.command("metrics")
@click.argument("run_id")
@click.argument("key")
@click.option("--points", type=click.IntRange(3, MAX_POINTS), default=1000, show_default=True,
              help="Downsample (on the server, LTTB) to at most this many points.")
@click.option("--csv", "as_csv", is_flag=True, help="step,value lines, for a spreadsheet.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def metrics(run_id: str, key: str, points: int, as_csv: bool, as_json: bool) -> None:
    """A tracking run's curve of metric KEY (a job's id names its run); for a job's CPU,
    memory and GPU use see `bourse jobs metrics JOB`."""
    with seam.open_client() as client:
        series = client.metric(run_id, key, points)
    if as_json:
        echo_json(series)
    elif as_csv:
        click.echo(series_csv(series), nl=False)
    else:
        rows = [[f"{step:g}", value_text(value)] for step, value in series.points]
        click.echo(table(("STEP", key.upper()), rows, right=(0, 1)) if rows
                   else f"no points of {key!r} in run {run_id}")
    if series.total > len(series.points):
        click.echo(f"{len(series.points):,} of {series.total:,} points (downsampled; "
                   f"--points up to {MAX_POINTS:,})", err=True)
