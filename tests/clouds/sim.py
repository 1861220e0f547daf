"""A simulated AWS account: moto in server mode on 127.0.0.1, behind the fault proxy.

moto serves EC2, SSM and STS over real HTTP, so the provider's boto3 clients sign, send and
parse real requests. Where moto falls short of EC2 it is said here: it stores a launch's
``ClientToken`` but does not honour it (the same token twice makes two instances) nor filter
on it; the ``client-token`` filter AWS documents for DescribeInstances is added (moto keeps
the token on the instance, only the filter's name is missing).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import boto3
from faultproxy import FaultProxy
from moto.ec2 import utils as ec2_utils
from moto.server import ThreadedMotoServer
from moto.ssm.models import Parameter, ssm_backends

ACCOUNT = "123456789012"  # moto's default account
CREDENTIALS = {"aws_access_key_id": "AKIDSIMULATED", "aws_secret_access_key": "simulated"}


def add_client_token_filter() -> None:
    ec2_utils.filter_dict_attribute_mapping.setdefault("client-token", "client_token")


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
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    url = f"http://{host}:{port}"
    return Sim(moto, url, FaultProxy(url).start())
