"""The ``bourse`` command."""

from __future__ import annotations

import click

from bourse import __version__
from bourse.cli.demo import demo
from bourse.cli.gpus import gpus
from bourse.cli.offers import offers


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bourse")
def cli() -> None:
    """bourse: an open exchange for GPU compute."""


cli.add_command(offers)
cli.add_command(gpus)
cli.add_command(demo)


def main() -> None:
    cli()
