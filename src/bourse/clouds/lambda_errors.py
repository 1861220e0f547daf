"""What a Lambda Cloud API error means for the exchange: a table from the error's code (and
HTTP status) to a :class:`~bourse.core.launch.Failure`.

Pure: no calls. The codes are those of Lambda's Cloud API OpenAPI document (v1.8.3,
https://cloud.lambda.ai/api/v1/openapi.json; docs: https://docs-api.lambda.ai/api/cloud),
whose error body is ``{"error": {"code", "message", "suggestion"?}}`` and which asks clients
to rely on ``code``, never on the wording. Decisions the document leaves open:

- ``global/quota-exceeded`` is QUOTA: the account's instance quota ("New accounts have a
  limit on the number of instances you can launch"), blocked like a family quota on EC2.
- ``global/account-inactive``, ``global/invalid-address`` (billing) and
  ``global/forbidden`` are AUTH with ``global/invalid-api-key``: no launch can succeed until
  a person acts, so the cloud is disabled and ``bourse clouds`` says why.
- ``global/object-does-not-exist`` on a launch is CONFIG: a name the request carries (the
  SSH key, the image) does not exist, so every place would refuse it alike.
- HTTP 429 (the API allows about one request a second, one launch per 12 s), 503,
  ``provider/internal-unavailable`` and connection errors are THROTTLE: back off, retry the
  same place. ``global/internal-error`` and other ``provider/`` codes are UNKNOWN (fail over
  with a short block), as is any code not in the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bourse.clouds.base import CloudError
from bourse.core.launch import Failure

INSUFFICIENT_CAPACITY = "instance-operations/launch/insufficient-capacity"
NOT_FOUND = "global/object-does-not-exist"
INVALID_KEY = "global/invalid-api-key"
QUOTA = "Lambda account instance quota (raised by Lambda support or as invoices are paid)"
REDACTED = "[redacted]"

_CODES: dict[str, Failure] = {
    INSUFFICIENT_CAPACITY: Failure.CAPACITY,
    "global/quota-exceeded": Failure.QUOTA,
    "global/invalid-parameters": Failure.CONFIG,
    NOT_FOUND: Failure.CONFIG,
    "instance-operations/launch/file-system-in-wrong-region": Failure.CONFIG,
    "global/duplicate": Failure.CONFIG,
    INVALID_KEY: Failure.AUTH,
    "global/account-inactive": Failure.AUTH,
    "global/invalid-address": Failure.AUTH,
    "global/forbidden": Failure.AUTH,
    "provider/internal-unavailable": Failure.THROTTLE,
    "global/internal-error": Failure.UNKNOWN,
}
_STATUS: dict[int, Failure] = {401: Failure.AUTH, 403: Failure.AUTH, 429: Failure.THROTTLE,
                               503: Failure.THROTTLE, 400: Failure.CONFIG, 404: Failure.CONFIG}


def classify(status: int, code: str | None) -> Failure:
    """The failure class of an answer with HTTP ``status`` and Lambda error ``code``."""
    if status == 429:  # a rate limit whatever the body says
        return Failure.THROTTLE
    if code and code in _CODES:
        return _CODES[code]
    if code and code.startswith("provider/"):
        return Failure.UNKNOWN
    if not code:
        return _STATUS.get(status, Failure.UNKNOWN)
    return Failure.UNKNOWN


def redact(text: str, secret: str | None) -> str:
    """``text`` without ``secret`` (the API key never leaves the provider, even echoed)."""
    return text.replace(secret, REDACTED) if secret else text


def _error_body(body: Any) -> Mapping[str, Any]:
    error = body.get("error") if isinstance(body, Mapping) else None
    return error if isinstance(error, Mapping) else {}


def cloud_error(status: int, body: Any, *, where: str, secret: str | None,
                reason: str = "") -> CloudError:
    """An error answer (``body``: its parsed JSON, or None) as the seam's CloudError: the
    Lambda code (``http-<status>`` when the body has none), its message and suggestion."""
    error = _error_body(body)
    code = str(error.get("code") or "") or None
    message = str(error.get("message") or reason or f"HTTP {status}")
    suggestion = error.get("suggestion")
    if suggestion:
        message = f"{message} ({suggestion})"
    failure = classify(status, code)
    return CloudError(failure, code or f"http-{status}", redact(message, secret), where=where,
                      quota=QUOTA if failure is Failure.QUOTA else None)


def connection_error(kind: str, detail: str, *, where: str, secret: str | None) -> CloudError:
    """A request that got no answer (refused, timed out): retried at the same place, as the
    launch may have been made (the reconciler finds it by its name if so)."""
    return CloudError(Failure.THROTTLE, kind, redact(detail, secret), where=where)
