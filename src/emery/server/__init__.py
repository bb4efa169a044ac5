"""The HTTP side of emery: the ``emery serve`` app and the LM proxy."""

from emery.server.api import create_server_app
from emery.server.app import create_app
from emery.server.proxy import LiveBackend, ProxyBackend, proxy_router
from emery.server.serving import BackgroundServer, free_port

__all__ = [
    "BackgroundServer",
    "LiveBackend",
    "ProxyBackend",
    "create_app",
    "create_server_app",
    "free_port",
    "proxy_router",
]
