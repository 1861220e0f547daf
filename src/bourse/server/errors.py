"""Where exceptions become HTTP responses, in one place."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from bourse.core.errors import BourseError, InvalidInput

log = logging.getLogger(__name__)


class Unauthorized(BourseError):
    exit_code = 2
    http_status = 401


class Forbidden(BourseError):
    exit_code = 2
    http_status = 403


class Conflict(BourseError):
    exit_code = 1
    http_status = 409


class TooLarge(BourseError):
    exit_code = 2
    http_status = 413


def _body(message: str, field: str | None = None, hint: str | None = None) -> dict[str, object]:
    return {"error": message, "field": field, "hint": hint}


async def _bourse_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BourseError)
    field = exc.field if isinstance(exc, InvalidInput) else None
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    return JSONResponse(_body(exc.message, field, exc.hint), exc.http_status, headers=headers)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    detail = jsonable_encoder(exc.errors()[:10])
    body = _body(message, ".".join(loc) or None, None) | {"details": detail}
    return JSONResponse(body, 422)


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
