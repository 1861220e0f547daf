"""How to reach a store: endpoint, region, addressing style and credentials, read from and
written to the environment variables that common S3 tools understand.

``StoreSettings.env()`` and ``AccessKey.env()`` are what the agent puts in a job's environment;
``StoreSettings.from_env()`` is what code inside the job (or the agent) reads back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True)
class AccessKey:
    """An S3 access key. The secret and session token never appear in ``repr`` (or logs)."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    def env(self) -> dict[str, str]:
        env = {"AWS_ACCESS_KEY_ID": self.access_key_id,
               "AWS_SECRET_ACCESS_KEY": self.secret_access_key}
        if self.session_token:
            env["AWS_SESSION_TOKEN"] = self.session_token
        return env

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> AccessKey | None:
        key, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
        if not key or not secret:
            return None
        return cls(key, secret, environ.get("AWS_SESSION_TOKEN") or None)


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Settings for every bucket an opener reaches.

    ``endpoint`` is an S3-compatible endpoint URL (SeaweedFS, MinIO, R2); ``None`` means AWS.
    ``path_style`` defaults to path-style requests when an endpoint is set and virtual-hosted
    ones on AWS. ``access_key`` ``None`` leaves credentials to the environment (env vars,
    instance profile, ...). ``options`` passes extra obstore settings (e.g. a GCS service
    account path or an Azure account name) through unchanged. ``ca_file``: a PEM bundle of
    certificate authorities to trust for an https endpoint, beside the system's (a private
    store's own CA); read from and written to ``AWS_CA_BUNDLE``, as boto3 and the AWS CLI do.
    """

    endpoint: str | None = None
    region: str | None = None
    path_style: bool | None = None
    access_key: AccessKey | None = None
    options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    max_retries: int = 3
    timeout_s: float = 300.0
    ca_file: str | None = None

    @property
    def uses_path_style(self) -> bool:
        return self.path_style if self.path_style is not None else self.endpoint is not None

    @property
    def allows_http(self) -> bool:
        return bool(self.endpoint and self.endpoint.startswith("http://"))

    def with_access_key(self, access_key: AccessKey | None) -> StoreSettings:
        return dataclasses.replace(self, access_key=access_key)

    def env(self) -> dict[str, str]:
        """Endpoint, region and style as environment variables (no credentials): boto3 and the
        AWS CLI read ``AWS_ENDPOINT_URL``, s5cmd ``S3_ENDPOINT_URL``, obstore ``AWS_ENDPOINT``,
        ``AWS_ALLOW_HTTP`` and ``AWS_VIRTUAL_HOSTED_STYLE_REQUEST``."""
        env: dict[str, str] = {}
        if self.region:
            env |= {"AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region}
        if self.endpoint:
            env |= {"BOURSE_S3_ENDPOINT": self.endpoint, "AWS_ENDPOINT_URL": self.endpoint,
                    "AWS_ENDPOINT_URL_S3": self.endpoint, "S3_ENDPOINT_URL": self.endpoint,
                    "AWS_ENDPOINT": self.endpoint}
        if self.allows_http:
            env["AWS_ALLOW_HTTP"] = "true"
        if self.ca_file:
            env["AWS_CA_BUNDLE"] = self.ca_file
        path_style = self.uses_path_style
        env["BOURSE_S3_PATH_STYLE"] = "true" if path_style else "false"
        env["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false" if path_style else "true"
        return env

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> StoreSettings:
        endpoint = (environ.get("BOURSE_S3_ENDPOINT") or environ.get("AWS_ENDPOINT_URL_S3")
                    or environ.get("AWS_ENDPOINT_URL") or None)
        style = environ.get("BOURSE_S3_PATH_STYLE")
        return cls(
            endpoint=endpoint,
            region=environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None,
            path_style=None if style is None else style.strip().lower() in _TRUE,
            access_key=AccessKey.from_env(environ),
            ca_file=environ.get("AWS_CA_BUNDLE") or None)
