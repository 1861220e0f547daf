"""A pending reason as the table it is (pure).

Placement stores why a job waits as text: one line ("every connected node is busy"), or the
matcher's explanation, the lines of ``core.match.Explanation.lines()`` joined with newlines —
a summary, one line per constraint that removed offers, how many matched, then the nearest
rejected offers with what each lacks. The job page draws the constraint lines and the nearest
offers as tables and the other lines as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# "  gpu          removed   1,234  (56 left)", as core.match writes it
_REMOVED = re.compile(r"^\s*(?P<name>\S+)\s+removed\s+(?P<count>[\d,]+)\s+"
                      r"\((?P<left>[\d,]+) left\)$")
NEAREST = "nearest rejected offers:"
REMOVED_HEADERS = ("constraint", "removed", "left")
NEAREST_HEADERS = ("nearest rejected offer", "what it lacks")


@dataclass(frozen=True)
class Part:
    """A line of text, or a table (``headers`` and ``rows``)."""

    text: str = ""
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    numbers: tuple[int, ...] = ()  # the columns that hold numbers (right-aligned)

    @property
    def table(self) -> bool:
        return bool(self.headers)


def parts(reason: str | None) -> list[Part]:
    """The reason's lines, runs of constraint lines and the nearest offers as tables; empty
    for a reason of one line (shown as it is)."""
    lines = [line.rstrip() for line in (reason or "").splitlines() if line.strip()]
    if len(lines) < 2:
        return []
    found: list[Part] = []
    for number, line in enumerate(lines):
        if line.strip() == NEAREST:
            return [*found, _nearest(lines[number + 1:])]
        removed = _REMOVED.match(line)
        if removed is None:
            found.append(Part(text=line.strip()))
        else:
            _add_row(found, (removed["name"], removed["count"], removed["left"]))
    return found


def _add_row(found: list[Part], row: tuple[str, ...]) -> None:
    """The row joins the table just before it, or starts one."""
    if found and found[-1].headers == REMOVED_HEADERS:
        found[-1] = Part(headers=REMOVED_HEADERS, rows=(*found[-1].rows, row), numbers=(1, 2))
    else:
        found.append(Part(headers=REMOVED_HEADERS, rows=(row,), numbers=(1, 2)))


def _nearest(lines: list[str]) -> Part:
    """``<offer>: <what it lacks>`` per line (an offer id holds no ": ")."""
    rows = tuple(tuple(part.strip() for part in line.partition(": ")[::2]) for line in lines)
    return Part(text=NEAREST, headers=NEAREST_HEADERS, rows=rows)


def first_line(reason: str | None) -> str:
    """What a list shows of a reason: its first line."""
    lines = (reason or "").strip().splitlines()
    return lines[0].strip() if lines else ""
