"""Providers a higher layer registers for a lower one.

A lower layer that needs something living above it (the evaluator needs the server's
embedded LM proxy) asks for it by slot name; the package at the top (``emery``) registers
the provider, so no module imports upwards. A provider is a callable or a
``module:attribute`` reference to one, resolved on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from emery.core.errors import ConfigError
from emery.core.imports import import_object

ROLLOUT_PROXY = "rollout_proxy"
"""Slot of the process-wide ``RolloutProxy`` (an LM proxy serving running attempts)."""

Provider = Callable[[], Any]

_providers: dict[str, Provider | str] = {}
_lock = threading.Lock()


def provide(slot: str, provider: Provider | str) -> None:
    """Register ``provider`` for ``slot``, replacing any earlier one."""
    with _lock:
        _providers[slot] = provider


def provided(slot: str) -> Any:
    """What the provider registered for ``slot`` returns."""
    with _lock:
        provider = _providers.get(slot)
        if isinstance(provider, str):
            provider = _providers[slot] = import_object(provider)
    if provider is None:
        raise ConfigError(f"nothing provides {slot!r}: register a provider with provide()")
    return provider()
