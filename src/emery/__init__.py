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
    from emery.systems.function_agent import FunctionAgent, PromptTemplate, agent
    from emery.tracing.emitters import (
        emit_annotation,
        emit_exception,
        emit_message,
        emit_object,
        emit_reward,
        tool_call,
    )
    from emery.tracing.scope import heartbeat

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
    "agent": "emery.systems.function_agent",
    "FunctionAgent": "emery.systems.function_agent",
    "PromptTemplate": "emery.systems.function_agent",
    "emit_reward": "emery.tracing.emitters",
    "emit_message": "emery.tracing.emitters",
    "emit_object": "emery.tracing.emitters",
    "emit_exception": "emery.tracing.emitters",
    "emit_annotation": "emery.tracing.emitters",
    "tool_call": "emery.tracing.emitters",
    "heartbeat": "emery.tracing.scope",
}

__all__ = [
    "Candidate",
    "Dataset",
    "Event",
    "Example",
    "FunctionAgent",
    "Job",
    "JobResult",
    "PromptTemplate",
    "Result",
    "agent",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_reward",
    "heartbeat",
    "open_store",
    "optimize",
    "tool_call",
]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'emery' has no attribute {name!r}")
    module_name, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module_name), attribute or name)
    globals()[name] = value
    return value
