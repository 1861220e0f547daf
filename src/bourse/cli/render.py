"""Tables and JSON for the CLI. Every listing command offers both.

A table on a terminal is drawn by rich (a bold header over a rule, cells never wrapped, so a
row stays one line); anywhere else (a pipe, a file, a test) it is plain text padded with
spaces, the same bytes from one release to the next, for ``grep``, ``awk`` and ``cut``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click


def styled() -> bool:
    """Whether stdout is a terminal that wants styling (``NO_COLOR`` and ``TERM=dumb`` don't)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return sys.stdout.isatty()


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell; indexes in ``right`` are right-aligned (numbers)."""
    if styled():
        return rich_table(headers, rows, right, shutil.get_terminal_size().columns)
    return plain_table(headers, rows, right)


def rich_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int],
               width: int) -> str:
    """The table as rich draws it, as text with its ANSI styles (callers indent and join it).
    Never narrower than its cells: a cell cut to fit (``a100-4…``) would lose the id someone
    came for, so a row wider than the terminal wraps there as plain text would."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for i, header in enumerate(headers):
        grid.add_column(header, justify="right" if i in right else "left", no_wrap=True)
    for row in rows:
        grid.add_row(*row)
    out = io.StringIO()
    cells = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    needed = sum(cells) + 3 * len(cells)  # a pad each side of a cell, a rule between
    Console(file=out, force_terminal=True, width=max(width, needed), highlight=False,
            markup=False, emoji=False).print(grid)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines() if line.strip())


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
                right: Sequence[int] = ()) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.rjust(w) if i in right else c.ljust(w)
                  for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(padded).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def to_jsonable(value: Any) -> Any:
    """Dataclasses, pydantic models, datetimes and sets as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    elif hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, frozenset | set):
        return sorted(to_jsonable(v) for v in value)
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value.isoformat() if isinstance(value, datetime) else value


def echo_json(value: Any) -> None:
    click.echo(json.dumps(to_jsonable(value), indent=2, sort_keys=False))


def money(value: float | None, floor: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" + ("+" if floor else "")


def age(seconds: float) -> str:
    """A short duration: 42s, 5m, 3h, 2d."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def clock(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def dollars(amount: float | None) -> str:
    return "-" if amount is None else f"${amount:.4f}"
