"""Which format a task file is in, and `translate`'s one error naming every refused field."""

from __future__ import annotations

from typing import Any

import pytest
from task_fixtures import DSTACK, SKYPILOT, load

from bourse.core.errors import InvalidInput
from bourse.tasks.detect import detect, translate


@pytest.mark.parametrize(("data", "filename", "kind"), [
    ({"run": "python train.py"}, "task.yaml", "bourse"),
    ({"run": "x", "resources": {"gpu": "a100:8", "nodes": 2}}, "task.yaml", "bourse"),
    ({"run": "x", "envs": {"A": "1"}}, "task.yaml", "skypilot"),
    ({"run": "x", "resources": {"accelerators": "A100:8"}}, "sky.yaml", "skypilot"),
    ({"run": "x", "num_nodes": 2}, "sky.yaml", "skypilot"),
    ({"run": "x", "volumes": {"/mnt/data": "pvc"}}, "task.yaml", "skypilot"),  # its docs'
    ({"run": "x", "resources": {"volumes": [{"path": "/d"}]}}, "task.yaml", "skypilot"),
    ({"commands": ["x"], "volumes": ["vol:/data"]}, "t.dstack.yml", "dstack"),
    ({"run": "x", "envs": {"A": "1"}, "compat": "skypilot"}, "t.yaml", "bourse"),
    ({"type": "task", "commands": ["x"]}, "train.yaml", "dstack"),
    ({"commands": ["x"]}, ".dstack.yml", "dstack"),
    ({"commands": ["x"]}, "examples/train.dstack.yaml", "dstack"),
])
def test_detect(data: dict[str, Any], filename: str, kind: str) -> None:
    assert detect(data, filename) == kind


def test_every_fixture_is_detected_as_its_format() -> None:
    assert {detect(load(p), p.name) for p in SKYPILOT.glob("*.yaml")} == {"skypilot"}
    assert {detect(load(p), p.name) for p in DSTACK.glob("*.dstack.y*ml")} == {"dstack"}


def test_a_bourse_file_is_given_back_as_it_is() -> None:
    data = {"run": "python train.py", "resources": {"gpu": "a100:8"}}
    assert translate(data, "task.yaml").mapping is data


def test_a_translated_file_comes_with_its_notes() -> None:
    done = translate(load(DSTACK / "torchrun.dstack.yml"), ".dstack.yml")
    assert done.kind == "dstack"
    assert done.mapping["resources"] == {"nodes": 2, "gpu": "gpu:1"}
    assert any(n.startswith("resources.gpu:") for n in done.notes)


def test_one_error_names_every_refused_field() -> None:
    with pytest.raises(InvalidInput) as caught:
        translate(load(SKYPILOT / "using_file_mounts.yaml"), "mounts.yaml")
    text = str(caught.value)
    assert "mounts.yaml: 3 field(s) of this skypilot file cannot run on bourse" in text
    for field in ("file_mounts./train-00001-of-01024", "file_mounts./data/train-00001-of-01024",
                  "file_mounts.~/data/train-00001-of-01024"):
        assert f"  {field}: " in text


def test_one_refusal_names_its_field() -> None:
    with pytest.raises(InvalidInput) as caught:
        translate({"type": "service", "commands": ["x"], "port": 80}, "svc.dstack.yml")
    assert caught.value.field == "type"


def test_a_file_that_is_not_a_mapping() -> None:
    with pytest.raises(InvalidInput, match="a mapping of fields, not list"):
        translate(["run"], "task.yaml")
