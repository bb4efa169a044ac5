"""The LM proxy's own app (``emery proxy``, and the embedded proxy jobs use): health and
the OpenAI-compatible routes, behind the shared body-limit and API-key guards."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.responses import Response

from emery.lm.base import LM
from emery.proxy.guards import (
    MAX_BODY_BYTES,
    ApiKeyMiddleware,
    BodyLimitMiddleware,
    render_validation_errors,
)
from emery.proxy.routes import LiveBackend, ProxyBackend, error_response, proxy_router
from emery.tracing.registry import LiveRollouts


def _openai_error(status: int, message: str) -> Response:
    kind = "authentication_error" if status == 401 else "invalid_request_error"
    return error_response(status, message, kind)


def create_app(
    *,
    default_lm: LM | None = None,
    registry: LiveRollouts | None = None,
    backend: ProxyBackend | None = None,
    api_key: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> FastAPI:
    """The server app. The proxy serves ``backend`` (default: attempts in ``registry``,
    and ``default_lm`` on ``/v1``). With ``api_key``, every route but ``/health`` needs
    it (``X-API-Key`` or ``Authorization: Bearer``), checked before the body is read."""
    app = FastAPI(title="emery", version="0.1.0")
    app.state.registry = registry if registry is not None else LiveRollouts()
    proxy_backend = backend or LiveBackend(app.state.registry, default_lm)

    @app.get("/health")
    async def health() -> dict[str, object]:
        lm = proxy_backend.default_lm()
        return {"status": "ok", "model": lm.model if lm is not None else None}

    app.include_router(proxy_router(proxy_backend))
    render_validation_errors(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes, render=_openai_error)
    if api_key is not None:  # added last: runs first, before the body limit reads anything
        app.add_middleware(ApiKeyMiddleware, key=api_key, render=_openai_error)
    return app
