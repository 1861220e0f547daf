"""The Kubernetes API over HTTP (httpx; no client library): one request per call, errors as the
seam's CloudError.

A failed call answers a ``Status`` object (``{"kind": "Status", "reason": "AlreadyExists",
"code": 409, "message": ...}``, https://kubernetes.io/docs/reference/using-api/api-concepts/).
Its ``reason`` decides (:func:`failure_of`): ``Unauthorized`` and ``Forbidden`` are AUTH (no
launch can work until someone grants the role: the cluster is disabled and ``bourse clouds``
says why), except a ResourceQuota's ``exceeded quota`` refusal, which is QUOTA; ``Invalid`` and
``BadRequest`` are CONFIG (the pod itself is refused, every place would refuse it);
``TooManyRequests``, ``ServiceUnavailable``, ``Timeout`` and connection errors are THROTTLE;
the rest UNKNOWN. The bearer token is sent only in the ``Authorization`` header and kept out of
``repr`` and of every error text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from bourse.clouds.base import CloudError
from bourse.clouds.kube_config import KubeTarget
from bourse.core.launch import Failure

TIMEOUT_S = 20.0
_REASONS = {"Unauthorized": Failure.AUTH, "Forbidden": Failure.AUTH,
            "Invalid": Failure.CONFIG, "BadRequest": Failure.CONFIG,
            "TooManyRequests": Failure.THROTTLE, "ServiceUnavailable": Failure.THROTTLE,
            "Timeout": Failure.THROTTLE, "ServerTimeout": Failure.THROTTLE}
_STATUS = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "AlreadyExists",
           422: "Invalid", 429: "TooManyRequests", 503: "ServiceUnavailable"}


def failure_of(reason: str, message: str) -> Failure:
    if reason == "Forbidden" and "exceeded quota" in message:
        return Failure.QUOTA
    return _REASONS.get(reason, Failure.UNKNOWN)


class KubeApi:
    """Calls to one cluster. ``transport``: httpx's, for tests that replay the API."""

    def __init__(self, target: KubeTarget, *, transport: httpx.BaseTransport | None = None,
                 timeout_s: float = TIMEOUT_S) -> None:
        self.target = target
        headers = {"Accept": "application/json", "User-Agent": "bourse"}
        if target.token:
            headers["Authorization"] = f"Bearer {target.token}"
        self._client = httpx.Client(base_url=target.server, headers=headers,
                                    verify=target.verify, cert=target.cert,
                                    timeout=timeout_s, transport=transport)

    def __repr__(self) -> str:
        return f"KubeApi({self.target.server!r}, context={self.target.context!r})"

    def close(self) -> None:
        self._client.close()

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        return self._call("GET", path, params=params)

    def get_or_none(self, path: str) -> Any:
        """GET; None for an object that does not exist."""
        try:
            return self._call("GET", path)
        except CloudError as exc:
            if exc.code == "NotFound":
                return None
            raise

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        return self._call("POST", path, json=body)

    def delete(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """DELETE; an object already gone is not an error (None)."""
        try:
            return self._call("DELETE", path, json=body)
        except CloudError as exc:
            if exc.code == "NotFound":
                return None
            raise

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        where = f"{method} {path}"
        try:
            answer = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise CloudError(Failure.THROTTLE, "Unreachable", f"{self.target.server}: "
                             f"{type(exc).__name__}: {self._clean(str(exc))}",
                             where=where) from None
        if answer.is_success:
            return answer.json() if answer.content else None
        raise self._error(answer, where)

    def _error(self, answer: httpx.Response, where: str) -> CloudError:
        try:
            body = answer.json()
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        reason = str(body.get("reason") or _STATUS.get(answer.status_code, "") or
                     f"HTTP{answer.status_code}")
        message = self._clean(str(body.get("message") or answer.text[:300] or
                                   answer.reason_phrase))
        return CloudError(failure_of(reason, message), reason, message, where=where)

    def _clean(self, text: str) -> str:
        token = self.target.token
        return text.replace(token, "[redacted]") if token else text
