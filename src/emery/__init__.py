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

if TYPE_CHECKING:  # The one list of exports: mypy and IDEs read it, and so does _exports().
    from emery.core.events import Event as Event
    from emery.core.models import Candidate as Candidate
    from emery.core.models import Dataset as Dataset
    from emery.core.models import Example as Example
    from emery.reports.results import JobResult as JobResult
    from emery.sdk.job import Job as Job
    from emery.sdk.job import optimize as optimize
    from emery.store.backends import open_store as open_store
    from emery.systems.function_agent import FunctionAgent as FunctionAgent
    from emery.systems.function_agent import PromptTemplate as PromptTemplate
    from emery.systems.function_agent import agent as agent
    from emery.tracing.emitters import emit_annotation as emit_annotation
    from emery.tracing.emitters import emit_exception as emit_exception
    from emery.tracing.emitters import emit_message as emit_message
    from emery.tracing.emitters import emit_object as emit_object
    from emery.tracing.emitters import emit_reward as emit_reward
    from emery.tracing.emitters import tool_call as tool_call
    from emery.tracing.scope import heartbeat as heartbeat

    Result = JobResult

__version__ = "0.1.0"

_exported: dict[str, tuple[str, str]] = {}


def _exports() -> dict[str, tuple[str, str]]:
    """Exported name → (module, attribute), read once from the ``TYPE_CHECKING`` imports."""
    if not _exported:
        import ast
        from pathlib import Path

        tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
        block = next(
            node
            for node in tree.body
            if isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        )
        for statement in block.body:
            if isinstance(statement, ast.ImportFrom) and statement.module:
                for alias in statement.names:
                    _exported[alias.asname or alias.name] = (statement.module, alias.name)
            elif isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Name):
                for target in statement.targets:  # another name for an export
                    if isinstance(target, ast.Name):
                        _exported[target.id] = _exported[statement.value.id]
    return _exported


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return sorted(_exports())
    target = _exports().get(name)
    if target is None:
        raise AttributeError(f"module 'emery' has no attribute {name!r}")
    module_name, attribute = target
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_exports()})
