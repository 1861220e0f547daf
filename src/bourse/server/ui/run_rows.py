"""The rows of a runs table (``tracking/_table.html``) as HTML, built here rather than by the
template's loops: a comparison holds up to 1,000 runs of a dozen cells each, which the loops
rendered in more than half of the page's time (benchmarks/tracking.py). Every value is
escaped as the templates' autoescape does (``&<>"'``, by one ``str.translate``); the markup
is the template's."""

from __future__ import annotations

from markupsafe import Markup

from bourse.server.ui.comparison import Cell, Row, Table

PAGE_ROWS = 100  # a comparison's table shows this many rows at a time (``tracking.js``)
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;"})


def escape(text: str) -> str:
    return text.translate(_ESCAPES)


def run_rows(table: Table, pick: bool = False, start: int = 0,
             stop: int | None = None) -> Markup:
    """The ``<tr>`` of each row from ``start`` to ``stop``, a checkbox first when runs are
    picked for a comparison."""
    return Markup("\n".join([_row(row, pick) for row in table.rows[start:stop]]))


def _row(row: Row, pick: bool) -> str:
    run = row.run
    run_id, label = escape(run.run_id), escape(run.name or run.run_id)
    box = (f'<td><input type="checkbox" name="run" value="{run_id}" '
           f'aria-label="select {label}"></td>' if pick else "")
    cells = "".join([_cell(cell) for cell in row.cells])
    return (f'<tr data-run-id="{run_id}">{box}<td><a href="/ui/tracking/runs/{run_id}">{label}'
            f'</a></td><td><span class="state {escape(run.status.lower())}">'
            f'{escape(run.status)}</span></td>{cells}</tr>')


def _cell(cell: Cell) -> str:
    if cell.css == "metric":
        return f'<td class="metric" data-sort="{escape(cell.sort)}">{escape(cell.text)}</td>'
    return f'<td class="{escape(cell.css)}">{escape(cell.text)}</td>'
