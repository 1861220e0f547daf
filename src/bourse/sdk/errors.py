"""The SDK's errors, and the one place an HTTP answer or a transport failure becomes one.

Every class derives from :class:`bourse.core.errors.BourseError`, so the CLI maps them to exit
codes like any other: 2 when the caller must change what it sends (credentials, input, a bundle
too large), 1 for everything else (not found, conflicts, server failures, an unreachable
exchange). 404 and 422 are also :class:`~bourse.core.errors.NotFound` and
:class:`~bourse.core.errors.InvalidInput`, so code that catches the core classes catches them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from bourse.core import errors
from bourse.core.errors import BourseError, InvalidInput


class ApiError(BourseError):
    """The exchange answered with an error status; ``status`` is that status (0 if none).
    The classes below are the core's (``bourse.core.errors``: one definition of each, with
    its exit code, for both sides of the wire) as the exchange reported them."""

    status = 0


class Unauthorized(ApiError, errors.Unauthorized):
    pass


class Forbidden(ApiError, errors.Forbidden):
    pass


class ApiNotFound(ApiError, errors.NotFound):
    pass


class Conflict(ApiError, errors.Conflict):
    pass


class ApiInvalidInput(ApiError, errors.InvalidInput):
    pass


class TooLarge(ApiInvalidInput, errors.TooLarge):
    pass


class TooMany(ApiError, errors.TooMany):
    pass


class ServerError(ApiError):
    exit_code = 1


class ProtocolError(ApiError):
    """The exchange answered something this SDK cannot read (a version mismatch, a proxy)."""


class Unreachable(BourseError):
    """No answer at all: refused, timed out, or the connection dropped."""

    exit_code = 1


class NotConfigured(BourseError):
    """No exchange URL or token is configured."""

    exit_code = 2


class WaitTimeout(BourseError):
    exit_code = 1


_BY_STATUS: dict[int, type[ApiError]] = {
    400: ApiInvalidInput, 401: Unauthorized, 403: Forbidden, 404: ApiNotFound, 409: Conflict,
    413: TooLarge, 422: ApiInvalidInput, 429: TooMany,
}
_HINTS = {
    401: "check BOURSE_TOKEN, or run `bourse login` again",
    403: "this needs a token with more rights (an admin token?)",
    413: "list big files or folders in .bourseignore, or run with --no-code",
}


def error_for(status: int, body: bytes, url: str) -> ApiError:
    """The exception for an error response; ``body`` is read as an ``ErrorView`` if it is one."""
    message, field, hint = _read_body(body, status)
    hint = hint or _HINTS.get(status)
    error = _make(status, message, field, hint, url)
    error.status = status
    return error


def _make(status: int, message: str, field: str | None, hint: str | None,
          url: str) -> ApiError:
    if status >= 500:
        return ServerError(f"the exchange at {url} failed: {message}",
                           hint=hint or "retry later, or check the server's log")
    kind = _BY_STATUS.get(status, ApiError)
    if issubclass(kind, ApiInvalidInput):
        return kind(message, field=field, hint=hint)
    return kind(message, hint=hint)


def _read_body(body: bytes, status: int) -> tuple[str, str | None, str | None]:
    try:
        data: Any = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        field, hint = data.get("field"), data.get("hint")
        return (data["error"], field if isinstance(field, str) else None,
                hint if isinstance(hint, str) else None)
    text = body.decode("utf-8", "replace").strip()[:200]
    return (text or f"HTTP {status}"), None, None


def unreachable(url: str, exc: Exception) -> Unreachable:
    return Unreachable(f"cannot reach the exchange at {url} ({type(exc).__name__}: {exc})",
                       hint="is it running? start one with `bourse up`")


@contextmanager
def transport_errors(url: str) -> Iterator[None]:
    """Turn httpx's transport failures into :class:`Unreachable` (used by both clients)."""
    try:
        yield
    except httpx.TransportError as exc:
        raise unreachable(url, exc) from exc


class BundleTooLarge(InvalidInput):
    """The working directory packs to more than the bundle limit."""
