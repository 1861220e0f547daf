"""``bourse gpus``: the GPU catalogue — every label bourse understands."""

from __future__ import annotations

import click

from bourse.cli.errors import handles_errors
from bourse.cli.render import echo_json, table
from bourse.core.gpus import catalogue


@click.command()
@click.argument("label", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def gpus(label: str | None, as_json: bool) -> None:
    """List known GPU models, or show what LABEL resolves to."""
    cat = catalogue()
    models = list(cat.models.values()) if label is None else list(cat.resolve(label).models)
    if as_json:
        echo_json(models)
        return
    rows = [[m.id, m.family, m.vendor, f"{m.memory_gb}GB", m.architecture,
             ".".join(map(str, m.compute_capability or ())) or "-",
             ", ".join(m.aliases)] for m in models]
    click.echo(table(("ID", "FAMILY", "VENDOR", "MEMORY", "ARCHITECTURE", "CC", "ALIASES"),
                     rows, right=(3,)))
