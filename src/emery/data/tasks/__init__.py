"""Built-in tasks generated from code with a seed: no downloaded data."""

from emery.core.errors import ConfigError
from emery.data.tasks import extraction, intent, word_problems
from emery.data.tasks.base import BuiltinTask

BUILTIN_TASKS: dict[str, BuiltinTask] = {
    task.name: task for task in (word_problems.TASK, intent.TASK, extraction.TASK)
}


def builtin_task(name: str) -> BuiltinTask:
    """A built-in task by name, or a one-line error listing the known names."""
    try:
        return BUILTIN_TASKS[name]
    except KeyError:
        known = ", ".join(sorted(BUILTIN_TASKS))
        raise ConfigError(f"unknown built-in task {name!r}; known tasks: {known}") from None


__all__ = ["BUILTIN_TASKS", "BuiltinTask", "builtin_task"]
