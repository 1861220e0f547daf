"""The ``bourse`` command."""

from __future__ import annotations

import click

from bourse import __version__
from bourse.cli.agent import agent
from bourse.cli.demo import demo
from bourse.cli.gpus import gpus
from bourse.cli.jobs import jobs, stop
from bourse.cli.logs import logs
from bourse.cli.nodes import nodes
from bourse.cli.offers import offers
from bourse.cli.run import run
from bourse.cli.server import server
from bourse.cli.up import down, up


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bourse")
def cli() -> None:
    """bourse: an open exchange for GPU compute."""


cli.add_command(offers)
cli.add_command(gpus)
cli.add_command(demo)
cli.add_command(run)
cli.add_command(jobs)
cli.add_command(logs)
cli.add_command(stop)
cli.add_command(nodes)
cli.add_command(server)
cli.add_command(agent)
cli.add_command(up)
cli.add_command(down)


def main() -> None:
    cli()
