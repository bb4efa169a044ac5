"""The ``emery serve`` application: health, the LM proxy (and later the REST API and
dashboard)."""

from __future__ import annotations

from fastapi import FastAPI

from emery.lm.base import LM
from emery.server.proxy import LiveBackend, ProxyBackend, proxy_router
from emery.tracing.registry import LiveRollouts


def create_app(
    *,
    default_lm: LM | None = None,
    registry: LiveRollouts | None = None,
    backend: ProxyBackend | None = None,
) -> FastAPI:
    """The server app. The proxy serves ``backend`` (default: attempts in ``registry``,
    and ``default_lm`` on ``/v1``)."""
    app = FastAPI(title="emery", version="0.1.0")
    app.state.registry = registry if registry is not None else LiveRollouts()
    proxy_backend = backend or LiveBackend(app.state.registry, default_lm)

    @app.get("/health")
    async def health() -> dict[str, object]:
        lm = proxy_backend.default_lm()
        return {"status": "ok", "model": lm.model if lm is not None else None}

    app.include_router(proxy_router(proxy_backend))
    return app
