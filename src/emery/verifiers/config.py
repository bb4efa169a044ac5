"""Verifier settings as they appear in a config file, and the factory that builds them.

``[verifier] kind`` picks a ``VerifierKind``: a built-in (``VERIFIER_KINDS``, defined in
``verifiers/kinds.py``), a ``"module:attr"`` reference or an entry point of the
``emery.verifiers`` group (``core/plugins.py``). Each kind has a settings model of its
own, so a key another kind reads is an error that names it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self, cast

from pydantic import ValidationError

from emery.core.errors import ConfigError
from emery.core.plugins import PluginRegistry
from emery.core.settings import Settings
from emery.core.validation import describe
from emery.lm.base import LM
from emery.verifiers.base import Verifier


class VerifierConfig(Settings):
    """``[verifier]``: the base of every kind's settings model.

    ``VerifierConfig(kind="numeric", abs_tol=0.5)`` and ``VerifierConfig.model_validate``
    give the model of the kind named (here ``NumericConfig``), as a config file does.
    """

    kind: str = "exact"

    def __new__(cls, *args: Any, **data: Any) -> VerifierConfig:
        if cls is VerifierConfig:
            return parse_verifier_config(data)
        return super().__new__(cls)

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        if cls is VerifierConfig:
            return cast(Self, parse_verifier_config(obj))
        return super().model_validate(obj, *args, **kwargs)

    def scope_settings(self) -> dict[str, Any]:
        """The settings that make an evaluation reusable (part of the evaluation scope)."""
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class VerifierKind:
    """One kind of verifier: its settings model and how to build the verifier from it
    (``judge``: the model a judge kind asks; None where none is needed or given)."""

    name: str
    config: type[VerifierConfig]
    build: Callable[[Any, LM | None], Verifier]


VERIFIER_KINDS: dict[str, str] = {
    name: f"emery.verifiers.kinds:{name.upper()}"
    for name in (
        "exact",
        "gold_examples",
        "normalized",
        "numeric",
        "regex",
        "contains",
        "json_field",
        "json_object",
        "f1",
        "python",
        "rubric",
        "contrastive",
        "agreement",
        "preference",
        "feedback",
        "code_tests",
    )
} | {"published": "emery.reports.published_verifier:KIND"}
"""Built-in kinds by where they live: ``published`` runs a published verifier graph whole,
which only the reports layer can (looked up by name, never imported from here)."""

VERIFIERS = PluginRegistry(
    what="kind",
    plural="kinds",
    where="verifier.kind",
    builtins=VERIFIER_KINDS,
    attribute="KIND",
    group="emery.verifiers",
    type=VerifierKind,
)


def verifier_kind(name: str) -> VerifierKind:
    """The kind ``name`` refers to, or a one-line error listing the known kinds."""
    return VERIFIERS.get(name)


def parse_verifier_config(data: Any, where: str = "verifier") -> VerifierConfig:
    """Validate a ``[verifier]`` table (or pass a settings model through); errors name the
    offending key under ``where``."""
    if isinstance(data, VerifierConfig):
        return data
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a table with a 'kind' key")
    kind = verifier_kind(str(data.get("kind", "exact")))
    try:
        return kind.config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe(exc, kind.config, prefix=where)) from None


def build_verifier(config: VerifierConfig, judge: LM | None = None) -> Verifier:
    """The verifier a config describes; ``judge`` is the model the judge kinds ask
    (without one they can be built and checked, but not asked)."""
    return verifier_kind(config.kind).build(config, judge)
