"""The built-in verifier kinds: one settings model per ``[verifier] kind`` and its builder.

Evaluations stored before the kinds had models of their own were scoped by one flat
settings table holding every kind's options; ``scope_settings`` still writes that table,
so those evaluations are reused.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from emery.core.errors import ConfigError
from emery.lm.base import LM
from emery.verifiers.agreement import Agreement, RankAgreement
from emery.verifiers.base import Verifier
from emery.verifiers.code_tests import CodeTests
from emery.verifiers.config import VerifierConfig, VerifierKind
from emery.verifiers.contrastive import ContrastiveJudge
from emery.verifiers.feedback_score import FeedbackScore
from emery.verifiers.function import FunctionMetric
from emery.verifiers.json_field import JsonFieldMatch
from emery.verifiers.json_object import JsonMatch, JsonObjectMatch
from emery.verifiers.judge import judge_scoring
from emery.verifiers.numeric import NumericMatch
from emery.verifiers.preference import PreferenceJudge
from emery.verifiers.rubric import Criterion, RubricJudge
from emery.verifiers.text import Contains, ExactMatch, NormalizedMatch, RegexMatch, TokenF1

_FLAT_SCOPE: dict[str, Any] = {
    "abs_tol": 1e-6,
    "rel_tol": 0.0,
    "pattern": None,
    "full": False,
    "ignore_case": False,
    "case_sensitive": False,
    "fields": None,
    "function": None,
    "criteria": [],
}
"""The options of the one flat settings table, at its defaults."""

_LATER_SCOPE: dict[str, Any] = {"agreement": "mae", "match": "f1", "scoring": "json"}
"""Options added to the flat table after evaluations were first stored: in a scope only
when set to something else."""


class BuiltinConfig(VerifierConfig):
    """A built-in kind's settings, scoped as the flat table scoped them."""

    def scope_settings(self) -> dict[str, Any]:
        flat = {"kind": self.kind, **_FLAT_SCOPE, **_LATER_SCOPE, **self.model_dump(mode="json")}
        return {k: v for k, v in flat.items() if k not in _LATER_SCOPE or v != _LATER_SCOPE[k]}


class ExactConfig(BuiltinConfig):
    """``exact`` (and ``gold_examples``): the output equals the gold output as text."""

    kind: Literal["exact", "gold_examples"] = "exact"


class NormalizedConfig(BuiltinConfig):
    """``normalized``: equal after lowercasing, removing punctuation, articles and extra
    spaces."""

    kind: Literal["normalized"] = "normalized"


class NumericConfig(BuiltinConfig):
    """``numeric``: the last number equals the gold number (within ``abs_tol`` or
    ``rel_tol``)."""

    kind: Literal["numeric"] = "numeric"
    abs_tol: float = 1e-6
    rel_tol: float = 0.0


class RegexConfig(BuiltinConfig):
    """``regex``: ``pattern`` matches the output (``full``: all of it)."""

    kind: Literal["regex"] = "regex"
    pattern: str
    full: bool = False
    ignore_case: bool = False


class ContainsConfig(BuiltinConfig):
    """``contains``: the gold output appears in the output."""

    kind: Literal["contains"] = "contains"
    case_sensitive: bool = False


class JsonFieldConfig(BuiltinConfig):
    """``json_field``: the share of the gold JSON's ``fields`` (default: all) the output
    gets right."""

    kind: Literal["json_field"] = "json_field"
    fields: list[str] | None = None


class JsonObjectConfig(BuiltinConfig):
    """``json_object``: ``match = "f1"`` scores key–value F1 after light normalisation,
    ``"exact"`` scores 1 only for an equal object (``verifiers.json_object``)."""

    kind: Literal["json_object"] = "json_object"
    match: JsonMatch = "f1"


class F1Config(BuiltinConfig):
    """``f1``: token F1 against the gold output."""

    kind: Literal["f1"] = "f1"


class PythonConfig(BuiltinConfig):
    """``python``: ``function = "module:attr"`` scores each output."""

    kind: Literal["python"] = "python"
    function: str


def _known_scoring(name: str) -> str:
    judge_scoring(name)  # a one-line ConfigError when it names none
    return name


ScoringName = Annotated[str, AfterValidator(_known_scoring)]
"""How a rubric or contrastive judge scores (``verifiers.judge.JUDGE_SCORINGS``): ``json``,
its JSON verdict; ``logprobs``, its probability of Yes to a yes/no question
(``verifiers.verdict_probability``); or a ``JudgeScoring`` of your own as ``"module:attr"``
or an ``emery.judge_scorings`` entry point. Checked when the config is read."""


class RubricConfig(BuiltinConfig):
    """``rubric``: the judge model scores the output on ``[[verifier.criteria]]`` (and an
    example's ``meta["rubric"]``); ``scoring`` as ``ScoringName``."""

    kind: Literal["rubric"] = "rubric"
    criteria: list[Criterion] = Field(default_factory=list)
    scoring: ScoringName = "json"


class ContrastiveConfig(BuiltinConfig):
    """``contrastive``: the judge model compares the output with the gold output;
    ``scoring`` as ``ScoringName``."""

    kind: Literal["contrastive"] = "contrastive"
    scoring: ScoringName = "json"


class PreferenceConfig(VerifierConfig):
    """``preference``: the judge model says whether the output or the recorded reply (the
    example's ``expected``) is better; ``criteria`` says what matters."""

    kind: Literal["preference"] = "preference"
    criteria: str = ""


class FeedbackConfig(VerifierConfig):
    """``feedback``: the feedback on the recorded reply, carried to an output by its
    similarity to that reply (``verifiers.feedback_score``)."""

    kind: Literal["feedback"] = "feedback"


class CodeTestsConfig(VerifierConfig):
    """``code_tests``: the reply's Python code passes the example's test code (``expected``)
    in a test process within ``timeout_s`` and ``memory_mb`` (``verifiers.code_tests``);
    a reply that does not define the input's ``entry_point_field`` function is run after
    its ``prompt_field`` (a signature and docstring it completes)."""

    kind: Literal["code_tests"] = "code_tests"
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    memory_mb: int = Field(default=512, ge=64)
    entry_point_field: str = "entry_point"
    prompt_field: str = "prompt"


class AgreementConfig(BuiltinConfig):
    """``agreement`` (a verifier graph): ``mae`` scores each trace ``1 - |score - gold|``;
    ``rank`` scores each batch by Spearman's rho with the gold scores."""

    kind: Literal["agreement"] = "agreement"
    agreement: Literal["mae", "rank"] = "mae"


def _regex(config: RegexConfig, judge: LM | None) -> Verifier:
    try:
        return RegexMatch(config.pattern, full=config.full, ignore_case=config.ignore_case)
    except re.error as exc:
        raise ConfigError(
            f"verifier.pattern {config.pattern!r} is not a valid regex: {exc}"
        ) from None


EXACT = VerifierKind("exact", ExactConfig, lambda config, judge: ExactMatch())
GOLD_EXAMPLES = VerifierKind("gold_examples", ExactConfig, EXACT.build)
NORMALIZED = VerifierKind("normalized", NormalizedConfig, lambda config, judge: NormalizedMatch())
NUMERIC = VerifierKind(
    "numeric",
    NumericConfig,
    lambda config, judge: NumericMatch(abs_tol=config.abs_tol, rel_tol=config.rel_tol),
)
REGEX = VerifierKind("regex", RegexConfig, _regex)
CONTAINS = VerifierKind(
    "contains",
    ContainsConfig,
    lambda config, judge: Contains(case_sensitive=config.case_sensitive),
)
JSON_FIELD = VerifierKind(
    "json_field", JsonFieldConfig, lambda config, judge: JsonFieldMatch(fields=config.fields)
)
JSON_OBJECT = VerifierKind(
    "json_object", JsonObjectConfig, lambda config, judge: JsonObjectMatch(match=config.match)
)
F1 = VerifierKind("f1", F1Config, lambda config, judge: TokenF1())
PYTHON = VerifierKind(
    "python", PythonConfig, lambda config, judge: FunctionMetric(config.function, style="verifier")
)
RUBRIC = VerifierKind(
    "rubric",
    RubricConfig,
    lambda config, judge: RubricJudge(
        config.criteria, judge=judge, scoring=judge_scoring(config.scoring)
    ),
)
CONTRASTIVE = VerifierKind(
    "contrastive",
    ContrastiveConfig,
    lambda config, judge: ContrastiveJudge(judge, scoring=judge_scoring(config.scoring)),
)
PREFERENCE = VerifierKind(
    "preference",
    PreferenceConfig,
    lambda config, judge: PreferenceJudge(judge, criteria=config.criteria),
)
FEEDBACK = VerifierKind("feedback", FeedbackConfig, lambda config, judge: FeedbackScore())
CODE_TESTS = VerifierKind(
    "code_tests",
    CodeTestsConfig,
    lambda config, judge: CodeTests(
        timeout_s=config.timeout_s,
        memory_mb=config.memory_mb,
        entry_point_field=config.entry_point_field,
        prompt_field=config.prompt_field,
    ),
)
AGREEMENT = VerifierKind(
    "agreement",
    AgreementConfig,
    lambda config, judge: RankAgreement() if config.agreement == "rank" else Agreement(),
)
