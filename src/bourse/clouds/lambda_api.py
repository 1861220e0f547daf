"""The Lambda Cloud API over HTTP: one request per call, errors as the seam's CloudError.

Lambda's Cloud API v1 (https://docs-api.lambda.ai/api/cloud; OpenAPI document at
https://cloud.lambda.ai/api/v1/openapi.json) is JSON over HTTPS with a bearer API key; a
success is ``{"data": ...}``, a failure ``{"error": {"code", "message", "suggestion"?}}``.
Its production base is ``https://cloud.lambda.ai/api/v1`` (``cloud.lambdalabs.com`` is the
document's deprecated secondary server). The client makes one attempt per call, like the
AWS provider's: the exchange decides what to retry (``lambda_errors``).

The API key comes from ``LAMBDA_API_KEY``, or from the file ``LAMBDA_API_KEY_FILE`` names
(the key alone, or SkyPilot's ``api_key = ...`` line). It is sent only in the
``Authorization`` header, kept out of ``repr``, and removed from any error text.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from bourse.clouds.base import CloudError
from bourse.clouds.lambda_errors import cloud_error, connection_error
from bourse.core.launch import Failure

API_URL = "https://cloud.lambda.ai/api/v1"
KEY_ENV, KEY_FILE_ENV, URL_ENV = "LAMBDA_API_KEY", "LAMBDA_API_KEY_FILE", "BOURSE_LAMBDA_API_URL"
PACE_S = 1.0  # "Requests to the API are generally limited to one request per second"
LAUNCH_PACE_S = 12.0  # "... the /instance-operations/launch endpoint ... one request per 12 s"
NO_KEY = (f"no Lambda API key: set {KEY_ENV} (or {KEY_FILE_ENV}, a file holding it); make one "
          "at https://cloud.lambda.ai/api-keys")


def _key_in(text: str) -> str | None:
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("api_key") and "=" in line:
            return line.split("=", 1)[1].strip() or None
        if line and not line.startswith("#"):
            return line
    return None


def api_key(env: Mapping[str, str] | None = None) -> str | None:
    """The API key of the environment (``LAMBDA_API_KEY``, else ``LAMBDA_API_KEY_FILE``'s)."""
    env = os.environ if env is None else env
    if env.get(KEY_ENV, "").strip():
        return env[KEY_ENV].strip()
    path = env.get(KEY_FILE_ENV, "").strip()
    if not path:
        return None
    try:
        return _key_in(Path(path).expanduser().read_text())
    except OSError:
        return None


class Pacer:
    """Spaces calls out to the API's documented rates (``wait`` sleeps until the next call
    may go; thread-safe, as the launcher calls providers from threads)."""

    def __init__(self, pace_s: float, launch_pace_s: float, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.pace_s, self.launch_pace_s = pace_s, launch_pace_s
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._last = self._last_launch = float("-inf")

    def wait(self, launch: bool) -> None:
        with self._lock:
            due = self._last + self.pace_s
            if launch:
                due = max(due, self._last_launch + self.launch_pace_s)
            delay = due - self._clock()
            if delay > 0:
                self._sleep(delay)
            self._last = self._clock()
            if launch:
                self._last_launch = self._last


class LambdaApi:
    """Calls to one Lambda account. ``transport``: another httpx transport (tests);
    ``pacer``: the rates calls are spaced to (default: the documented ones)."""

    def __init__(self, key: str | None, *, base_url: str | None = None,
                 timeout: float = 30.0, transport: httpx.BaseTransport | None = None,
                 pacer: Pacer | None = None) -> None:
        self._key = key
        self._pacer = pacer or Pacer(PACE_S, LAUNCH_PACE_S)
        self.base_url = (base_url or os.environ.get(URL_ENV) or API_URL).rstrip("/")
        headers = {"Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout,
                                  transport=transport, follow_redirects=False)

    def __repr__(self) -> str:
        return f"LambdaApi({self.base_url!r}, key={'set' if self._key else 'missing'})"

    @property
    def has_key(self) -> bool:
        return bool(self._key)

    def get(self, path: str, *, where: str = "") -> Any:
        return self._call("GET", path, None, where or f"GET {path}")

    def post(self, path: str, body: Mapping[str, Any], *, where: str = "") -> Any:
        return self._call("POST", path, body, where or f"POST {path}")

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None, where: str) -> Any:
        if not self._key:
            raise CloudError(Failure.AUTH, "NoApiKey", NO_KEY, where=where)
        self._pacer.wait(launch=path.endswith("/launch"))
        try:
            reply = self._http.request(method, path, json=body)
        except httpx.TimeoutException as exc:
            raise connection_error(type(exc).__name__, f"{where}: timed out ({exc})",
                                   where=where, secret=self._key) from None
        except httpx.HTTPError as exc:
            raise connection_error(type(exc).__name__, f"{where}: {exc}", where=where,
                                   secret=self._key) from None
        return self._data(reply, where)

    def _data(self, reply: httpx.Response, where: str) -> Any:
        try:
            parsed = reply.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            parsed = None
        if reply.is_success and isinstance(parsed, dict) and "data" in parsed:
            return parsed["data"]
        if reply.is_success:
            raise CloudError(Failure.UNKNOWN, "BadResponse", f"{where} answered HTTP "
                             f"{reply.status_code} without a data object", where=where)
        raise cloud_error(reply.status_code, parsed, where=where, secret=self._key,
                          reason=reply.reason_phrase)

    def close(self) -> None:
        self._http.close()
