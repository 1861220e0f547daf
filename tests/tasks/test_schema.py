"""The JSON Schema is made from the models: it is a valid draft 2020-12 schema, the shipped
examples and the documentation's examples are valid under it and load, and what the loader
refuses for its shape the schema refuses too."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from bourse.cli.main import cli
from bourse.tasks import Task, load_task
from bourse.tasks.schema import DIALECT, task_schema
from bourse.tasks.source import read_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "tasks").glob("*.yaml"))
DOC = ROOT / "docs" / "tasks.md"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = task_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def doc_examples() -> list[str]:
    """The YAML blocks of docs/tasks.md that are whole task files (they have run:)."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    return [b for b in blocks if re.search(r"^run:", b, flags=re.MULTILINE)]


def test_the_schema_is_draft_2020_12_and_lists_the_task_s_fields() -> None:
    schema = task_schema()
    assert schema["$schema"] == DIALECT
    assert list(schema["properties"]) == list(Task.model_fields)
    assert schema["required"] == ["run"] and schema["additionalProperties"] is False


def test_bourse_schema_task_prints_it() -> None:
    result = CliRunner().invoke(cli, ["schema", "task"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == task_schema()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_examples_are_valid_and_load(path: Path,
                                         validator: jsonschema.Draft202012Validator) -> None:
    assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == []
    load_task(path)


def test_the_documentation_s_examples_are_valid_and_load(
        validator: jsonschema.Draft202012Validator) -> None:
    blocks = doc_examples()
    assert len(blocks) >= 2
    for block in blocks:
        assert list(validator.iter_errors(yaml.safe_load(block))) == [], block
        read = read_text(block, "docs/tasks.md")
        Task.model_validate(read.data)


@pytest.mark.parametrize("bad", [
    {"run": "x", "nmae": "t"},
    {"run": "x", "resources": {"gpuz": "a100"}},
    {"run": "x", "service": {"port": 80, "readiness": {"path": "/h", "timeot": "1s"}}},
    {"name": "no run"},
    {"run": 5},
    {"run": "x", "compat": "slurm"},
    {"run": "x", "env": {"1BAD": "x"}},
    {"run": "x", "ports": [1, 2, 3, 4, 5, 6, 7, 8, 9]},
    {"run": "x", "service": {"port": 80, "replicas": {"min": -1}}},
])
def test_what_the_schema_refuses(bad: dict[str, Any],
                                 validator: jsonschema.Draft202012Validator) -> None:
    assert list(validator.iter_errors(bad)), bad
