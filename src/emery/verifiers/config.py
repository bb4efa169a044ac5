"""Verifier settings as they appear in a config file, and the factory that builds them."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from emery.core.errors import ConfigError
from emery.core.settings import Settings
from emery.lm.base import LM
from emery.verifiers.agreement import Agreement, RankAgreement
from emery.verifiers.base import Verifier
from emery.verifiers.contrastive import ContrastiveJudge
from emery.verifiers.json_field import JsonFieldMatch
from emery.verifiers.json_object import JsonMatch, JsonObjectMatch
from emery.verifiers.numeric import NumericMatch
from emery.verifiers.python import CallableVerifier
from emery.verifiers.rubric import Criterion, RubricJudge
from emery.verifiers.text import Contains, ExactMatch, NormalizedMatch, RegexMatch, TokenF1

VerifierKind = Literal[
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
]

JUDGE_KINDS = frozenset({"rubric", "contrastive"})
"""The kinds that ask the judge model (``[lm.judge]``, the task model when unset)."""


class VerifierConfig(Settings):
    """``[verifier]``: ``kind`` and the options that kind reads."""

    kind: VerifierKind = "exact"
    abs_tol: float = 1e-6
    rel_tol: float = 0.0
    pattern: str | None = None
    full: bool = False
    ignore_case: bool = False
    case_sensitive: bool = False
    fields: list[str] | None = None
    function: str | None = None
    criteria: list[Criterion] = Field(default_factory=list)
    agreement: Literal["mae", "rank"] = "mae"
    """``kind = "agreement"`` (a verifier graph): ``mae`` scores each trace ``1 - |score -
    gold|``; ``rank`` scores each batch by Spearman's rho with the gold scores."""
    match: JsonMatch = "f1"
    """``kind = "json_object"``: ``f1`` scores key–value F1 after light normalisation,
    ``exact`` scores 1 only for an equal object (``verifiers.json_object``)."""

    def scope_settings(self) -> dict[str, Any]:
        """The settings that make an evaluation reusable: every field, but the ones added
        after evaluations were first stored are left out at their defaults, so those
        scopes still match."""
        at_default = {
            name
            for name in _LATER_SETTINGS
            if getattr(self, name) == type(self).model_fields[name].default
        }
        return self.model_dump(mode="json", exclude=at_default or None)


_LATER_SETTINGS = ("agreement", "match")


def build_verifier(config: VerifierConfig, judge: LM | None = None) -> Verifier:
    """The verifier a config describes; ``judge`` is the model the judge kinds ask
    (without one they can be built and checked, but not asked)."""
    match config.kind:
        case "exact" | "gold_examples":
            return ExactMatch()
        case "normalized":
            return NormalizedMatch()
        case "numeric":
            return NumericMatch(abs_tol=config.abs_tol, rel_tol=config.rel_tol)
        case "regex":
            if not config.pattern:
                raise ConfigError("verifier.pattern is required for kind = 'regex'")
            try:
                return RegexMatch(config.pattern, full=config.full, ignore_case=config.ignore_case)
            except re.error as exc:
                raise ConfigError(
                    f"verifier.pattern {config.pattern!r} is not a valid regex: {exc}"
                ) from None
        case "contains":
            return Contains(case_sensitive=config.case_sensitive)
        case "json_field":
            return JsonFieldMatch(fields=config.fields)
        case "json_object":
            return JsonObjectMatch(match=config.match)
        case "f1":
            return TokenF1()
        case "python":
            if not config.function:
                raise ConfigError(
                    "verifier.function ('module:attr') is required for kind = 'python'"
                )
            return CallableVerifier(config.function)
        case "rubric":
            return RubricJudge(config.criteria, judge=judge)
        case "contrastive":
            return ContrastiveJudge(judge)
        case "agreement":
            return RankAgreement() if config.agreement == "rank" else Agreement()
