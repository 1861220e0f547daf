"""The Kubernetes provider against a replayed API server (httpx's MockTransport).

The replay answers in the API's documented shapes (core/v1 objects; failures as ``Status``
objects, https://kubernetes.io/docs/reference/using-api/api-concepts/#response-status-kind);
tests/k8s runs the same provider against a real kube-apiserver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from kube_replay import TOKEN, FakeApi
from kube_replay import status as _status

from bourse.clouds.base import CloudError, LaunchSpec
from bourse.clouds.kube_api import KubeApi, failure_of
from bourse.clouds.kube_config import KubeConfigError, KubeTarget, from_document, in_cluster
from bourse.clouds.kubernetes import KubeProvider
from bourse.core.launch import Failure


def _provider(api: FakeApi, **kw: Any) -> KubeProvider:
    target = KubeTarget(server="https://127.0.0.1:6443", context="lab", namespace="gpu",
                        token=TOKEN)
    return KubeProvider(target, prices={"*": 1.0}, api=KubeApi(
        target, transport=httpx.MockTransport(api)), **kw)


def _spec(launch: str = "L1", kind: str = "a100-80gb.x1", zone: str | None = "rack-a",
          **kw: Any) -> LaunchSpec:
    return LaunchSpec(launch_id=launch, exchange_id="ex1", node_id="n1", project_id="p1",
                      region="lab", instance_type=kind, user_data="#!/bin/sh\n", client_token="c",
                      zone=zone, **kw)


def test_check_enables_a_cluster_whose_credentials_may_make_pods_and_notes_what_it_left() -> None:
    api = FakeApi()
    check = _provider(api).check()
    assert check.enabled and check.regions == ("lab",)
    assert check.identity is not None and "v1.20.2" in check.identity and "gpu" in check.identity
    assert check.reason is not None and "node eks-g5" not in check.reason  # priced by type
    assert "unlabelled" in check.reason
    api.denied = {("create", "pods")}
    refused = _provider(api).check()
    assert not refused.enabled and refused.reason is not None
    assert "may not create pods in namespace 'gpu'" in refused.reason


def test_a_launch_makes_a_secret_and_a_pod_and_a_retry_makes_nothing_new() -> None:
    api = FakeApi()
    provider = _provider(api)
    provider.offers()
    first = provider.launch(_spec())
    assert (first.id, first.state, first.launch_id) == ("bourse-l1", "pending", "L1")
    assert set(api.objects) == {"/api/v1/namespaces/gpu/secrets/bourse-l1",
                                "/api/v1/namespaces/gpu/pods/bourse-l1"}
    again = provider.launch(_spec())  # a coordinator that died after the call tries again
    assert again.id == first.id and len(api.objects) == 2
    assert [i.id for i in provider.tagged("ex1", ["lab"])] == ["bourse-l1"]
    assert provider.tagged("other-exchange", ["lab"]) == []
    provider.terminate("lab", ["bourse-l1"])
    assert api.objects == {}
    provider.terminate("lab", ["bourse-l1"])  # already gone: not an error


def test_a_finished_pod_is_not_listed_and_is_cleaned_up() -> None:
    api = FakeApi()
    provider = _provider(api)
    provider.launch(_spec())
    api.objects["/api/v1/namespaces/gpu/pods/bourse-l1"]["status"] = {"phase": "Failed"}
    assert provider.tagged("ex1", ["lab"]) == []
    assert api.objects == {}


def test_a_shape_no_node_has_is_a_capacity_failure_and_spot_is_unsupported() -> None:
    provider = _provider(FakeApi())
    with pytest.raises(CloudError) as gone:
        provider.launch(_spec(kind="h100-80gb.x8", zone=None))
    assert gone.value.failure is Failure.CAPACITY
    with pytest.raises(CloudError) as spot:
        provider.launch(_spec(spot=True))
    assert spot.value.failure is Failure.UNSUPPORTED


@pytest.mark.parametrize(("response", "failure"), [
    (_status(403, "Forbidden", 'pods "bourse-l1" is forbidden: exceeded quota: gpu-quota, '
                               "requested: requests.nvidia.com/gpu=1, used: "
                               "requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8"),
     Failure.QUOTA),
    (_status(403, "Forbidden", 'pods is forbidden: User "system:serviceaccount:gpu:bourse" '
                               'cannot create resource "pods"'), Failure.AUTH),
    (_status(422, "Invalid", 'Pod "bourse-l1" is invalid: spec.containers[0].image: '
                             "Required value"), Failure.CONFIG),
    (_status(429, "TooManyRequests", "too many requests"), Failure.THROTTLE),
    (_status(500, "InternalError", "etcdserver: request timed out"), Failure.UNKNOWN),
    (httpx.Response(502, text="<html>bad gateway</html>"), Failure.UNKNOWN),
])
def test_the_apis_refusals_are_the_seams_failures_and_the_secret_is_undone(
        response: httpx.Response, failure: Failure) -> None:
    api = FakeApi()
    api.fail_create = response
    with pytest.raises(CloudError) as raised:
        _provider(api).launch(_spec())
    assert raised.value.failure is failure
    assert api.objects == {}  # the Secret made before the pod was deleted again


def test_the_token_never_reaches_an_error() -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        return _status(401, "Unauthorized", f"token {TOKEN} is expired")
    target = KubeTarget(server="https://127.0.0.1:6443", context="c", token=TOKEN)
    with pytest.raises(CloudError) as raised:
        KubeApi(target, transport=httpx.MockTransport(echo)).get("/version")
    assert raised.value.failure is Failure.AUTH and TOKEN not in str(raised.value)
    assert TOKEN not in repr(target) and TOKEN not in repr(KubeApi(target))
    assert failure_of("Forbidden", "exceeded quota: x") is Failure.QUOTA


def test_explain_gives_the_schedulers_words() -> None:
    api = FakeApi()
    provider = _provider(api)
    provider.launch(_spec())
    api.objects["/api/v1/namespaces/gpu/pods/bourse-l1"]["status"] = {
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                            "reason": "Unschedulable",
                                            "message": "0/9 nodes are available."}]}
    assert provider.explain("lab", "bourse-l1") == "Unschedulable: 0/9 nodes are available."
    assert provider.explain("lab", "bourse-nope") is None


KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "admin@lab",
    "clusters": [{"name": "lab", "cluster": {"server": "https://10.0.0.1:6443",
                                             "insecure-skip-tls-verify": True}}],
    "users": [{"name": "admin", "user": {"token": TOKEN}},
              {"name": "eks", "user": {"exec": {"command": "aws", "args": ["eks", "get-token"]}}}],
    "contexts": [{"name": "admin@lab", "context": {"cluster": "lab", "user": "admin",
                                                   "namespace": "gpu"}},
                 {"name": "arn:aws:eks:us-east-1:123:cluster/prod",
                  "context": {"cluster": "lab", "user": "eks"}}]}


def test_a_kubeconfig_context_is_read_and_an_exec_plugin_is_refused_with_what_to_do(
        tmp_path: Path) -> None:
    target = from_document(KUBECONFIG, None, None, tmp_path)
    assert (target.server, target.namespace, target.token, target.verify) == (
        "https://10.0.0.1:6443", "gpu", TOKEN, False)
    assert target.cluster == "admin-lab"  # a region must be a plain label
    with pytest.raises(KubeConfigError, match="kubectl create token"):
        from_document(KUBECONFIG, "arn:aws:eks:us-east-1:123:cluster/prod", None, tmp_path)
    with pytest.raises(KubeConfigError, match="no context named 'nope'"):
        from_document(KUBECONFIG, "nope", None, tmp_path)


def test_in_cluster_reads_the_service_account(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "namespace").write_text("bourse")
    (tmp_path / "ca.crt").write_text("x")
    target = in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1",
                         "KUBERNETES_SERVICE_PORT": "443"}, root=tmp_path)
    assert (target.server, target.namespace, target.token) == (
        "https://10.96.0.1:443", "bourse", TOKEN)
    assert target.verify == str(tmp_path / "ca.crt")
    with pytest.raises(KubeConfigError, match="no service account token"):
        in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, root=tmp_path / "none")


def _options(**kw: Any) -> dict[str, Any]:
    return {"clouds": ("kubernetes",), "idle_timeout": "10m", "boot_timeout": "15m",
            "agent_url": None, "aws_regions": None, "aws_image": None, **kw}


def test_the_options_price_a_clusters_gpus_and_refuse_a_cluster_without_prices(
        tmp_path: Path) -> None:
    import click

    from bourse.cli.cloud_options import clouds_config, server_args
    from bourse.clouds.kubernetes import Unreachable
    from bourse.server.launcher.clouds import make_provider

    config = clouds_config(**_options(kube_gpu_price="a100=1.2, h100-80gb=2.5,*=0",
                                      kube_pending_timeout="90s", kube_namespace="gpu",
                                      kubeconfig=str(tmp_path / "none")))
    prices = dict(config.kube.gpu_prices)
    assert prices["a100-40gb"] == prices["a100-80gb"] == 1.2  # a family names its models
    assert (prices["h100-80gb"], prices["*"]) == (2.5, 0.0)
    assert config.kube.pending_timeout_s == 90.0 and config.kube.namespace == "gpu"
    assert server_args(_options(kube_gpu_price="*=1"))[-2:] == ["--kube-gpu-price", "*=1"]
    made = make_provider("kubernetes", config)
    assert isinstance(made, Unreachable)  # no kubeconfig: disabled, saying why
    assert not made.check().enabled and "cannot read the kubeconfig" in str(made.check().reason)
    for bad, words in (({}, "have no price by default"),
                       ({"kube_gpu_price": "a100"}, "is not MODEL=USD"),
                       ({"kube_gpu_price": "a100=-1"}, "is not MODEL=USD"),
                       ({"kube_gpu_price": "a100=nan"}, "is not MODEL=USD"),
                       ({"kube_gpu_price": "warp-drive=1"}, "warp-drive"),
                       ({"kube_gpu_price": "*=1", "kube_pending_timeout": "0"}, "longer than")):
        with pytest.raises(click.BadParameter, match=words):
            clouds_config(**_options(**bad))


def test_cloud_sla_names_each_clouds_declared_share_and_refuses_what_it_cannot_read() -> None:
    import click

    from bourse.cli.cloud_options import clouds_config, server_args

    config = clouds_config(**_options(kube_gpu_price="*=1",
                                      cloud_sla="aws=99.5%, Kubernetes=0.99"))
    assert config.sla == (("aws", 0.995), ("kubernetes", 0.99))
    assert config.sla_of("aws") == 0.995 and config.sla_of("lambda") is None
    assert server_args(_options(cloud_sla="aws=99.5%"))[-2:] == ["--cloud-sla", "aws=99.5%"]
    for bad, words in (("gcp=0.9", "is not CLOUD=SHARE"), ("aws", "is not CLOUD=SHARE"),
                       ("aws=2", "aws=2"), ("aws=0", "aws=0"), ("aws=lots", "aws=lots")):
        with pytest.raises(click.BadParameter, match=words):
            clouds_config(**_options(kube_gpu_price="*=1", cloud_sla=bad))
