"""The cloud options of ``bourse server`` and ``bourse up`` (docs/clouds.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from bourse.core.errors import InvalidInput
from bourse.core.units import parse_duration
from bourse.server.config import CLOUDS, CloudsConfig

F = TypeVar("F", bound=Callable[..., Any])
MAX_TIMEOUT_S = 30 * 86400.0


def cloud_options(func: F) -> F:
    """Add --cloud, --idle-timeout, --boot-timeout, --agent-url, --aws-regions, --aws-image,
    --lambda-regions, --lambda-ssh-key, --lambda-image."""
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
    ]
    for option in reversed(options):
        func = option(func)
    return func


CLOUD_KEYS = ("clouds", "idle_timeout", "boot_timeout", "agent_url", "aws_regions",
              "aws_image", "lambda_regions", "lambda_ssh_key", "lambda_image")


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
                  lambda_image: str | None = None) -> CloudsConfig:
    names = tuple(dict.fromkeys(n.strip().lower() for c in clouds for n in c.split(",")
                                if n.strip()))
    for name in names:
        if name not in CLOUDS:
            raise click.BadParameter(f"unknown cloud {name!r}; bourse launches on "
                                     f"{', '.join(CLOUDS)}", param_hint="--cloud")
    try:
        idle = parse_duration(idle_timeout, field="--idle-timeout", at_most=MAX_TIMEOUT_S)
        boot = parse_duration(boot_timeout, field="--boot-timeout", at_most=MAX_TIMEOUT_S)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint=exc.field) from exc
    for flag, value in (("--idle-timeout", idle), ("--boot-timeout", boot)):
        if value <= 0:
            raise click.BadParameter("must be longer than 0 s", param_hint=flag)
    if agent_url is not None and not agent_url.startswith(("http://", "https://")):
        raise click.BadParameter(f"{agent_url!r} is not an http(s) URL", param_hint="--agent-url")
    return CloudsConfig(enabled=names, idle_timeout_s=idle, boot_timeout_s=boot,
                        agent_url=agent_url.rstrip("/") if agent_url else None,
                        regions=_per_cloud({"aws": _regions(aws_regions),
                                            "lambda": _regions(lambda_regions)}),
                        image=_per_cloud({"aws": aws_image, "lambda": lambda_image}),
                        ssh_key=_per_cloud({"lambda": lambda_ssh_key}))


def server_args(options: dict[str, Any]) -> list[str]:
    """The same options as ``bourse server`` arguments (``bourse up`` passes them on)."""
    args: list[str] = []
    for name in options["clouds"]:
        args += ["--cloud", name]
    args += ["--idle-timeout", str(options["idle_timeout"]),
             "--boot-timeout", str(options["boot_timeout"])]
    for key, flag in (("agent_url", "--agent-url"), ("aws_regions", "--aws-regions"),
                      ("aws_image", "--aws-image"), ("lambda_regions", "--lambda-regions"),
                      ("lambda_ssh_key", "--lambda-ssh-key"), ("lambda_image", "--lambda-image")):
        if options.get(key):
            args += [flag, str(options[key])]
    return args
