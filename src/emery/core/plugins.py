"""One lookup for every kind of plug-in (algorithms, system kinds, verifier kinds, executors).

A config names a plug-in in one of three ways, tried in this order:

1. a built-in name (``"gepa"``): the registry's table maps it to the module that defines
   the registry's attribute (``SPEC``, ``KIND``), imported on first use;
2. a ``"module:attr"`` reference (``"my_pkg.search:SPEC"``), imported as written;
3. the name of a Python entry point in the registry's group (``emery.algorithms``), so an
   installed package can add ``best_of_k`` under its own short name.

The config keeps the string as written, so any process that can import the plug-in
(``PYTHONPATH`` or an installed package) rebuilds the same object: a job using a plug-in
can be resumed by ``emery jobs resume`` in a new process.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Generic, TypeVar

from emery.core.errors import ConfigError
from emery.core.imports import import_object

T = TypeVar("T")


@dataclass(frozen=True)
class PluginRegistry(Generic[T]):
    """Plug-ins of one kind: names resolve to objects that are instances of ``type``.

    ``builtins`` maps a name to a module (whose ``attribute`` is the plug-in) or to a
    ``"module:attr"`` reference; it is read at each lookup, so tests may add to it.
    ``where`` starts every error message (``"job.algorithm"``, ``"system.kind"``).
    """

    what: str
    plural: str
    where: str
    builtins: Mapping[str, str]
    attribute: str
    group: str
    type: type[T]

    def get(self, ref: str) -> T:
        """The plug-in ``ref`` names, or a one-line ``ConfigError`` listing the known names."""
        builtin = self.builtins.get(ref)
        if builtin is not None:
            target = builtin if ":" in builtin else f"{builtin}:{self.attribute}"
            return self._checked(ref, importlib.import_module(target.partition(":")[0]), target)
        if ":" in ref:
            try:
                found = import_object(ref)
            except ConfigError as exc:
                raise ConfigError(f"{self.where}: {exc}") from None
            return self._checked(ref, found, ref)
        entry = self._entry_point(ref)
        if entry is None:
            raise ConfigError(
                f"{self.where}: unknown {self.what} {ref!r}; known {self.plural}:"
                f" {', '.join(self.names())} (or name one as 'module:attr')"
            )
        try:
            loaded = entry.load()
        except Exception as exc:  # the plug-in's own import failed
            raise ConfigError(
                f"{self.where}: the {self.group} entry point {ref!r} ({entry.value}) failed to"
                f" load: {type(exc).__name__}: {exc}"
            ) from None
        return self._checked(ref, loaded, entry.value)

    def names(self) -> list[str]:
        """The built-in names and the installed entry points' names, sorted."""
        return sorted(set(self.builtins) | {entry.name for entry in self._entry_points()})

    def _entry_points(self) -> tuple[EntryPoint, ...]:
        return tuple(entry_points(group=self.group))

    def _entry_point(self, name: str) -> EntryPoint | None:
        return next((entry for entry in self._entry_points() if entry.name == name), None)

    def _checked(self, ref: str, found: Any, target: str) -> T:
        """``found`` itself, or a module's ``attribute``, when it is of the right type."""
        if isinstance(found, ModuleType):
            module = found
            attribute = target.partition(":")[2] or self.attribute
            found = getattr(module, attribute, None)
            if found is None:
                raise ConfigError(
                    f"{self.where}: module {module.__name__!r} has no attribute {attribute!r}"
                )
        if not isinstance(found, self.type):
            raise ConfigError(
                f"{self.where}: {ref!r} is a {type(found).__name__}; expected {self.type.__name__}"
            )
        return found
