"""Built-in tasks generated from code with a seed: no downloaded data."""

from emery.core.errors import ConfigError
from emery.data.tasks import extraction, harness, intent, long_document, word_problems
from emery.data.tasks.base import BuiltinTask

BUILTIN_TASKS: dict[str, BuiltinTask] = {
    task.name: task for task in (word_problems.TASK, intent.TASK, extraction.TASK)
}
HARNESS_TASKS: dict[str, BuiltinTask] = {task.name: task for task in harness.TASKS}
"""Task sets of the code-harness environments (their starting system is a code harness)."""
GRAPH_TASKS: dict[str, BuiltinTask] = {long_document.TASK.name: long_document.TASK}
"""Tasks whose starting system is a graph (``long_document_qa``: an rlm graph)."""


def builtin_task(name: str) -> BuiltinTask:
    """A built-in task by name, or a one-line error listing the known names."""
    tasks = {**BUILTIN_TASKS, **HARNESS_TASKS, **GRAPH_TASKS}
    try:
        return tasks[name]
    except KeyError:
        known = ", ".join(sorted(tasks))
        raise ConfigError(f"unknown built-in task {name!r}; known tasks: {known}") from None


__all__ = ["BUILTIN_TASKS", "GRAPH_TASKS", "HARNESS_TASKS", "BuiltinTask", "builtin_task"]
