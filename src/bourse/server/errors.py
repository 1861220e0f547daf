"""Where exceptions become HTTP responses, in one place."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from bourse.core.errors import BourseError, Forbidden, InvalidInput, TooMany, Unauthorized
from bourse.protocol.api import ErrorView

log = logging.getLogger(__name__)


class ForeignData(Forbidden):
    """A job names a store location that another project's job wrote first
    (``services.claims``); ``field`` says which of its spec's URIs."""

    def __init__(self, message: str, *, field: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.field = field


# What each error status means, as the OpenAPI document says it; every body is an ErrorView.
_MEANINGS = {
    400: "The body could not be decoded (not UTF-8).",
    401: "No token, or one that is unknown, revoked or expired.",
    403: "The token's role may not do this, or a job names data of another project's.",
    404: "Not found, or not visible to the token's project.",
    409: "Conflicts with the current state.",
    413: "The body is larger than the limit.",
    422: "A parameter or a field of the body is invalid; `field` says which.",
    429: "Too many open at once (a node's streams); retry after `Retry-After` seconds.",
    502: "The exchange's object store answered with an error (or refused its key).",
    503: "A part of the exchange this needs is unavailable; retry later.",
}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI declarations of the error responses a route returns."""
    return {status: {"model": ErrorView, "description": _MEANINGS[status]}
            for status in statuses}


def _body(message: str, field: str | None = None, hint: str | None = None) -> dict[str, object]:
    return {"error": message, "field": field, "hint": hint}


async def _bourse_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BourseError)
    return error_response(exc)


def error_response(exc: BourseError) -> JSONResponse:
    field = exc.field if isinstance(exc, InvalidInput | ForeignData) else None
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    if isinstance(exc, TooMany):
        headers = {"Retry-After": str(exc.retry_after_s)}
    return JSONResponse(_body(exc.message, field, exc.hint), exc.http_status, headers=headers)


def _describe(error: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
    """(message, field path, hint) of one pydantic/FastAPI error; the input is never echoed."""
    loc = [str(p) for p in error.get("loc", ())]
    if error.get("type") == "json_invalid":  # loc is ("body", <character offset>)
        offset = loc[1] if len(loc) > 1 else "?"
        return f"the body is not valid JSON (at character {offset})", "body", None
    path = loc[1:] if loc[:1] == ["body"] else loc
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, InvalidInput):  # raised by our own validators: keep its words
        if cause.field and (not path or path[-1] != cause.field):
            path.append(cause.field)
        return cause.message, ".".join(path) or None, cause.hint
    message = str(error.get("msg", "invalid request")).removeprefix("Value error, ")
    return message, ".".join(path) or None, None


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors()) or [{"loc": (), "msg": "invalid request"}]
    described = [_describe(e) for e in errors[:10]]
    message, field, hint = described[0]
    details = [{"field": f, "error": m} for m, f, _ in described]
    return JSONResponse(_body(message, field, hint) | {"details": details}, 422)


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return JSONResponse(_body(str(exc.detail)), exc.status_code, headers=exc.headers)


async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return JSONResponse(_body("internal error; the coordinator log has the details"), 500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(BourseError, _bourse_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
