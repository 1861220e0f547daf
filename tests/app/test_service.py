"""``Service(...)`` in the app API: the same version as the task file with the same fields,
and each bad field refused when the Service is made, naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bourse import Compute, Service
from bourse.app import Readiness, Replicas, Rollout
from bourse.core.errors import InvalidInput
from bourse.tasks.load import load_any
from bourse.tasks.serving import apply_body

TASK = """\
name: digits
resources: {cpus: 1}
run: python serve.py --port $PORT
env: {MODEL: small, THREADS: 2}
max_retries: 1
service:
  port: 8000
  readiness: {path: /health, timeout: 2s, initial_delay: 5s}
  replicas: {min: 2, max: 4, target_rps: 50, target_p99: 250ms}
  rollout:
    steps: [10, 50, 100]
    pause: 30s
    max_error_increase: 2
    max_p99_increase: 150ms
    min_requests: 80
    ready_timeout: 5m
"""


def test_the_same_fields_make_the_same_version_as_the_task_file(tmp_path: Path) -> None:
    path = tmp_path / "service.yaml"
    path.write_text(TASK)
    from_file = apply_body(path, load_any(path).task, "a" * 64)
    service = Service("digits", "python serve.py --port $PORT", port=8000,
                      compute=Compute(cpus=1), env={"MODEL": "small", "THREADS": 2},
                      max_retries=1,
                      readiness=Readiness(path="/health", timeout="2s", initial_delay="5s"),
                      replicas=Replicas(min=2, max=4, target_rps=50, target_p99="250ms"),
                      rollout=Rollout(steps=[10, 50, 100], pause="30s", max_error_increase=2,
                                      max_p99_increase="150ms", min_requests=80,
                                      ready_timeout="5m"))
    assert service.body("a" * 64) == from_file
    policy = from_file.policy
    assert (policy.pause_s, policy.error_margin, policy.p99_margin_ms, policy.min_requests,
            policy.readiness_timeout_s, policy.target_rps, policy.target_p99_ms) == (
                30, 0.02, 150, 80, 2, 50, 250)
    assert from_file.job.ports == []  # each replica's port is the coordinator's to give


def test_shorthands_and_defaults() -> None:
    service = Service("web", ["python", "-m", "http.server", "8000"], port=8000,
                      compute="cpu", readiness="/ready", replicas=3)
    body = service.body()
    assert body.job.command[-4:] == ["python", "-m", "http.server", "8000"]
    assert (body.policy.readiness_path, body.policy.min_replicas,
            body.policy.max_replicas) == ("/ready", 3, 3)
    assert body.policy.steps == [100] and body.job.bundle is None  # the file's defaults
    assert "web" in repr(service)


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"name": "Digits"}, "name", "lower case"),
    ({"port": 80}, "port", "greater than or equal to 1024"),
    ({"port": "8000"}, "port", "integer"),
    ({"compute": 4}, "compute", "must be a Compute"),
    ({"readiness": "health"}, "readiness", "pattern"),
    ({"replicas": Replicas.model_construct(min=3, max=1)}, "replicas", "below min"),
    ({"replicas": {"min": 1, "max": 2, "target": 5}}, "replicas.target", "Extra inputs"),
    ({"rollout": {"steps": [50, 10]}}, "rollout.steps", "must rise and end at 100"),
    ({"rollout": {"pause": "soon"}}, "rollout.pause", "cannot read 'soon' as a duration"),
    ({"command": []}, "command", "valid string"),
    ({"env": {"1BAD": "x"}}, "env.1BAD", "pattern"),
])
def test_a_bad_field_is_refused_when_made(fields: dict[str, Any], field: str,
                                          words: str) -> None:
    given: dict[str, Any] = {"name": "digits", "command": "serve", "port": 8000,
                             "compute": Compute(cpus=1)} | fields
    name, command = given.pop("name"), given.pop("command")
    with pytest.raises(InvalidInput, match=words) as refused:
        Service(name, command, **given)
    assert (refused.value.field or "").startswith(field), refused.value.field
