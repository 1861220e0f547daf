"""The variables a start gets for MLflow, and the job's tracking token (pure)."""

from __future__ import annotations

from bourse.protocol.agent import StartJob
from bourse.server.services.tracking_tokens import job_of, mint, with_tracking

KEY = b"k" * 32


def _start(**env: str) -> StartJob:
    return StartJob.model_validate({"job_id": "j-0123456789ab", "attempt": 2, "spec": {
        "command": ["true"], "env": env}})


def test_a_start_points_mlflow_at_the_exchange_with_a_secret_token() -> None:
    tracked = with_tracking(_start(), KEY, "http://exchange:8470")
    assert tracked.env["MLFLOW_RUN_ID"] == "j-0123456789ab"
    assert tracked.env["MLFLOW_TRACKING_URI"] == "http://exchange:8470"
    token = tracked.secret_env["MLFLOW_TRACKING_TOKEN"]
    assert "MLFLOW_TRACKING_TOKEN" not in tracked.env  # secret_env: masked, never spooled
    assert job_of(KEY, token) == "j-0123456789ab"
    tampered = token[:-1] + ("B" if token.endswith("A") else "A")
    assert job_of(b"x" * 32, token) is None and job_of(KEY, tampered) is None
    assert job_of(KEY, "bse_u_" + token[6:]) is None


def test_a_job_that_names_its_own_mlflow_server_keeps_it() -> None:
    start = _start(MLFLOW_TRACKING_URI="http://their-mlflow:5000")
    assert with_tracking(start, KEY, "http://exchange:8470") == start


def test_tokens_differ_by_job() -> None:
    assert mint(KEY, "j-a") != mint(KEY, "j-b")
