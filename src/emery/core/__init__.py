"""Pydantic models, ids and small helpers shared by every layer of emery.

Names are imported on first use, so the packages above may import ``emery.core`` modules
without loading pydantic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.core.errors import ConfigError, DataError, EmeryError, ModelNotInstalledError
    from emery.core.models import Candidate, ChatMessage, Dataset, Demo, Example, Lineage, Split

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ConfigError": "emery.core.errors",
        "DataError": "emery.core.errors",
        "EmeryError": "emery.core.errors",
        "ModelNotInstalledError": "emery.core.errors",
        "Candidate": "emery.core.models",
        "ChatMessage": "emery.core.models",
        "Dataset": "emery.core.models",
        "Demo": "emery.core.models",
        "Example": "emery.core.models",
        "Lineage": "emery.core.models",
        "Split": "emery.core.models",
    },
)

__all__ = [
    "Candidate",
    "ChatMessage",
    "ConfigError",
    "DataError",
    "Dataset",
    "Demo",
    "EmeryError",
    "Example",
    "Lineage",
    "ModelNotInstalledError",
    "Split",
]
