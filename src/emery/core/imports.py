"""Resolve ``module:attribute`` references in configs."""

import importlib
import sys
from pathlib import Path
from typing import Any

from emery.core.errors import ConfigError


def import_object(ref: str) -> Any:
    """Resolve ``"package.module:attribute"`` to the object it names."""
    module_name, sep, attribute = ref.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"{ref!r} must look like 'module:attribute'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import module {module_name!r}: {exc}") from exc
    except Exception as exc:  # the module itself raised (a syntax error, a failing import)
        raise ConfigError(
            f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"module {module_name!r} has no attribute {attribute!r}") from None
    return obj


def importable_from(folder: Path) -> None:
    """Let ``module:attribute`` names find modules in ``folder`` (a config file's folder, a
    stored job's base directory): it joins ``sys.path`` once, at the end, so an installed
    package of the same name still wins."""
    entry = str(folder.resolve())
    if entry not in sys.path:
        sys.path.append(entry)
