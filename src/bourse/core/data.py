"""Read-only reference tables shipped inside the package (``bourse/data``).

This is the only place in ``core`` that touches files, and it only reads the package's own
static data; everything built from it is a pure function of the rows. Sources of every table are
listed in ``bourse/data/SOURCES.md``.
"""

from __future__ import annotations

import csv
import io
from functools import cache
from importlib import resources


@cache
def read_text(name: str) -> str:
    return resources.files("bourse").joinpath("data", name).read_text(encoding="utf-8")


def read_rows(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(read_text(name), newline="")))
