"""JSON errors for the API server: every failure is ``{"detail": message}`` with a status
that says whose fault it is, never a stack trace.

The body also carries an OpenAI-style ``error`` object, so clients of the LM proxy routes
served by the same process read the same answer.
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
        503: "No model to answer with",
    }
    return {status: {"model": model, "description": reasons[status]} for status in statuses}


API_ERRORS = error_responses(ErrorBody, 400, 401, 403, 404, 409, 413)
PROXY_ERRORS = error_responses(ProxyErrorBody, 400, 401, 404, 413, 502, 503)


def json_error(status: int, message: str) -> Response:
    """The error body every API route and guard answers with."""
    kind = _KINDS.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"detail": message, "error": {"message": message, "type": kind, "code": status}}
    return JSONResponse(body, status_code=status)


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
    return json_error(status_of(exc), str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):  # pragma: no cover
        return await _unexpected(request, exc)
    response = json_error(exc.status_code, str(exc.detail))
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


async def _unexpected(request: Request, exc: Exception) -> Response:
    """A bug: logged with its traceback here, answered with one line there."""
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return json_error(500, f"internal error ({type(exc).__name__}); see the server log")


def install_error_handlers(app: FastAPI) -> None:
    """Make ``app`` answer every error as JSON (validation errors name fields only)."""
    render_validation_errors(app)
    app.add_exception_handler(EmeryError, _emery_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
