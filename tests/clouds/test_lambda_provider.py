"""The Lambda provider against a replayed Lambda Cloud API on 127.0.0.1 (``lambda_sim``: the
documented shapes of https://docs-api.lambda.ai/api/cloud, with faults injected): check,
launch, list, terminate; a retried launch finds its instance by name; each error code lands
in its failure class; a bad key disables the cloud; the key appears in no log or error."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from lambda_sim import KEY, LambdaSim, serve

from bourse.clouds.base import CloudError, LaunchSpec
from bourse.clouds.lambda_api import NO_KEY, LambdaApi, Pacer, api_key
from bourse.clouds.lambda_cloud import LambdaProvider
from bourse.core.launch import Failure

LAUNCH = "/instance-operations/launch"
REGIONS = ("us-east-1", "us-west-1")


@pytest.fixture(scope="module")
def _served() -> Iterator[tuple[LambdaSim, str]]:
    sim = LambdaSim()
    with serve(sim) as url:
        yield sim, url


@pytest.fixture
def sim(_served: tuple[LambdaSim, str]) -> LambdaSim:
    found = _served[0]
    found.__init__()  # type: ignore[misc]  # a fresh account, the same server
    found.capacity = {"gpu_1x_a10": {"us-east-1"}, "gpu_8x_h100_sxm5": {"us-west-1"}}
    return found


@pytest.fixture
def url(_served: tuple[LambdaSim, str]) -> str:
    return _served[1]


def provider(url: str, key: str | None = KEY, **options: object) -> LambdaProvider:
    api = LambdaApi(key, base_url=url, pacer=Pacer(0.0, 0.0))
    return LambdaProvider(REGIONS, api=api, **options)  # type: ignore[arg-type]


def spec(launch: str = "l-0a1b2c3d4e5f", *, exchange: str = "x-3f9c2a1b7d4e",
         region: str = "us-east-1", instance_type: str = "gpu_1x_a10",
         spot: bool = False) -> LaunchSpec:
    return LaunchSpec(launch_id=launch, exchange_id=exchange, node_id="n-5e6f7a8b9c0d",
                      project_id="p-1", region=region, instance_type=instance_type,
                      user_data="#!/bin/sh\necho enrol-token-abc\n", client_token="ct-1",
                      spot=spot)


def test_check_passes_with_a_good_key_and_one_ssh_key(sim: LambdaSim, url: str) -> None:
    found = provider(url).check()
    assert found.enabled and found.regions == REGIONS
    assert found.identity == "SSH key bourse-ops"
    assert sim.auth_headers[-1] == f"Bearer {KEY}"  # the documented bearer header


def test_a_bad_key_disables_the_cloud_saying_why(sim: LambdaSim, url: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    found = provider(url, key="wrong-key-12345").check()
    assert not found.enabled
    assert found.reason == ("GET /instance-types was refused (global/invalid-api-key): API key "
                            "was invalid, expired, or deleted. (scripted suggestion)")
    assert "wrong-key-12345" not in caplog.text + repr(found)


def test_no_key_disables_the_cloud_naming_the_variables(url: str) -> None:
    found = provider(url, key=None).check()
    assert not found.enabled and found.reason == NO_KEY and "LAMBDA_API_KEY" in NO_KEY


def test_a_missing_ssh_key_disables_the_cloud(sim: LambdaSim, url: str) -> None:
    found = provider(url, ssh_key="laptop").check()
    assert not found.enabled and "'laptop' is not in the Lambda account" in (found.reason or "")


def test_launch_list_terminate(sim: LambdaSim, url: str) -> None:
    cloud = provider(url)
    assert cloud.check().enabled
    inst = cloud.launch(spec())
    [body] = sim.launches()
    assert body == {"region_name": "us-east-1", "instance_type_name": "gpu_1x_a10",
                    "ssh_key_names": ["bourse-ops"], "quantity": 1,
                    "name": "bourse.x-3f9c2a1b7d4e.l-0a1b2c3d4e5f.n-5e6f7a8b9c0d",
                    "user_data": "#!/bin/sh\necho enrol-token-abc\n"}
    assert sim.user_data[inst.id] == body["user_data"]
    assert (inst.state, inst.launch_id, inst.region) == ("pending", "l-0a1b2c3d4e5f",
                                                         "us-east-1")
    [listed] = cloud.tagged("x-3f9c2a1b7d4e", REGIONS)
    assert (listed.id, listed.state, listed.tags["bourse:node"]) == (inst.id, "pending",
                                                                     "n-5e6f7a8b9c0d")
    sim.settle()
    assert cloud.tagged("x-3f9c2a1b7d4e", REGIONS)[0].state == "running"
    cloud.terminate("us-east-1", [inst.id, inst.id])
    assert sim.calls[-1] == ("POST", "/instance-operations/terminate",
                             {"instance_ids": [inst.id]})
    assert cloud.tagged("x-3f9c2a1b7d4e", REGIONS) == []  # terminating: not alive
    sim.settle()
    cloud.terminate("us-east-1", [inst.id])  # already gone: not an error


def test_a_retried_launch_returns_the_instance_its_name_made(sim: LambdaSim, url: str) -> None:
    cloud = provider(url)
    first = cloud.launch(spec())
    again = provider(url).launch(spec())  # a restarted coordinator, the same launch
    assert again.id == first.id
    assert len(sim.launches()) == 1 and len(sim.alive()) == 1
    other = cloud.launch(spec("l-ffffffffffff"))
    assert other.id != first.id and len(sim.launches()) == 2


def test_no_capacity_listed_is_a_capacity_failure_without_a_launch_call(
        sim: LambdaSim, url: str) -> None:
    cloud = provider(url)
    with pytest.raises(CloudError) as caught:
        cloud.launch(spec(region="us-west-1"))
    assert caught.value.failure is Failure.CAPACITY
    assert caught.value.code == "instance-operations/launch/insufficient-capacity"
    assert "regions with capacity now: us-east-1" in caught.value.message
    assert sim.launches() == []
    with pytest.raises(CloudError):  # the next place is judged on the same listing
        cloud.launch(spec(region="us-west-1", instance_type="gpu_1x_a100_sxm4"))
    assert [p for _, p, _ in sim.calls].count("/instance-types") == 1


def test_a_type_lambda_does_not_list_is_unsupported(sim: LambdaSim, url: str) -> None:
    with pytest.raises(CloudError) as caught:
        provider(url).launch(spec(instance_type="gpu_1x_a6000"))
    assert caught.value.failure is Failure.UNSUPPORTED and sim.launches() == []


def test_spot_is_refused_before_any_call(sim: LambdaSim, url: str) -> None:
    with pytest.raises(CloudError) as caught:
        provider(url).launch(spec(spot=True))
    assert caught.value.failure is Failure.UNSUPPORTED and sim.calls == []


ERRORS = [
    (400, "instance-operations/launch/insufficient-capacity", Failure.CAPACITY),
    (400, "global/quota-exceeded", Failure.QUOTA),
    (400, "global/invalid-parameters", Failure.CONFIG),
    (404, "global/object-does-not-exist", Failure.CONFIG),
    (401, "global/invalid-api-key", Failure.AUTH),
    (403, "global/account-inactive", Failure.AUTH),
    (429, None, Failure.THROTTLE),
    (503, "provider/internal-unavailable", Failure.THROTTLE),
    (500, "global/internal-error", Failure.UNKNOWN),
]


@pytest.mark.parametrize(("status", "code", "failure"), ERRORS)
def test_each_launch_error_lands_in_its_class(sim: LambdaSim, url: str, status: int,
                                              code: str | None, failure: Failure) -> None:
    sim.fail("POST", LAUNCH, status, code, body=None if code else "rate limited")
    with pytest.raises(CloudError) as caught:
        provider(url).launch(spec())
    assert caught.value.failure is failure
    assert caught.value.code == (code or f"http-{status}")
    assert caught.value.where == "us-east-1/gpu_1x_a10"
    assert len(sim.launches()) == 1 and sim.alive() == []


def test_an_unreachable_api_is_retried_at_the_same_place() -> None:
    cloud = LambdaProvider(REGIONS, api=LambdaApi(KEY, base_url="http://127.0.0.1:9/api/v1",
                                                  timeout=2.0, pacer=Pacer(0.0, 0.0)))
    with pytest.raises(CloudError) as caught:
        cloud.launch(spec())
    assert caught.value.failure is Failure.THROTTLE and KEY not in str(caught.value)


def test_the_reconciler_sees_only_this_exchanges_instances(sim: LambdaSim, url: str) -> None:
    cloud = provider(url)
    mine = cloud.launch(spec())
    cloud.launch(spec("l-111111111111", exchange="x-000000000000"))  # another exchange's
    sim.instances["f" * 32] = {**sim.instances[mine.id], "id": "f" * 32, "name": "My Instance"}
    assert [i.id for i in cloud.tagged("x-3f9c2a1b7d4e", REGIONS)] == [mine.id]
    assert cloud.tagged("x-3f9c2a1b7d4e", ("us-west-1",)) == []


def test_one_unknown_id_does_not_keep_the_others_alive(sim: LambdaSim, url: str) -> None:
    cloud = provider(url)
    a = cloud.launch(spec("l-aaaaaaaaaaaa"))
    b = cloud.launch(spec("l-bbbbbbbbbbbb"))
    cloud.terminate("us-east-1", [a.id, "0" * 32, b.id])
    assert {i["status"] for i in sim.instances.values()} == {"terminating"}


def test_other_terminate_errors_are_raised(sim: LambdaSim, url: str) -> None:
    sim.fail("POST", "/instance-operations/terminate", 429)
    with pytest.raises(CloudError) as caught:
        provider(url).terminate("us-east-1", ["a" * 32])
    assert caught.value.failure is Failure.THROTTLE


def test_the_key_is_in_no_log_and_no_error(sim: LambdaSim, url: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    cloud = provider(url)
    cloud.check()
    cloud.launch(spec())
    sim.fail("POST", LAUNCH, 400, body={"error": {"code": "global/invalid-parameters",
                                                  "message": f"bad key {KEY} in request"}})
    with pytest.raises(CloudError) as caught:
        cloud.launch(spec("l-999999999999"))
    seen = caplog.text + str(caught.value) + repr(cloud) + caught.value.message
    assert KEY not in seen and "[redacted]" in caught.value.message
    assert "enrol-token-abc" not in caplog.text  # nor the user data


def test_the_key_comes_from_the_environment_or_a_file(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "lambda_keys"  # type: ignore[operator]
    path.write_text("# a comment\napi_key = from-file\n")
    assert api_key({"LAMBDA_API_KEY": " from-env "}) == "from-env"
    assert api_key({"LAMBDA_API_KEY_FILE": str(path)}) == "from-file"
    assert api_key({"LAMBDA_API_KEY_FILE": str(path) + ".missing"}) is None
    assert api_key({}) is None


def test_cloud_lambda_is_configured_from_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    from bourse.cli.cloud_options import clouds_config, server_args
    from bourse.server.launcher.clouds import make_provider

    options = {"clouds": ("lambda",), "idle_timeout": "10m", "boot_timeout": "15m",
               "agent_url": None, "aws_regions": None, "aws_image": None,
               "lambda_regions": "us-east-1, us-west-1", "lambda_ssh_key": "ops",
               "lambda_image": "lambda-stack-24-04"}
    config = clouds_config(**options)  # type: ignore[arg-type]
    assert config.enabled == ("lambda",) and config.regions_of("lambda") == REGIONS
    assert (config.ssh_key_of("lambda"), config.image_of("lambda")) == ("ops",
                                                                        "lambda-stack-24-04")
    assert server_args(options)[-6:] == ["--lambda-regions", "us-east-1, us-west-1",
                                         "--lambda-ssh-key", "ops",
                                         "--lambda-image", "lambda-stack-24-04"]
    monkeypatch.delenv("LAMBDA_API_KEY", raising=False)
    monkeypatch.delenv("LAMBDA_API_KEY_FILE", raising=False)
    made = make_provider("lambda", config)
    assert isinstance(made, LambdaProvider) and made.regions == REGIONS
    assert made.check().reason == NO_KEY  # no call is made without a key
