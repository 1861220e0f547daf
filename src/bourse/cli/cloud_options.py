"""The cloud options of ``bourse server`` and ``bourse up`` (docs/clouds.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from bourse.core.errors import InvalidInput
from bourse.core.gpus import catalogue
from bourse.core.units import parse_duration, parse_share
from bourse.server.config import CLOUDS, CloudsConfig, KubeSettings

F = TypeVar("F", bound=Callable[..., Any])
MAX_TIMEOUT_S = 30 * 86400.0


def cloud_options(func: F) -> F:
    """Add --cloud, --idle-timeout, --boot-timeout, --agent-url, --aws-regions, --aws-image,
    --lambda-regions, --lambda-ssh-key, --lambda-image, the --kube-* options and
    --cloud-sla."""
    options = [
        click.option("--cloud", "clouds", multiple=True, envvar="BOURSE_CLOUDS",
                     show_envvar=True,
                     metavar="NAME", help=f"Launch machines on this cloud for jobs no node "
                     f"can take ({', '.join(CLOUDS)}); repeat for several. Env: BOURSE_CLOUDS "
                     "(comma-separated). `bourse clouds` shows what each can do."),
        click.option("--idle-timeout", default="10m", show_default=True, metavar="DURATION",
                     envvar="BOURSE_IDLE_TIMEOUT", show_envvar=True,
                     help="A launched node with no work this long is terminated (e.g. 600, "
                          "10m, 1h)."),
        click.option("--boot-timeout", default="15m", show_default=True, metavar="DURATION",
                     envvar="BOURSE_BOOT_TIMEOUT", show_envvar=True,
                     help="A launched node whose agent has not enrolled this long is "
                          "terminated and its offer blocked for a while."),
        click.option("--agent-url", metavar="URL", envvar="BOURSE_AGENT_URL",
                     show_envvar=True,
                     help="How launched machines reach this coordinator (default: its URL)."),
        click.option("--aws-regions", metavar="R1,R2", envvar="BOURSE_AWS_REGIONS",
                     show_envvar=True,
                     help="AWS regions to launch in (default: every region of the catalogue)."),
        click.option("--aws-image", metavar="AMI", envvar="BOURSE_AWS_IMAGE",
                     show_envvar=True,
                     help="The AMI launched machines boot (default: the AWS Deep Learning "
                          "AMI of the region)."),
        click.option("--lambda-regions", metavar="R1,R2", envvar="BOURSE_LAMBDA_REGIONS",
                     show_envvar=True, help="Lambda Cloud regions to launch in (default: every "
                     "region of the catalogue). The API key: LAMBDA_API_KEY or "
                     "LAMBDA_API_KEY_FILE."),
        click.option("--lambda-ssh-key", metavar="NAME", envvar="BOURSE_LAMBDA_SSH_KEY",
                     show_envvar=True, help="The SSH key (its name in the Lambda account) "
                     "launched machines get; Lambda requires one (default: the account's only "
                     "key)."),
        click.option("--lambda-image", metavar="FAMILY|ID", envvar="BOURSE_LAMBDA_IMAGE",
                     show_envvar=True, help="The Lambda image family or image id launched "
                     "machines boot (default: Lambda's latest Lambda Stack image)."),
        click.option("--kubeconfig", metavar="PATH", envvar="BOURSE_KUBECONFIG",
                     show_envvar=True, help="The kubeconfig of the cluster to launch pods on "
                     "(--cloud kubernetes; default: KUBECONFIG, ~/.kube/config, or the pod's "
                     "service account in the cluster)."),
        click.option("--kube-context", metavar="NAME", envvar="BOURSE_KUBE_CONTEXT",
                     show_envvar=True, help="The kubeconfig's context (default: its "
                     "current-context)."),
        click.option("--kube-namespace", metavar="NAME", envvar="BOURSE_KUBE_NAMESPACE",
                     show_envvar=True, help="The namespace of the pods (default: the "
                     "context's, else default)."),
        click.option("--kube-gpu-price", metavar="MODEL=USD,...", envvar="BOURSE_KUBE_GPU_PRICE",
                     show_envvar=True, help="The cluster's price per GPU-hour, by GPU model "
                     "(a100=1.2,h100=2.5; *=1 for any other; 0 for free). A model without a "
                     "price is not offered."),
        click.option("--kube-image", metavar="IMAGE", envvar="BOURSE_KUBE_IMAGE",
                     show_envvar=True, help="The image of the agent's pods (default: "
                     "python:3.12-slim; bourse[agent] is installed at boot unless the image "
                     "has it)."),
        click.option("--kube-pending-timeout", default="10m", show_default=True,
                     metavar="DURATION", envvar="BOURSE_KUBE_PENDING_TIMEOUT",
                     show_envvar=True, help="A pod still Pending this long (no node has "
                     "room, the autoscaler does not scale) is deleted and the job tries the "
                     "next offer."),
        click.option("--cloud-sla", metavar="CLOUD=SHARE,...", envvar="BOURSE_CLOUD_SLA",
                     show_envvar=True, help="The availability each cloud declares for its "
                     "machines (aws=99.5%,kubernetes=0.99): its launched nodes declare it, "
                     "and `bourse nodes show` sets it beside what was measured."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


CLOUD_KEYS = ("clouds", "idle_timeout", "boot_timeout", "agent_url", "aws_regions",
              "aws_image", "lambda_regions", "lambda_ssh_key", "lambda_image", "kubeconfig",
              "kube_context", "kube_namespace", "kube_gpu_price", "kube_image",
              "kube_pending_timeout", "cloud_sla")


def pop_cloud_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {key: kwargs.pop(key) for key in CLOUD_KEYS}


def _regions(text: str | None) -> tuple[str, ...]:
    return tuple(r.strip() for r in (text or "").split(",") if r.strip())


def _per_cloud(values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple((cloud, value) for cloud, value in values.items() if value)


def clouds_config(*, clouds: tuple[str, ...], idle_timeout: str, boot_timeout: str,
                  agent_url: str | None, aws_regions: str | None,
                  aws_image: str | None, lambda_regions: str | None = None,
                  lambda_ssh_key: str | None = None,
                  lambda_image: str | None = None, kubeconfig: str | None = None,
                  kube_context: str | None = None, kube_namespace: str | None = None,
                  kube_gpu_price: str | None = None, kube_image: str | None = None,
                  kube_pending_timeout: str = "10m",
                  cloud_sla: str | None = None) -> CloudsConfig:
    names = tuple(dict.fromkeys(n.strip().lower() for c in clouds for n in c.split(",")
                                if n.strip()))
    for name in names:
        if name not in CLOUDS:
            raise click.BadParameter(f"unknown cloud {name!r}; bourse launches on "
                                     f"{', '.join(CLOUDS)}", param_hint="--cloud")
    idle = _duration(idle_timeout, "--idle-timeout", MAX_TIMEOUT_S)
    boot = _duration(boot_timeout, "--boot-timeout", MAX_TIMEOUT_S)
    if agent_url is not None and not agent_url.startswith(("http://", "https://")):
        raise click.BadParameter(f"{agent_url!r} is not an http(s) URL", param_hint="--agent-url")
    kube = KubeSettings(kubeconfig=kubeconfig, context=kube_context, namespace=kube_namespace,
                        gpu_prices=gpu_prices(kube_gpu_price),
                        pending_timeout_s=_duration(kube_pending_timeout,
                                                    "--kube-pending-timeout", 86400.0))
    if "kubernetes" in names and not kube.gpu_prices:
        raise click.BadParameter("a cluster's GPUs have no price by default: give one per "
                                 "GPU-hour, e.g. --kube-gpu-price a100=1.2,h100=2.5 (*=PRICE "
                                 "for any model, 0 for free)", param_hint="--kube-gpu-price")
    return CloudsConfig(enabled=names, idle_timeout_s=idle, boot_timeout_s=boot,
                        agent_url=agent_url.rstrip("/") if agent_url else None,
                        regions=_per_cloud({"aws": _regions(aws_regions),
                                            "lambda": _regions(lambda_regions)}),
                        image=_per_cloud({"aws": aws_image, "lambda": lambda_image,
                                          "kubernetes": kube_image}),
                        ssh_key=_per_cloud({"lambda": lambda_ssh_key}), kube=kube,
                        sla=declared_slas(cloud_sla))


def declared_slas(text: str | None) -> tuple[tuple[str, float], ...]:
    """``aws=99.5%,kubernetes=0.99`` as (cloud, share) pairs."""
    out: dict[str, float] = {}
    for part, key, sep, share in _pairs(text):
        name = key.lower()
        if not sep or name not in CLOUDS:
            raise click.BadParameter(f"{part!r} is not CLOUD=SHARE with a cloud of "
                                     f"{', '.join(CLOUDS)} (e.g. aws=99.5%)",
                                     param_hint="--cloud-sla")
        try:
            out[name] = parse_share(share, field="--cloud-sla")
        except InvalidInput as exc:
            raise click.BadParameter(f"{part!r}: {exc}", param_hint="--cloud-sla") from exc
    return tuple(sorted(out.items()))


def _pairs(text: str | None) -> Iterator[tuple[str, str, str, str]]:
    """``K=V,K=V`` as (the part, K, "=" or "" when it has none, V), each stripped."""
    for part in (p.strip() for p in (text or "").split(",")):
        if part:
            key, sep, value = part.partition("=")
            yield part, key.strip(), sep, value.strip()


def _duration(text: str, flag: str, at_most: float) -> float:
    try:
        value = parse_duration(text, field=flag, at_most=at_most)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from exc
    if value <= 0:
        raise click.BadParameter("must be longer than 0 s", param_hint=flag)
    return value


def gpu_prices(text: str | None) -> tuple[tuple[str, float], ...]:
    """``a100=1.2,h100-80gb=2.5,*=1`` as (model id, $/GPU-hour) pairs: a family names each
    of its models; ``*`` any other model."""
    out: dict[str, float] = {}
    for part, label, sep, amount in _pairs(text):
        try:
            price = float(amount)
        except ValueError:
            price = -1.0
        if not sep or not label or not (0 <= price <= 10_000):
            raise click.BadParameter(f"{part!r} is not MODEL=USD (e.g. a100=1.2, *=0.5); the "
                                     "price is per GPU-hour, 0 to 10000",
                                     param_hint="--kube-gpu-price")
        if label == "*":
            out["*"] = price
            continue
        try:
            models = catalogue().resolve(label).models
        except InvalidInput as exc:
            raise click.BadParameter(str(exc), param_hint="--kube-gpu-price") from exc
        out.update({m.id: price for m in models})
    return tuple(sorted(out.items()))


def server_args(options: dict[str, Any]) -> list[str]:
    """The same options as ``bourse server`` arguments (``bourse up`` passes them on)."""
    args: list[str] = []
    for name in options["clouds"]:
        args += ["--cloud", name]
    args += ["--idle-timeout", str(options["idle_timeout"]),
             "--boot-timeout", str(options["boot_timeout"])]
    for key, flag in (("agent_url", "--agent-url"), ("aws_regions", "--aws-regions"),
                      ("aws_image", "--aws-image"), ("lambda_regions", "--lambda-regions"),
                      ("lambda_ssh_key", "--lambda-ssh-key"), ("lambda_image", "--lambda-image"),
                      ("kubeconfig", "--kubeconfig"), ("kube_context", "--kube-context"),
                      ("kube_namespace", "--kube-namespace"),
                      ("kube_gpu_price", "--kube-gpu-price"), ("kube_image", "--kube-image"),
                      ("kube_pending_timeout", "--kube-pending-timeout"),
                      ("cloud_sla", "--cloud-sla")):
        if options.get(key):
            args += [flag, str(options[key])]
    return args
