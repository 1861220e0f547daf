"""The exchange half of ``bourse demo``: the three-stage digits app (``bourse.examples``) run
through a throwaway local exchange, each stage a job placed on an agent, its data in the
exchange's store. ``bourse run`` prints where each stage ran, why there, how long it took and
what it cost; the demo adds the model's test accuracy. The exchange lives in a temp dir (the
user's ~/.bourse is untouched) and is stopped at the end, or kept for browsing (``--keep``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import click

from bourse.app.exchange import new_run_id
from bourse.cli.ui import sign_in_link
from bourse.core.errors import BourseError
from bourse.local.exchange import LocalExchange, Status, bourse_home_at
from bourse.sdk.config import load_credentials

APP_FILES = ("digits_app.py", "digits_model.py")
APP_TIMEOUT_S = 600.0


class DemoFailed(BourseError):
    exit_code = 1


@dataclass
class Demo:
    root: Path  # the temp dir: home/ (BOURSE_HOME), local/ (the exchange), project/
    status: Status
    env: dict[str, str]  # for `bourse` subprocesses: BOURSE_HOME points at this exchange

    @property
    def home(self) -> Path:
        return self.root / "home"


@contextmanager
def throwaway_exchange(keep: bool = False) -> Iterator[Demo]:
    """A coordinator (with its store) and two agents in a temp dir; stopped and removed at
    the end unless ``keep``."""
    root = Path(tempfile.mkdtemp(prefix="bourse-demo-"))
    # a sample a second: the demo's short stages still draw a chart in the web UI
    exchange = LocalExchange(root / "local", keep_alive_s=2.0, metrics_interval_s=1.0)
    kept = False
    try:
        with bourse_home_at(root / "home") as env:
            status = exchange.up(agents=2)
        yield Demo(root, status, env)
        kept = keep
    finally:
        if not kept:
            with bourse_home_at(root / "home"):
                exchange.down()
            shutil.rmtree(root, ignore_errors=True)


def app_tour(keep: bool) -> None:
    click.echo(click.style("\n== an app on a local exchange: prepare -> train -> evaluate",
                           bold=True))
    with throwaway_exchange(keep) as demo:
        url = demo.status.url
        click.echo(f"coordinator at {url}, agents {', '.join(map(str, demo.status.agent_pids))}")
        token = load_credentials(demo.env).token  # a throwaway exchange's admin token
        click.echo(f"web UI, signed in: {sign_in_link(url, token, 'runs')}")
        project = copy_app(demo.root / "project")
        run_id = new_run_id()
        click.echo(f"$ bourse run {APP_FILES[0]}   (run {run_id}, from {project})\n")
        report = run_app(demo, project, run_id)  # its summary: each stage's placement...
        click.echo(click.style(f"\ntest accuracy: {report['test_accuracy']:.4f} on "
                               f"{report['samples']} held-out digits (chance: 0.10)", bold=True))
        if keep:
            click.echo(f"\nthe exchange stays up for browsing: {url}/ui/runs\n"
                       f"  export BOURSE_HOME={demo.home}   # then: bourse runs, bourse jobs, "
                       f"bourse nodes\n  stop it: BOURSE_HOME={demo.home} bourse down")


def copy_app(project: Path) -> Path:
    """The demo app from the installed package (``bourse.examples``) into a fresh project."""
    project.mkdir(parents=True)
    shipped = resources.files("bourse.examples")
    for name in APP_FILES:
        (project / name).write_text(shipped.joinpath(name).read_text())
    return project


def run_app(demo: Demo, project: Path, run_id: str) -> dict[str, Any]:
    """``bourse run digits_app.py`` against the demo exchange, its output shown as it comes;
    the app's report (the JSON value it prints last)."""
    command = [sys.executable, "-m", "bourse", "run", "--run-id", run_id, APP_FILES[0]]
    lines: list[str] = []
    with subprocess.Popen(command, cwd=project, env=demo.env, text=True, bufsize=1,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            click.echo(f"  {lines[-1]}")
        code = proc.wait(timeout=APP_TIMEOUT_S)
    if code != 0:
        raise DemoFailed(f"the demo app failed (exit code {code})",
                         hint=f"its jobs: BOURSE_HOME={demo.home} bourse runs show {run_id}")
    return last_json(lines)


def last_json(lines: list[str]) -> dict[str, Any]:
    """The JSON document that ends the output (the flow's return value)."""
    for start in range(len(lines) - 1, -1, -1):
        if lines[start].startswith("{"):
            try:
                value = json.loads("\n".join(lines[start:]))
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    raise DemoFailed("the demo app printed no report")
