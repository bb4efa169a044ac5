"""Datasets: file loaders and built-in generated tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.data.loaders import FieldMap, SplitFractions, load_dataset
    from emery.data.tasks import BUILTIN_TASKS, BuiltinTask, builtin_task

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FieldMap": "emery.data.loaders",
        "SplitFractions": "emery.data.loaders",
        "load_dataset": "emery.data.loaders",
        "BUILTIN_TASKS": "emery.data.tasks",
        "BuiltinTask": "emery.data.tasks",
        "builtin_task": "emery.data.tasks",
    },
)

__all__ = [
    "BUILTIN_TASKS",
    "BuiltinTask",
    "FieldMap",
    "SplitFractions",
    "builtin_task",
    "load_dataset",
]
