"""The Python SDK: ``emery.Job``, ``emery.optimize``, ``emery.prompt`` and ``emery.Approvals``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.sdk.approvals import Approvals
    from emery.sdk.job import Job, optimize
    from emery.sdk.prompts import prompt

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Approvals": "emery.sdk.approvals",
        "Job": "emery.sdk.job",
        "optimize": "emery.sdk.job",
        "prompt": "emery.sdk.prompts",
    },
)

__all__ = ["Approvals", "Job", "optimize", "prompt"]
