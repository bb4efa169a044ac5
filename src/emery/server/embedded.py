"""The process-wide LM proxy jobs use when a system runs its agent out of process."""

from __future__ import annotations

import threading

from fastapi import FastAPI

from emery.server.proxy import LiveBackend, proxy_router
from emery.server.serving import BackgroundServer
from emery.tracing.registry import LiveRollouts, attempt_path
from emery.tracing.scope import AttemptScope


class EmbeddedProxy:
    """An LM proxy on a loopback port serving attempts registered in this process."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.registry = LiveRollouts()
        app = FastAPI(title="emery LM proxy")
        app.include_router(proxy_router(LiveBackend(self.registry)))
        self.server = BackgroundServer(app, host=host, port=port).start()

    @property
    def url(self) -> str:
        return self.server.url

    def open(self, scope: AttemptScope) -> str:
        self.registry.register(scope)
        return self.url + attempt_path(scope.rollout_id, scope.attempt_id)

    def close(self, scope: AttemptScope) -> None:
        self.registry.unregister(scope)

    def stop(self) -> None:
        self.server.stop()


_shared: EmbeddedProxy | None = None
_lock = threading.Lock()


def shared_proxy() -> EmbeddedProxy:
    """The one embedded proxy of this process, started on first use."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = EmbeddedProxy()
        return _shared
