"""JSON errors for the API server: every failure is ``{"detail": message}`` with a status
that says whose fault it is, never a stack trace.

The body also carries an OpenAI-style ``error`` object, so clients of the LM proxy routes
served by the same process read the same answer.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from emery.core.errors import EmeryError, IllegalTransition
from emery.server.guards import render_validation_errors
from emery.store.states import NotFound

log = logging.getLogger(__name__)

_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found",
    409: "conflict",
    413: "invalid_request_error",
}


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
