"""Change a job config from the command line, without editing it: ``--set KEY=VALUE``
(a dotted key; the value read as a TOML value when it is one, else as a string),
``--model`` (``lm.task.model``) and ``--dataset`` (a data file or a built-in task).

``emery train`` and ``emery eval`` share this; the result is validated like the file."""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emery.config.loading import TOO_DEEP, parse_config, read_config_data
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError

DATA_SUFFIXES = (".jsonl", ".json", ".csv")


@dataclass(frozen=True)
class Overrides:
    """What the command line changes in a config; ``sets`` are applied last."""

    sets: tuple[str, ...] = ()
    model: str | None = None
    dataset: str | None = None

    def __bool__(self) -> bool:
        return bool(self.sets) or self.model is not None or self.dataset is not None

    def apply(self, data: dict[str, Any]) -> dict[str, Any]:
        """A copy of config ``data`` with the overrides in it (not validated yet)."""
        data = copy.deepcopy(data)
        if self.model is not None:
            assign(data, ("lm", "task", "model"), self.model, "--model")
        if self.dataset is not None:
            key, value = data_source(self.dataset)
            section = _table(data, ("dataset",), "--dataset")
            section.pop("task", None)
            section.pop("path", None)
            section[key] = value
        for item in self.sets:
            keys, value = parse_assignment(item)
            assign(data, keys, value, f"--set {item}")
        return data

    def source(self, path: Path | str) -> str:
        """How errors name the config: the file, and that the command line changed it."""
        return f"{path} (with command-line overrides)" if self else str(path)


def parse_assignment(item: str) -> tuple[tuple[str, ...], Any]:
    """``a.b.c=VALUE`` as its keys and value: VALUE read as a TOML value (``50``,
    ``true``, ``"text"``, ``[1, 2]``, ``{kind = "f1"}``) when it is one, else the text."""
    key, equals, raw = item.partition("=")
    keys = tuple(part.strip() for part in key.split("."))
    if not equals or not all(keys):
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. job.budget.metric_calls=50")
    try:
        value = tomllib.loads(f"value = {raw.strip()}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    except RecursionError:  # [[[[... or {x={x=... about a thousand deep
        raise ConfigError(f"--set {key.strip()}: the value is {TOO_DEEP}") from None
    return keys, value


def assign(data: dict[str, Any], keys: tuple[str, ...], value: Any, option: str) -> None:
    """Set ``data[k1][k2]...[kn] = value``, making the tables on the way."""
    _table(data, keys[:-1], option)[keys[-1]] = value


def _table(data: dict[str, Any], keys: tuple[str, ...], option: str) -> dict[str, Any]:
    table = data
    for depth, key in enumerate(keys, 1):
        inner = table.setdefault(key, {})
        if not isinstance(inner, dict):
            where = ".".join(keys[:depth])
            raise ConfigError(f"{option}: {where} is {inner!r}, not a table of keys")
        table = inner
    return table


def data_source(value: str, option: str = "--dataset") -> tuple[str, str]:
    """``("path", absolute path)`` for a data file, ``("task", name)`` for a built-in task;
    errors name ``option``."""
    from emery.data.tasks import builtin_task

    path = Path(value).expanduser()
    if path.is_file():
        return "path", str(path.resolve())
    if path.suffix.lower() in DATA_SUFFIXES or len(path.parts) > 1:
        raise ConfigError(f"{option} {value}: data file not found".lstrip())
    builtin_task(value)  # one line naming the known tasks when it is none of them
    return "task", value


def load_overridden(
    path: Path,
    overrides: Overrides,
    job_type: str | None = None,
    *,
    data: dict[str, Any] | None = None,
) -> tuple[JobConfig, dict[str, Any]]:
    """The config at ``path`` (``data``: its table, already read) with ``overrides`` (and
    ``[job] type`` from ``--type``), validated, and the data it was validated from (what
    the job stores as given)."""
    data = overrides.apply(read_config_data(path) if data is None else data)
    if job_type is not None:
        if job_type not in ("prompt", "sft", "rl"):
            raise ConfigError(f"--type must be prompt, sft or rl, not {job_type!r}")
        assign(data, ("job", "type"), job_type, "--type")
    return parse_config(data, overrides.source(path)), data
