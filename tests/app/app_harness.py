"""A throwaway project for the app tests: files written by the test, run the way
`bourse run --local app.py` runs them — either in this process (so a test holds the
exceptions and Results themselves) or as the real CLI in a subprocess.

Every stage is a real local subprocess in both cases.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from bourse.cli.run_app import run_app

BOURSE = Path(sys.executable).with_name("bourse")
CLI_TIMEOUT_S = 180


class Project:
    """A project directory (the current directory of a run) and what its runs left."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, name: str, text: str) -> Project:
        """Write ``name`` (relative to the project), dedented."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
        return self

    def run(self, *args: str, app: str = "app.py") -> Any:
        """What `bourse run --local APP ARGS` does, in this process; returns the flow's value
        and lets StageFailed / InvalidInput through."""
        before = Path.cwd()
        os.chdir(self.root)
        try:
            return run_app(Path(app), args, local=True)
        finally:
            os.chdir(before)

    def cli(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """The real ``bourse run ARGS`` in a subprocess."""
        return subprocess.run([str(BOURSE), "run", *args], cwd=cwd or self.root, text=True,
                              capture_output=True, timeout=CLI_TIMEOUT_S, check=False)

    def runs(self) -> list[Path]:
        found = self.root / ".bourse" / "runs"
        return sorted(found.iterdir()) if found.is_dir() else []

    def stage_dirs(self) -> list[str]:
        """Every ``<run>/<stage>`` directory local mode created, as text."""
        return [f"{run.name}/{stage.name}" for run in self.runs() for stage in run.iterdir()]

    def lines(self, name: str) -> list[str]:
        path = self.root / name
        return path.read_text().splitlines() if path.exists() else []


def local_path(uri: str) -> Path:
    """The directory behind a local-mode ``file://`` output URI."""
    assert uri.startswith("file:///"), uri
    return Path(uri.removeprefix("file://"))


SUMMARY_ROW = re.compile(r"^(\S+)\s+(SUCCEEDED|FAILED)( \(cached\))?\s+(\S+)")


def summary_rows(stderr: str) -> list[tuple[str, str]]:
    """(stage, status) for each row of the summary table `bourse run` prints on stderr."""
    rows = []
    for line in stderr.splitlines():
        match = SUMMARY_ROW.match(line)
        if match:
            rows.append((match[1], match[2] + (match[3] or "")))
    return rows


def started_order(stdout: str) -> list[str]:
    """The stages in the order local mode started them."""
    return re.findall(r"^\[(\S+)\] started locally", stdout, flags=re.MULTILINE)


def final_value(stdout: str) -> Any:
    """The flow's return value, which `bourse run` prints as JSON after everything else: the
    longest tail of the output that is one JSON document."""
    lines = stdout.splitlines()
    for start in range(len(lines)):
        try:
            return json.loads("\n".join(lines[start:]))
        except json.JSONDecodeError:
            continue
    raise AssertionError(f"no JSON value at the end of:\n{stdout}")
