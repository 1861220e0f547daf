"""``bourse schema task``: the JSON Schema of a file format bourse reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click


def _task() -> dict[str, Any]:
    from bourse.tasks.schema import task_schema

    return task_schema()


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {"task": _task}


@click.command()
@click.argument("kind", type=click.Choice(sorted(SCHEMAS)))
def schema(kind: str) -> None:
    """Print the JSON Schema (draft 2020-12) of KIND: `task`, a task file (docs/tasks.md).

    Editors check and complete task files with it: save it and put
    `# yaml-language-server: $schema=task.schema.json` at the top of the file."""
    click.echo(json.dumps(SCHEMAS[kind](), indent=2))
