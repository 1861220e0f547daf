"""The JSON Schema (draft 2020-12) of the task-file format, made from the models so it cannot
drift from what ``load_task`` accepts (``bourse schema task`` prints it; editors that read
``# yaml-language-server: $schema=...`` complete and check task files with it)."""

from __future__ import annotations

from typing import Any

from bourse.tasks.model import Task

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def task_schema() -> dict[str, Any]:
    """The schema of a task file, as the loader validates it (its input, not its output)."""
    body = Task.model_json_schema(mode="validation")
    return {"$schema": DIALECT, "title": "bourse task file",
            "description": "A job bourse runs: `bourse run task.yaml`.",
            **{k: v for k, v in body.items() if k not in ("title", "description")}}
