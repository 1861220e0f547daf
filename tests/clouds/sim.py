"""A simulated AWS account: moto in server mode on 127.0.0.1, behind the fault proxy.

moto serves EC2, SSM and STS over real HTTP, so the provider's boto3 clients sign, send and
parse real requests. Where moto falls short of EC2 it is said here: it stores a launch's
``ClientToken`` but does not honour it (the same token twice makes two instances) nor filter
on it; the ``client-token`` filter AWS documents for DescribeInstances is added (moto keeps
the token on the instance, only the filter's name is missing). moto has no placement groups
at all: ``placement_groups`` serves CreatePlacementGroup, DescribePlacementGroups (its
``group-name`` and ``tag:`` filters) and DeletePlacementGroup with EC2's documented shapes and
errors (``InvalidPlacementGroup.Duplicate`` / ``.Unknown`` / ``.InUse``), and RunInstances
refuses an unknown ``Placement.GroupName`` and keeps it on the instance, which
DescribeInstances then shows (moto's instances have an empty ``GroupName`` already).
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
from faultproxy import FaultProxy
from moto.core.responses import ActionResult, EmptyResult
from moto.ec2 import utils as ec2_utils
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.responses import EC2Response
from moto.server import ThreadedMotoServer
from moto.ssm.models import Parameter, ssm_backends

ACCOUNT = "123456789012"  # moto's default account
CREDENTIALS = {"aws_access_key_id": "AKIDSIMULATED", "aws_secret_access_key": "simulated"}


def add_client_token_filter() -> None:
    ec2_utils.filter_dict_attribute_mapping.setdefault("client-token", "client_token")


# region -> group name -> the group as DescribePlacementGroups gives it
PLACEMENT_GROUPS: dict[str, dict[str, dict[str, Any]]] = {}
_GROUP_IDS = itertools.count(1)


def _groups(response: Any) -> dict[str, dict[str, Any]]:
    return PLACEMENT_GROUPS.setdefault(response.region, {})


def _create_placement_group(self: Any) -> ActionResult:
    self.error_on_dryrun()
    name, groups = self._get_param("GroupName"), _groups(self)
    if name in groups:
        raise EC2ClientError("InvalidPlacementGroup.Duplicate",
                             f"The Placement Group '{name}' already exists.")
    tags = self._parse_tag_specification().get("placement-group", {})
    groups[name] = {"GroupName": name, "GroupId": f"pg-{next(_GROUP_IDS):017x}",
                    "Strategy": self._get_param("Strategy"), "State": "available",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
    return ActionResult({"PlacementGroup": groups[name]})


def _matches(group: dict[str, Any], filters: dict[str, list[str]]) -> bool:
    tags = {t["Key"]: t["Value"] for t in group["Tags"]}
    for name, values in filters.items():
        found = tags.get(name[4:]) if name.startswith("tag:") else group.get(
            {"group-name": "GroupName", "strategy": "Strategy", "state": "State"}.get(name, ""))
        if found not in values:
            return False
    return True


def _describe_placement_groups(self: Any) -> ActionResult:
    filters = self._filters_from_querystring()
    names = self._get_param("GroupNames", [])
    return ActionResult({"PlacementGroups": [
        g for g in _groups(self).values()
        if _matches(g, filters) and (not names or g["GroupName"] in names)]})


def _delete_placement_group(self: Any) -> EmptyResult:
    name, groups = self._get_param("GroupName"), _groups(self)
    if name not in groups:
        raise EC2ClientError("InvalidPlacementGroup.Unknown",
                             f"The Placement Group '{name}' is unknown.")
    if any(i.placement.group_name == name and i.state not in ("terminated", "shutting-down")
           for i in self.ec2_backend.all_instances()):
        raise EC2ClientError("InvalidPlacementGroup.InUse",
                             f"The placement group '{name}' is in use and may not be deleted.")
    del groups[name]
    return EmptyResult()


def add_placement_groups() -> None:
    """Placement groups, which moto lacks (see the module's docstring); idempotent."""
    if getattr(EC2Response, "_bourse_placement_groups", False):
        return
    run_instances = EC2Response.run_instances

    def run_in_group(self: Any) -> ActionResult:
        name = self._get_param("Placement.GroupName")
        if name and name not in _groups(self):
            raise EC2ClientError("InvalidPlacementGroup.Unknown",
                                 f"The Placement Group '{name}' is unknown.")
        made = run_instances(self)
        for instance in made.result.instances:  # type: ignore[attr-defined]
            instance.placement.group_name = name or ""
        return made

    EC2Response.run_instances = run_in_group  # type: ignore[method-assign]
    for action, handler in (("create_placement_group", _create_placement_group),
                            ("describe_placement_groups", _describe_placement_groups),
                            ("delete_placement_group", _delete_placement_group)):
        setattr(EC2Response, action, handler)
    EC2Response._bourse_placement_groups = True  # type: ignore[attr-defined]


@dataclass
class Sim:
    moto: ThreadedMotoServer
    moto_url: str
    proxy: FaultProxy
    _session: boto3.session.Session = field(
        default_factory=lambda: boto3.session.Session(**CREDENTIALS))

    @property
    def url(self) -> str:
        """The endpoint a provider is given (the proxy)."""
        return self.proxy.url

    def session(self) -> boto3.session.Session:
        """A session with the simulated account's keys (one: it caches the API models)."""
        return self._session

    def client(self, service: str, region: str = "us-east-1") -> object:
        """A client straight to moto (not through the proxy), for a test's own looks."""
        return self.session().client(service, region_name=region,  # type: ignore[call-overload]
                                     endpoint_url=self.moto_url)

    def reset(self) -> None:
        """A proxy without rules or calls. The account is kept (emptying moto costs half a
        second a test): tests keep apart by their own exchange ids and tokens."""
        self.proxy.reset()

    @contextmanager
    def public_parameter(self, region: str, name: str, value: str) -> Iterator[None]:
        """Serve one of AWS's public SSM parameters (``/aws/service/...``), which moto does
        not have and refuses to let a client write, while the block runs."""
        parameters = ssm_backends[ACCOUNT][region]._parameters
        parameters[name].append(Parameter(
            account_id=ACCOUNT, name=name, value=value, parameter_type="String",
            description=None, allowed_pattern=None, keyid=None,
            last_modified_date=dt.datetime.now(dt.UTC), version=1, data_type="text"))
        try:
            yield
        finally:
            parameters.pop(name, None)

    def stop(self) -> None:
        self.proxy.stop()
        self.moto.stop()


def start() -> Sim:
    add_client_token_filter()
    add_placement_groups()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    url = f"http://{host}:{port}"
    return Sim(moto, url, FaultProxy(url).start())
