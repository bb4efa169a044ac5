"""The LM proxy as jobs use it: per-attempt base URLs on a loopback server."""

from __future__ import annotations

import threading

from emery.proxy.app import create_app
from emery.proxy.serving import BackgroundServer
from emery.tracing.registry import LiveRollouts, attempt_path
from emery.tracing.scope import AttemptScope


class RegistryProxy:
    """A ``RolloutProxy`` over a running server that serves ``registry`` at ``base_url``."""

    def __init__(self, registry: LiveRollouts, base_url: str) -> None:
        self.registry = registry
        self.url = base_url.rstrip("/")

    def open(self, scope: AttemptScope) -> str:
        self.registry.register(scope)
        return self.url + attempt_path(scope.rollout_id, scope.attempt_id)

    def close(self, scope: AttemptScope) -> None:
        self.registry.unregister(scope)


class EmbeddedProxy(RegistryProxy):
    """A ``RegistryProxy`` with its own server on a free loopback port."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None) -> None:
        registry = LiveRollouts()
        self.server = BackgroundServer(create_app(registry=registry), host=host, port=port)
        self.server.start()
        super().__init__(registry, self.server.url)

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
