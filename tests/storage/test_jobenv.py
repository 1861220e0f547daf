"""What a job sees: environment variable names and values, and settings read back from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bourse.storage import (
    AccessKey,
    InvalidURI,
    MemoryIssuer,
    StoreSettings,
    default_checkpoint,
    input_var,
    job_env,
    output_var,
    parse_uri,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("name", "var"), [("data", "BOURSE_INPUT_DATA"),
                                           ("train-set.v2", "BOURSE_INPUT_TRAIN_SET_V2")])
def test_variable_names(name: str, var: str) -> None:
    assert input_var(name) == var
    assert output_var(name) == var.replace("INPUT", "OUTPUT")


async def test_job_env_and_settings_round_trip() -> None:
    settings = StoreSettings(endpoint="http://127.0.0.1:8333", region="us-east-1")
    creds = await MemoryIssuer().issue("j1", 1, ["s3://datasets/digits/"], ["s3://bourse/j1/"])
    checkpoint = default_checkpoint(parse_uri("s3://bourse"), "j1")
    env = job_env(inputs={"data": Path("/n/in/data")}, outputs={"model": Path("/n/out/model")},
                  input_uris={"data": parse_uri("s3://datasets/digits/")},
                  output_uris={"model": parse_uri("s3://bourse/jobs/j1/outputs/model/")},
                  checkpoint=checkpoint, settings=settings, credentials=creds)
    assert env["BOURSE_INPUT_DATA"] == "/n/in/data"
    assert env["BOURSE_INPUT_DATA_URI"] == "s3://datasets/digits/"
    assert env["BOURSE_OUTPUT_MODEL"] == "/n/out/model"
    assert env["BOURSE_CHECKPOINT_URI"] == "s3://bourse/jobs/j1/checkpoints/"
    assert env["AWS_ENDPOINT_URL"] == env["S3_ENDPOINT_URL"] == "http://127.0.0.1:8333"
    assert env["AWS_ALLOW_HTTP"] == "true" and env["BOURSE_S3_PATH_STYLE"] == "true"
    assert env["AWS_SECRET_ACCESS_KEY"] == creds.access_key.secret_access_key
    back = StoreSettings.from_env(env)
    assert back.endpoint == settings.endpoint and back.region == "us-east-1"
    assert back.uses_path_style and back.access_key == creds.access_key


def test_aws_defaults_to_virtual_hosted_requests() -> None:
    settings = StoreSettings(region="eu-west-1", access_key=AccessKey("AK", "SK", "TOKEN"))
    assert not settings.uses_path_style and not settings.allows_http
    assert settings.env()["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "true"
    assert "SK" not in repr(settings) and "TOKEN" not in repr(settings)
    assert StoreSettings.from_env({}).access_key is None


def test_colliding_names_are_refused() -> None:
    with pytest.raises(InvalidURI, match="map to the same variable BOURSE"):
        job_env(inputs={"a-b": Path("/x"), "a_b": Path("/y")}, outputs={})
