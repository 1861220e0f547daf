"""The fields of a task: resources are a Compute as written, the other fields reuse the job
spec's checks, and a task becomes the JobSpec fields `bourse run` submits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.protocol.common import JobSpec, Port
from bourse.tasks import Task, TaskError, task_from_mapping
from bourse.tasks.load import fields_at
from bourse.tasks.resources import Resources
from bourse.tasks.spec import SERVICES_REFUSED, code_root, job_fields, refuse_service


def task(**fields: Any) -> Task:
    return task_from_mapping({"run": "x", **fields})


@pytest.mark.parametrize(("written", "same_as"), [
    ({"gpu": "a100:8", "cpus": "8+"}, Compute("a100:8", cpus="8+")),
    ({"gpu": "a100", "gpus": 4, "gpu_memory": "40GB+"},
     Compute("a100", gpus=4, gpu_memory="40GB+")),
    ({"cpus": 8, "memory": 32, "disk": "100GB+"}, Compute(cpus=8, memory=32, disk="100GB+")),
    ({"nodes": 2}, Compute(num_nodes=2)),
    ({"num_nodes": 3}, Compute(num_nodes=3)),
    ({"region": "us-east-*", "zone": ["eu-west-1a"], "regions": "ap-*"},
     Compute(regions=["ap-*", "us-east-*", "eu-west-1a"])),
    ({"spot": True, "max_price": "$0.50/h"}, Compute(spot="only", max_price=0.5)),
    ({"spot": "prefer"}, Compute(spot="prefer")),
    ({"gpu": "a100", "cuda": 12.1, "torch": "2.4", "packages": ["six==1.17.0"]},
     Compute("a100", cuda=">=12.1", torch="2.4", packages=["six==1.17.0"])),
    ({"image": "python:3.12", "tags": "hipaa"}, Compute(image="python:3.12", tags=["hipaa"])),
    ({"providers": ["aws"], "exclude_providers": "lambda", "exclude_regions": ["us-west-*"]},
     Compute(providers=["aws"], exclude_providers=["lambda"], exclude_regions=["us-west-*"])),
])
def test_resources_are_a_compute_as_written(written: dict[str, Any], same_as: Compute) -> None:
    assert task(resources=written).resources.compute() == same_as


def test_every_compute_field_can_be_written() -> None:
    """Resources must grow with Compute: a field Compute gains is a field of the format."""
    assert set(Compute.model_fields) - set(Resources.model_fields) == set()
    assert fields_at("resources") == list(Resources.model_fields)
    assert fields_at("service.readiness") == ["path", "timeout", "initial_delay"]
    assert fields_at("env") == []


def test_a_task_becomes_the_job_spec_fields() -> None:
    made = task(name="t", resources={"gpu": "a100"}, env={"A": "1", "HOME_DIR": None},
                secrets=["HF_TOKEN"], inputs={"data": "s3://data/x/"},
                outputs={"model": "s3://models/"}, checkpoint="s3://ckpts/",
                ports=[6006, "8888:keep"], max_retries=1, pending_timeout="10m")
    fields = job_fields(made, {"HOME_DIR": "/h", "OTHER": "no"}, ["--lr", "3"])
    spec = JobSpec(**fields)
    assert spec.command[:2] == ["bash", "-c"] and spec.command[3:] == ["bourse-task", "--lr", "3"]
    assert spec.env == {"A": "1", "HOME_DIR": "/h"}
    assert spec.ports == [Port(number=6006), Port(number=8888, path="keep")]
    assert (spec.name, spec.max_retries, spec.pending_timeout_s) == ("t", 1, 600.0)
    assert (spec.project_secrets, spec.checkpoint) == (["HF_TOKEN"], "s3://ckpts/")
    assert (spec.inputs, spec.outputs) == ({"data": "s3://data/x/"}, {"model": "s3://models/"})
    assert spec.compute == Compute("a100")


def test_defaults_are_the_exchange_s() -> None:
    fields = job_fields(task(), {})
    assert {k for k, v in fields.items() if v not in (None, [], {})} == {"command", "compute"}


def test_a_null_variable_not_set_here_is_named() -> None:
    with pytest.raises(InvalidInput) as caught:
        job_fields(task(env={"WANDB_PROJECT": None}), {})
    assert caught.value.field == "env.WANDB_PROJECT"
    assert "null (copy it from here) but not set here" in caught.value.message


def test_the_code_is_the_workdir_from_the_file_s_folder(tmp_path: Path) -> None:
    (tmp_path / "proj" / "conf").mkdir(parents=True)
    file = tmp_path / "proj" / "conf" / "t.yaml"
    assert code_root(task(), file) == file.parent
    assert code_root(task(workdir=".."), file) == tmp_path / "proj"
    with pytest.raises(InvalidInput, match="'nope' is not a directory"):
        code_root(task(workdir="nope"), file)


SERVICE = {"port": 8000, "readiness": "/health", "replicas": 2,
           "resources": {"gpu": "l4"}, "rollout": {"steps": [25, 100], "pause": "30s"}}


def test_a_service_is_checked_then_refused() -> None:
    made = task(service=SERVICE)
    assert made.service is not None
    assert (made.service.readiness.path if made.service.readiness else None) == "/health"
    assert (made.service.replicas.min, made.service.replicas.max) == (2, 2)
    assert made.service.resources is not None
    assert made.service.resources.compute() == Compute("l4")
    with pytest.raises(InvalidInput) as caught:
        refuse_service(made)
    assert caught.value.message == SERVICES_REFUSED
    refuse_service(task())


@pytest.mark.parametrize(("service", "field"), [
    ({"port": 0}, "service.port"),
    ({"port": 80, "readiness": "health"}, "service.readiness"),
    ({"port": 80, "readiness": {"path": "/h", "timeout": "1h"}}, "service.readiness.timeout"),
    ({"port": 80, "replicas": {"min": 3, "max": 2}}, "service.replicas.max"),
    ({"port": 80, "replicas": -1}, "service.replicas"),
    ({"port": 80, "replicas": {"max": 3, "target_p99": "fast"}}, "service.replicas.target_p99"),
    ({"port": 80, "replicas": {"max": 3, "target_p99": "2h"}}, "service.replicas.target_p99"),
    ({"port": 80, "replicas": {"max": 3, "target_p99": "0s"}}, "service.replicas.target_p99"),
    ({"port": 80, "resources": {"gpu": "l4x"}}, "service.resources.gpu"),
    ({"port": 80, "rollout": {"steps": [50, 20, 100]}}, "service.rollout.steps"),
    ({"port": 80, "rollout": {"steps": [10, 50]}}, "service.rollout.steps"),
    ({"port": 80, "rollout": {"steps": [0, 100]}}, "service.rollout.steps[0]"),
])
def test_a_bad_service_field_is_named(service: dict[str, Any], field: str) -> None:
    with pytest.raises(TaskError) as caught:
        task(service=service)
    assert caught.value.field == field, str(caught.value)


@pytest.mark.parametrize(("fields", "field"), [
    ({"ports": [6006, "6006:keep"]}, "ports"),
    ({"ports": [1, 2, 3, 4, 5, 6, 7, 8, 9]}, "ports"),
    ({"max_retries": 101}, "max_retries"),
    ({"max_retries": True}, "max_retries"),
    ({"pending_timeout": 0}, "pending_timeout"),
    ({"checkpoint": "nope"}, "checkpoint"),
    ({"outputs": {"9bad": "s3://b/"}}, "outputs.9bad"),
    ({"secrets": ["bad-name"]}, "secrets[0]"),
    ({"run": []}, "run"),
    ({"name": "a\x00b"}, "name"),
    ({"workdir": ""}, "workdir"),
])
def test_a_bad_field_is_named(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(TaskError) as caught:
        task(**fields)
    assert caught.value.field == field, str(caught.value)
