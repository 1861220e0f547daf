"""The ``bourse`` command.

Subcommands are imported only when used: the coordinator alone pulls in FastAPI, SQLAlchemy
and uvicorn, which a `bourse jobs` on a laptop (or an agent's memory) should not pay for, and
which the client install (`pip install bourse`, no extras) does not have: a command of an
extra says which one to install (`NEEDS`, bourse.extras).
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from bourse import __version__
from bourse.cli.suggest import SuggestingGroup
from bourse.extras import MissingExtra, missing_extra, needs

# name -> (module, attribute, one-line help shown by `bourse --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "up": ("bourse.cli.up", "up", "Start a local exchange in the background."),
    "down": ("bourse.cli.up", "down", "Stop the local exchange and everything it started."),
    "run": ("bourse.cli.run", "run", "Run a command or task file on the exchange, stream its "
                                     "output."),
    "serve": ("bourse.cli.serve", "serve", "Start a service from a task file, or roll out a "
                                         "new version."),
    "services": ("bourse.cli.serve", "services", "List services (and `show`, `rollback`, "
                                                 "`stop`)."),
    "gate": ("bourse.cli.gate", "gate_command", "Fail a CI check when a metric regresses "
                                                "against a baseline."),
    "jobs": ("bourse.cli.jobs", "jobs", "List jobs (and `jobs show ID`)."),
    "runs": ("bourse.cli.runs", "runs", "List app runs (and `runs show RUN`, `runs compare "
                                       "A B`)."),
    "experiments": ("bourse.cli.tracking", "experiments", "List tracking experiments."),
    "metrics": ("bourse.cli.tracking", "metrics", "A tracking run's metric curve (--csv)."),
    "logs": ("bourse.cli.logs", "logs", "Print a job's output; -f follows it."),
    "stop": ("bourse.cli.jobs", "stop", "Cancel jobs."),
    "burst": ("bourse.cli.burst", "burst", "Move a running training to other compute "
                                           "(--here: a local run; --local: back)."),
    "exec": ("bourse.cli.exec", "exec_", "Run a command (or a shell) beside a running job."),
    "cp": ("bourse.cli.cp", "cp", "Copy data in and out of the exchange's store (-r, resumable)."),
    "ls": ("bourse.cli.cp", "ls", "List what the exchange's store holds at a URI."),
    "rm": ("bourse.cli.cp", "rm", "Delete objects from the exchange's store (-r asks first)."),
    "nodes": ("bourse.cli.nodes", "nodes", "List nodes (and `nodes show`, `enroll`, `reclaim`)."),
    "cost": ("bourse.cli.cost", "cost", "What attempts cost, by day, node or job."),
    "offers": ("bourse.cli.offers", "offers", "What the market sells for a requirement."),
    "clouds": ("bourse.cli.clouds", "clouds", "Clouds the exchange launches on, or why not."),
    "launches": ("bourse.cli.clouds", "launches", "The machines the exchange launched."),
    "fleets": ("bourse.cli.fleets", "fleets", "SSH fleets: add hosts over SSH, list, remove."),
    "gpus": ("bourse.cli.gpus", "gpus", "The GPU models and labels bourse knows."),
    "ui": ("bourse.cli.ui", "ui", "A link that opens the exchange's web UI signed in."),
    "login": ("bourse.cli.access", "login", "Store an exchange's URL and token for the CLI."),
    "context": ("bourse.cli.context", "context", "Named exchanges: add, use, list, show, rm."),
    "projects": ("bourse.cli.access", "projects", "List projects (and `projects create`)."),
    "tokens": ("bourse.cli.access", "tokens", "API tokens: create, list, revoke (admin)."),
    "secrets": ("bourse.cli.secrets", "secrets", "The project's secrets: list, set, rm."),
    "audit": ("bourse.cli.audit", "audit", "The audit trail: list, verify, export --csv."),
    "server": ("bourse.cli.server", "server", "Run a coordinator in the foreground."),
    "agent": ("bourse.cli.agent", "agent", "Run a node agent (and `agent probe`)."),
    "schema": ("bourse.cli.schema", "schema", "The JSON Schema of a task file."),
    "demo": ("bourse.cli.demo", "demo", "Run the bourse demo (what `make demo` runs)."),
    "completion": ("bourse.cli.complete", "completion",
                   "Print the shell completion script (bash, zsh, fish)."),
}
# the extras a command needs beyond the client (pyproject.toml); tests/test_client_imports.py
# holds each command's imports to them
NEEDS: dict[str, tuple[str, ...]] = {
    "server": ("server",),
    "agent": ("agent",),
    "up": ("server", "agent"),
    "down": ("server", "agent"),
    "demo": ("server", "agent", "train"),
    "cp": ("data",),
    "ls": ("data",),
    "rm": ("data",),
}


class LazyGroup(SuggestingGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[cmd_name]
        with needs(f"bourse {cmd_name}", NEEDS.get(cmd_name, ())):
            command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, _, help_text) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bourse")
@click.option("--context", "context_name", metavar="NAME",
              help="Use this context (`bourse context list`) for this command, as "
                   "BOURSE_CONTEXT=NAME does.")
def cli(context_name: str | None) -> None:
    """bourse: an open exchange for GPU compute."""
    if context_name:
        use_context(click.get_current_context(), context_name)


def use_context(ctx: click.Context, name: str) -> None:
    """BOURSE_CONTEXT for the command, not a value passed down: every client it opens (the
    SDK's too, in app drivers) and every bourse it starts resolves the same way. Put back
    when the command ends (it matters only where one process runs several commands)."""
    previous = os.environ.get("BOURSE_CONTEXT")
    os.environ["BOURSE_CONTEXT"] = name

    def restore() -> None:
        if previous is None:
            os.environ.pop("BOURSE_CONTEXT", None)
        else:
            os.environ["BOURSE_CONTEXT"] = previous

    ctx.call_on_close(restore)


def main() -> None:
    try:
        cli()
    except MissingExtra as exc:
        _fail(exc)
    except ModuleNotFoundError as exc:  # a command that reached an extra's module anyway
        error = missing_extra(exc, f"bourse {' '.join(sys.argv[1:2])}".strip())
        if error is None:
            raise
        _fail(error)


def _fail(error: MissingExtra) -> None:
    click.echo(f"error: {error}", err=True)
    sys.exit(error.exit_code)
