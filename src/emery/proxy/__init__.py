"""The LM proxy: an OpenAI-compatible endpoint that records every call as a span of the
attempt it serves (per-attempt base URLs for running jobs, ``/v1`` for a default model),
the small HTTP app that hosts it, and the guards every emery HTTP app shares."""

from emery.proxy.app import create_app
from emery.proxy.routes import LiveBackend, ProxyBackend, proxy_router
from emery.proxy.serving import BackgroundServer, free_port

__all__ = [
    "BackgroundServer",
    "LiveBackend",
    "ProxyBackend",
    "create_app",
    "free_port",
    "proxy_router",
]
