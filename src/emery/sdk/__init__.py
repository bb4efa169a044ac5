"""The Python SDK: ``emery.Job``, ``emery.optimize`` and ``emery.prompt``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.sdk.job import Job, optimize
    from emery.sdk.prompts import prompt

__getattr__, __dir__ = lazy_exports(
    __name__,
    {"Job": "emery.sdk.job", "optimize": "emery.sdk.job", "prompt": "emery.sdk.prompts"},
)

__all__ = ["Job", "optimize", "prompt"]
