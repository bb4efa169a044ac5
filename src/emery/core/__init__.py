"""Pydantic models, ids and small helpers shared by every layer of emery."""

from emery.core.errors import ConfigError, DataError, EmeryError, ModelNotInstalledError
from emery.core.models import Candidate, ChatMessage, Dataset, Demo, Example, Lineage, Split

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
