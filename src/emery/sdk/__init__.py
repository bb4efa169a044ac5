"""The Python SDK: ``emery.Job`` and ``emery.optimize``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.sdk.job import Job, optimize

__getattr__, __dir__ = lazy_exports(__name__, {"Job": "emery.sdk.job", "optimize": "emery.sdk.job"})

__all__ = ["Job", "optimize"]
