"""The Lambda provider's pure parts: the error table (codes of Lambda's OpenAPI document,
v1.8.3, https://cloud.lambda.ai/api/v1/openapi.json), instance names that carry the
exchange's tags, the launch request, the status mapping and the SSH key choice."""

from __future__ import annotations

import pytest

from bourse.clouds.base import LaunchSpec
from bourse.clouds.lambda_api import Pacer
from bourse.clouds.lambda_cloud import instance_of, launch_request, pick_ssh_key
from bourse.clouds.lambda_errors import QUOTA, classify, cloud_error
from bourse.clouds.lambda_names import MAX_NAME, instance_name, tags_of
from bourse.core.launch import Failure

CODES = [
    (400, "instance-operations/launch/insufficient-capacity", Failure.CAPACITY),
    (400, "global/quota-exceeded", Failure.QUOTA),
    (400, "global/invalid-parameters", Failure.CONFIG),
    (404, "global/object-does-not-exist", Failure.CONFIG),
    (400, "instance-operations/launch/file-system-in-wrong-region", Failure.CONFIG),
    (401, "global/invalid-api-key", Failure.AUTH),
    (403, "global/account-inactive", Failure.AUTH),
    (403, "global/invalid-address", Failure.AUTH),
    (403, "global/forbidden", Failure.AUTH),
    (500, "global/internal-error", Failure.UNKNOWN),
    (503, "provider/internal-unavailable", Failure.THROTTLE),
    (500, "provider/quota-exhausted", Failure.UNKNOWN),
    (400, "global/something-new", Failure.UNKNOWN),
    (429, None, Failure.THROTTLE),
    (429, "global/invalid-parameters", Failure.THROTTLE),  # a rate limit whatever the code
    (503, None, Failure.THROTTLE),
    (502, None, Failure.UNKNOWN),
    (401, None, Failure.AUTH),
    (400, None, Failure.CONFIG),
]


@pytest.mark.parametrize(("status", "code", "failure"), CODES)
def test_each_code_has_its_class(status: int, code: str | None, failure: Failure) -> None:
    assert classify(status, code) is failure


def test_an_error_keeps_the_code_the_message_and_the_suggestion() -> None:
    error = cloud_error(400, {"error": {"code": "global/quota-exceeded", "message": "Quota "
                                        "exceeded.", "suggestion": "Contact Support."}},
                        where="us-east-1/gpu_1x_a10", secret=None)
    assert (error.failure, error.code, error.where) == (
        Failure.QUOTA, "global/quota-exceeded", "us-east-1/gpu_1x_a10")
    assert error.message == "Quota exceeded. (Contact Support.)"
    assert error.quota == QUOTA


def test_an_error_without_a_body_is_named_by_its_status() -> None:
    error = cloud_error(502, None, where="GET /instances", secret=None, reason="Bad Gateway")
    assert (error.failure, error.code, error.message) == (Failure.UNKNOWN, "http-502",
                                                          "Bad Gateway")


def test_the_key_is_removed_from_an_error_that_echoes_it() -> None:
    error = cloud_error(401, {"error": {"code": "global/invalid-api-key",
                                        "message": "key sk_live_123 was invalid"}},
                        where="GET /instance-types", secret="sk_live_123")
    assert "sk_live_123" not in str(error) and "[redacted]" in error.message


def test_a_name_carries_the_exchange_launch_and_node() -> None:
    name = instance_name("x-3f9c2a1b7d4e", "l-0a1b2c3d4e5f", "n-5e6f7a8b9c0d")
    assert name == "bourse.x-3f9c2a1b7d4e.l-0a1b2c3d4e5f.n-5e6f7a8b9c0d"
    assert len(name) <= MAX_NAME
    assert tags_of(name) == {"bourse:exchange": "x-3f9c2a1b7d4e",
                             "bourse:launch": "l-0a1b2c3d4e5f", "bourse:node": "n-5e6f7a8b9c0d"}


@pytest.mark.parametrize("name", [None, "", "My Instance", "bourse.x-1.l-2", "bourse.x.1.l-2.n-3",
                                  "other.x-1.l-2.n-3"])
def test_other_names_are_not_the_exchanges(name: str | None) -> None:
    assert tags_of(name) is None


@pytest.mark.parametrize(("exchange", "launch"), [("x.1", "l-1"), ("x-1", "l 1"),
                                                  ("x-" + "a" * 19, "l-1")])
def test_an_id_that_would_not_read_back_is_refused(exchange: str, launch: str) -> None:
    with pytest.raises(ValueError, match="Lambda instance name"):
        instance_name(exchange, launch, "n-1")


def test_ids_at_the_limit_that_overflow_the_name_are_refused() -> None:
    with pytest.raises(ValueError, match="over Lambda's 64"):
        instance_name("x" * 20, "l" * 20, "n" * 20)


def _spec(**changes: object) -> LaunchSpec:
    base: dict[str, object] = dict(
        launch_id="l-1", exchange_id="x-1", node_id="n-1", project_id="p", region="us-east-1",
        instance_type="gpu_1x_a10", user_data="#!/bin/sh\n", client_token="ct-1")
    return LaunchSpec(**(base | changes))  # type: ignore[arg-type]


def test_the_launch_request_is_the_documented_body() -> None:
    body = launch_request(_spec(), name="bourse.x-1.l-1.n-1", ssh_key="ops", image=None)
    assert body == {"region_name": "us-east-1", "instance_type_name": "gpu_1x_a10",
                    "ssh_key_names": ["ops"], "name": "bourse.x-1.l-1.n-1", "quantity": 1,
                    "user_data": "#!/bin/sh\n"}


@pytest.mark.parametrize(("image", "field"), [
    ("lambda-stack-24-04", {"family": "lambda-stack-24-04"}),
    ("0123456789abcdef0123456789abcdef", {"id": "0123456789abcdef0123456789abcdef"})])
def test_an_image_is_a_family_or_an_id(image: str, field: dict[str, str]) -> None:
    assert launch_request(_spec(), name="n", ssh_key="k", image=image)["image"] == field
    assert launch_request(_spec(image=image), name="n", ssh_key="k", image=None)["image"] == field


@pytest.mark.parametrize(("status", "state", "alive"), [
    ("booting", "pending", True), ("active", "running", True), ("unhealthy", "running", True),
    ("terminating", "shutting-down", False), ("terminated", "terminated", False),
    ("preempted", "terminated", False)])
def test_lambda_statuses_in_the_seams_words(status: str, state: str, alive: bool) -> None:
    inst = instance_of({"id": "abc", "status": status, "name": "bourse.x-1.l-1.n-1",
                        "region": {"name": "us-east-1"}, "instance_type": {"name": "gpu_1x_a10"}})
    assert (inst.state, inst.alive, inst.launch_id, inst.region) == (state, alive, "l-1",
                                                                     "us-east-1")


@pytest.mark.parametrize(("wanted", "names", "key", "why"), [
    ("ops", ["ops", "me"], "ops", None),
    (None, ["only"], "only", None),
    ("gone", ["ops"], None, "'gone' is not in the Lambda account (it has: ops)"),
    (None, [], None, "has no SSH key"),
    (None, ["a", "b"], None, "several SSH keys (a, b): name one with --lambda-ssh-key"),
])
def test_the_ssh_key_a_launch_uses(wanted: str | None, names: list[str], key: str | None,
                                   why: str | None) -> None:
    found, reason = pick_ssh_key(wanted, names)
    assert found == key
    assert (reason is None) if why is None else (why in (reason or ""))


def test_calls_are_spaced_to_the_documented_rates() -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 3))
        now[0] += seconds

    pacer = Pacer(1.0, 12.0, clock=lambda: now[0], sleep=sleep)
    pacer.wait(launch=False)  # the first call goes at once
    now[0] += 0.25
    pacer.wait(launch=True)  # a second apart from the last call
    pacer.wait(launch=False)
    now[0] += 3.0
    pacer.wait(launch=True)  # 12 s apart from the last launch
    assert slept == [0.75, 1.0, 8.0]
