"""What the tracking pages show, computed from the read API's views: pure functions.

A table of runs has a column per param and per metric key any of its runs has; a param column
*differs* when its runs do not all hold the same value (a run without the param holds none),
which the comparison view highlights. Curves are laid out as uPlot takes them: one x axis (the
steps of every run, merged) and one column per run, ``null`` where a run has no point there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from bourse.protocol.tracking import RunMove, RunView, SeriesView

MISSING = "-"


@dataclass(frozen=True)
class Column:
    kind: str  # "param" or "metric"
    key: str
    differs: bool = False

    @property
    def css(self) -> str:
        """Its cells' class: a param's says whether it differs between the runs."""
        if self.kind != "param":
            return self.kind
        return f"param {'differs' if self.differs else 'same'}"


class Cell(NamedTuple):  # a tuple: a comparison of 1,000 runs makes a dozen thousand
    text: str
    sort: str  # what the table sorts on: a number as text, or the value itself
    css: str = ""  # its column's


@dataclass(frozen=True)
class Row:
    run: RunView
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]

    @property
    def differing(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.columns if c.differs)


def metric_text(value: float | None) -> str:
    """A metric value in at most six significant digits; ``NaN`` for a NaN (``None``)."""
    if value is None or math.isnan(value):
        return "NaN"
    return f"{value:.6g}"


def differs(values: Iterable[str | None]) -> bool:
    return len(set(values)) > 1


def keys_of(maps: Iterable[Mapping[str, object]]) -> list[str]:
    found: set[str] = set()
    for mapping in maps:
        found.update(mapping)
    return sorted(found)


def _param_cell(run: RunView, key: str, css: str) -> Cell:
    value = run.params.get(key)
    return Cell(MISSING, "", css) if value is None else Cell(value, value, css)


def _metric_cell(run: RunView, key: str, css: str) -> Cell:
    latest = run.metrics.get(key)
    if latest is None:
        return Cell(MISSING, "", css)
    text = metric_text(latest.value)
    return Cell(text, "" if latest.value is None else repr(latest.value), css)


def table(runs: Sequence[RunView]) -> Table:
    """The runs' params (those that differ first, flagged) and latest metrics, a row per run."""
    params = [Column("param", k, differs(r.params.get(k) for r in runs))
              for k in keys_of(r.params for r in runs)]
    params.sort(key=lambda c: not c.differs)  # stable: alphabetical within each group
    metrics = [Column("metric", k) for k in keys_of(r.metrics for r in runs)]
    columns = (*params, *metrics)
    cells = [(_param_cell if c.kind == "param" else _metric_cell, c.key, c.css)
             for c in columns]  # each column's css once, not once per run
    rows = tuple(Row(r, tuple([cell(r, key, css) for cell, key, css in cells])) for r in runs)
    return Table(columns, rows)


@dataclass(frozen=True)
class Curves:
    """One chart: a metric key's curves of several runs over the merged steps."""

    key: str
    runs: tuple[str, ...]  # the runs' labels, in the order of ``y``
    x: list[float]
    y: list[list[float | None]]
    total: int  # points stored, all runs together

    def as_json(self) -> dict[str, object]:
        return {"key": self.key, "runs": list(self.runs), "x": self.x, "y": self.y,
                "total": self.total}


def overlay(key: str, series: Sequence[SeriesView], labels: Mapping[str, str]) -> Curves:
    """The key's series of several runs on one x axis (the union of their steps)."""
    steps = sorted({step for s in series for step, _ in s.points})
    where = {step: i for i, step in enumerate(steps)}
    columns: list[list[float | None]] = []
    for s in series:
        column: list[float | None] = [None] * len(steps)
        for step, value in s.points:
            column[where[step]] = value
        columns.append(column)
    return Curves(key, tuple(labels.get(s.run_id, s.run_id) for s in series), steps, columns,
                  sum(s.total for s in series))


def overlays(series: Sequence[SeriesView], keys: Sequence[str],
             labels: Mapping[str, str]) -> list[Curves]:
    """A chart per key, in the order of ``keys``, of the runs that have points for it."""
    return [overlay(k, [s for s in series if s.key == k and s.points], labels) for k in keys]


def move_marks(moves: Sequence[RunMove]) -> list[dict[str, object]]:
    """Where a run's charts mark its moves (bursts): at the step the next attempt resumed
    from, oldest first; a move whose step is unknown (no checkpoint reported) is not drawn."""
    return [{"step": m.step, "attempt": m.attempt, "label": f"{m.from_compute} → {m.to_compute}",
             "why": m.why} for m in moves if m.step is not None]


def visible_tags(tags: Mapping[str, str]) -> list[tuple[str, str]]:
    """The run's tags, MLflow's own (``mlflow.*``) after the user's."""
    return sorted(tags.items(), key=lambda kv: (kv[0].startswith("mlflow."), kv[0]))
