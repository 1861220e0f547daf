"""The JSON Schema (draft 2020-12) of the task-file format, made from the models so it cannot
drift from what ``load_task`` accepts (``bourse schema task`` prints it; editors that read
``# yaml-language-server: $schema=...`` complete and check task files with it)."""

from __future__ import annotations

import typing
from typing import Any

from pydantic.fields import FieldInfo

from bourse.tasks.model import Task

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def task_schema() -> dict[str, Any]:
    """The schema of a task file, as the loader validates it (its input, not its output)."""
    body = Task.model_json_schema(mode="validation")
    for name, info in Task.model_fields.items():  # pydantic leaves keys' patterns out
        pattern = key_pattern(info)
        if pattern is not None:
            body["properties"][name]["propertyNames"] = {"pattern": pattern}
    return {"$schema": DIALECT, "title": "bourse task file",
            "description": "A job bourse runs: `bourse run task.yaml`.",
            **{k: v for k, v in body.items() if k not in ("title", "description")}}


def key_pattern(info: FieldInfo) -> str | None:
    """The pattern of a mapping field's keys (``env``: variable names), if it has one."""
    if typing.get_origin(info.annotation) is not dict:
        return None
    key = typing.get_args(info.annotation)[0]
    for meta in getattr(key, "__metadata__", ()):
        for inner in getattr(meta, "metadata", ()):
            if getattr(inner, "pattern", None):
                return str(inner.pattern)
    return None
