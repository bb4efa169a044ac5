"""emery: optimize prompts, agents and workflows on local or remote models.

The SDK in one import::

    import emery

    result = emery.optimize(program, "word_problems", algorithm="gepa", budget=200)
    job = emery.Job.create("job.toml"); job.stream_until_complete(print)

Names are imported on first use, so ``import emery`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emery.core.events import Event
    from emery.core.models import Candidate, Dataset, Example
    from emery.jobs.results import JobResult
    from emery.jobs.sdk import Job, optimize
    from emery.store.backends import open_store

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Job": "emery.jobs.sdk",
    "optimize": "emery.jobs.sdk",
    "JobResult": "emery.jobs.results",
    "Result": "emery.jobs.results:JobResult",
    "Event": "emery.core.events",
    "Candidate": "emery.core.models",
    "Dataset": "emery.core.models",
    "Example": "emery.core.models",
    "open_store": "emery.store.backends",
}

__all__ = [
    "Candidate",
    "Dataset",
    "Event",
    "Example",
    "Job",
    "JobResult",
    "Result",
    "open_store",
    "optimize",
]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'emery' has no attribute {name!r}")
    module_name, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module_name), attribute or name)
    globals()[name] = value
    return value
