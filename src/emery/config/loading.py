"""Read a config file (TOML or JSON) into a validated ``JobConfig``."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from emery.config.schema import JobConfig
from emery.config.storable import MAX_DEPTH, check_storable
from emery.core.errors import ConfigError
from emery.core.files import read_text
from emery.core.imports import importable_from
from emery.core.validation import describe
from emery.store.records import JobRecord


def parse_config(data: dict[str, Any], source: str = "config") -> JobConfig:
    """Validate a config dict; errors name the key and suggest the nearest valid one."""
    check_storable(data, source)
    try:
        return JobConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {describe(exc, JobConfig)}") from None
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def job_config(job: JobRecord) -> JobConfig:
    """The validated config a stored job runs with (its ``module:attr`` names found beside
    its config file, as when it was created)."""
    return stored_config(job.resolved_config or job.config, job.base_dir, f"job {job.id}")


def stored_config(data: dict[str, Any], base_dir: str | None, source: str) -> JobConfig:
    """A config stored as data (a job's, a published version's), validated, with its
    folder ``base_dir`` on the import path for its ``module:attr`` names."""
    if base_dir:
        importable_from(Path(base_dir))
    return parse_config(data, source)


def load_config(path: str | Path) -> JobConfig:
    """Read and validate ``path`` (``.toml`` or ``.json``)."""
    path = Path(path)
    return parse_config(read_config_data(path), str(path))


def read_config_data(path: Path) -> dict[str, Any]:
    """The config file's table as written (not validated yet); ConfigError in one line when
    the file is missing, does not read as a table, or nests over ``MAX_DEPTH`` levels
    (checked here, before anything recurses into it). Its ``module:attr`` names
    (verifiers, agents, environments, plug-ins) may name modules beside it."""
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    text = read_text(path, ConfigError)
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    except RecursionError:  # arrays or inline tables nested about a thousand deep
        raise ConfigError(f"{path}: {TOO_DEEP}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a table/object")
    # Before anything walks it recursively (overrides copy it, pydantic and JSON write
    # it): dotted keys or [a.b.c...] headers nest without recursing in the parser.
    check_storable(data, str(path))
    importable_from(path.parent)
    return data


TOO_DEEP = f"nested too deeply (a config nests tables and lists at most {MAX_DEPTH} levels)"
