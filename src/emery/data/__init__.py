"""Datasets: file loaders and built-in generated tasks."""

from emery.data.loaders import FieldMap, SplitFractions, load_dataset
from emery.data.tasks import BUILTIN_TASKS, BuiltinTask, builtin_task

__all__ = [
    "BUILTIN_TASKS",
    "BuiltinTask",
    "FieldMap",
    "SplitFractions",
    "builtin_task",
    "load_dataset",
]
