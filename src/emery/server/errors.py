"""JSON errors for the API server: every failure is ``{"detail": message}`` with a status
that says whose fault it is, never a stack trace.

The body also carries an OpenAI-style ``error`` object, so clients of the LM proxy routes
served by the same process read the same answer.

A store that is away for now (``StoreUnavailable``: a dropped or refused PostgreSQL
connection, a SQLite lock held past the busy timeout; ``StoreFull``: its disk is full) is
answered 503 with a ``Retry-After`` header, never 500: the same request succeeds once
the store is back. Any other store failure keeps its status.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from emery.core.errors import EmeryError, IllegalTransition
from emery.proxy.guards import render_validation_errors
from emery.store.errors import StoreFull, StoreUnavailable, disk_full, store_unavailable
from emery.store.states import NotFound

log = logging.getLogger(__name__)

_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found",
    409: "conflict",
    413: "invalid_request_error",
}


class ErrorInfo(BaseModel):
    """The OpenAI-style error object."""

    message: str
    type: str
    code: int


class ProxyErrorBody(BaseModel):
    """An error of the LM proxy routes (OpenAI's shape)."""

    error: ErrorInfo


class ErrorBody(ProxyErrorBody):
    """An error of the API routes: the message, also as an OpenAI-style error object."""

    detail: str


def error_responses(model: type[BaseModel], *statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` documenting ``statuses`` as errors with ``model``'s body."""
    reasons = {
        400: "Invalid request",
        401: "Invalid or missing API key",
        403: "The key's scope does not allow this request",
        404: "Not found",
        409: "Not possible in the current state",
        413: "Request body too large",
        502: "The model failed",
        503: "No model to answer with, or the store is unavailable (see Retry-After)",
    }
    return {status: {"model": model, "description": reasons[status]} for status in statuses}


API_ERRORS = error_responses(ErrorBody, 400, 401, 403, 404, 409, 413)
PROXY_ERRORS = error_responses(ProxyErrorBody, 400, 401, 404, 413, 502, 503)


def json_error(status: int, message: str) -> Response:
    """The error body every API route and guard answers with."""
    kind = _KINDS.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"detail": message, "error": {"message": message, "type": kind, "code": status}}
    return JSONResponse(body, status_code=status)


RETRY_AFTER_S = 5
"""What a 503 for a store that is away asks a client to wait (seconds)."""
RETRY_AFTER_FULL_S = 60
"""The same for a store whose disk is full: someone must free space first."""


def store_away(message: str, *, full: bool) -> Response:
    """503 with ``Retry-After``: the store cannot answer now, the request may be sent again."""
    response = json_error(503, message)
    response.headers["Retry-After"] = str(RETRY_AFTER_FULL_S if full else RETRY_AFTER_S)
    return response


def status_of(exc: EmeryError) -> int:
    """The HTTP status of an emery error: 404 unknown, 409 wrong state, else 400."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, IllegalTransition):
        return 409
    status = getattr(exc, "status", None)  # errors that know their own status (OTLP's)
    return status if isinstance(status, int) and 400 <= status < 500 else 400


async def _emery_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, EmeryError):  # pragma: no cover - registered for EmeryError only
        return await _unexpected(request, exc)
    if isinstance(exc, StoreUnavailable | StoreFull):
        return store_away(str(exc), full=isinstance(exc, StoreFull))
    return json_error(status_of(exc), str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):  # pragma: no cover
        return await _unexpected(request, exc)
    response = json_error(exc.status_code, str(exc.detail))
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


async def _unexpected(request: Request, exc: Exception) -> Response:
    """A bug: logged with its traceback here, answered with one line there; a driver's
    error saying the store is away (raised outside the store's own transactions) is 503."""
    if store_unavailable(exc) or disk_full(exc):
        line = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        detail = line[0] if line else type(exc).__name__
        log.warning("%s %s: the store is unavailable: %s", request.method, request.url.path, detail)
        return store_away(f"the store is unavailable: {detail}", full=disk_full(exc))
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return json_error(500, f"internal error ({type(exc).__name__}); see the server log")


def install_error_handlers(app: FastAPI) -> None:
    """Make ``app`` answer every error as JSON (validation errors name fields only)."""
    render_validation_errors(app)
    app.add_exception_handler(EmeryError, _emery_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
