"""emery: optimize prompts, agents and workflows on local or remote models.

The SDK in one import:

    import emery

    result = emery.optimize(program, "word_problems", algorithm="gepa", budget=200)
    job = emery.Job.create("job.toml"); job.stream_until_complete(print)
    instruction = emery.prompt("support-bot")["answer"]  # a published prompt's stage
    solve = emery.load("support-bot"); solve(question="...")  # the whole published system

Names are imported on first use, so ``import emery`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # What mypy and IDEs read; EXPORTS below is the same list (a test checks).
    from emery.core.events import Event as Event
    from emery.core.models import Candidate as Candidate
    from emery.core.models import Dataset as Dataset
    from emery.core.models import Example as Example
    from emery.reports.job_result import JobResult as JobResult
    from emery.sdk.approvals import Approvals as Approvals
    from emery.sdk.job import Job as Job
    from emery.sdk.job import optimize as optimize
    from emery.sdk.load import LoadedSystem as LoadedSystem
    from emery.sdk.load import load as load
    from emery.sdk.prompts import prompt as prompt
    from emery.sdk.remote_job import RemoteJob as RemoteJob
    from emery.sdk.traces import dataset_from_traces as dataset_from_traces
    from emery.sdk.traces import send_feedback as send_feedback
    from emery.store.backends import open_store as open_store
    from emery.systems.function_agent import FunctionAgent as FunctionAgent
    from emery.systems.function_agent import PromptTemplate as PromptTemplate
    from emery.systems.function_agent import agent as agent
    from emery.tracing.agents import as_agent as as_agent
    from emery.tracing.emitters import emit_annotation as emit_annotation
    from emery.tracing.emitters import emit_exception as emit_exception
    from emery.tracing.emitters import emit_message as emit_message
    from emery.tracing.emitters import emit_object as emit_object
    from emery.tracing.emitters import emit_reward as emit_reward
    from emery.tracing.emitters import tool_call as tool_call
    from emery.tracing.scope import heartbeat as heartbeat

    Result = JobResult

__version__ = "0.1.0"

EXPORTS: dict[str, str] = {
    "Event": "emery.core.events:Event",
    "Candidate": "emery.core.models:Candidate",
    "Dataset": "emery.core.models:Dataset",
    "Example": "emery.core.models:Example",
    "JobResult": "emery.reports.job_result:JobResult",
    "Result": "emery.reports.job_result:JobResult",
    "Approvals": "emery.sdk.approvals:Approvals",
    "Job": "emery.sdk.job:Job",
    "optimize": "emery.sdk.job:optimize",
    "LoadedSystem": "emery.sdk.load:LoadedSystem",
    "load": "emery.sdk.load:load",
    "prompt": "emery.sdk.prompts:prompt",
    "RemoteJob": "emery.sdk.remote_job:RemoteJob",
    "dataset_from_traces": "emery.sdk.traces:dataset_from_traces",
    "send_feedback": "emery.sdk.traces:send_feedback",
    "open_store": "emery.store.backends:open_store",
    "FunctionAgent": "emery.systems.function_agent:FunctionAgent",
    "PromptTemplate": "emery.systems.function_agent:PromptTemplate",
    "agent": "emery.systems.function_agent:agent",
    "as_agent": "emery.tracing.agents:as_agent",
    "emit_annotation": "emery.tracing.emitters:emit_annotation",
    "emit_exception": "emery.tracing.emitters:emit_exception",
    "emit_message": "emery.tracing.emitters:emit_message",
    "emit_object": "emery.tracing.emitters:emit_object",
    "emit_reward": "emery.tracing.emitters:emit_reward",
    "tool_call": "emery.tracing.emitters:tool_call",
    "heartbeat": "emery.tracing.scope:heartbeat",
}
"""Exported name → ``module:attribute``, imported on first read."""


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return sorted(EXPORTS)
    target = EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'emery' has no attribute {name!r}")
    module_name, attribute = target.split(":")
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *EXPORTS})
