"""Verifiers: turn (example, output, trace) into a score in [0, 1] and textual feedback."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.verifiers.base import SyncVerifier, Verdict, Verifier
    from emery.verifiers.config import VerifierConfig, build_verifier
    from emery.verifiers.contrastive import ContrastiveJudge
    from emery.verifiers.function import FunctionMetric, MetricExample
    from emery.verifiers.json_field import JsonFieldMatch
    from emery.verifiers.json_object import JsonObjectMatch
    from emery.verifiers.judge import JudgeStats, JudgeVerifier
    from emery.verifiers.numeric import NumericMatch
    from emery.verifiers.rubric import Criterion, RubricJudge
    from emery.verifiers.text import Contains, ExactMatch, NormalizedMatch, RegexMatch, TokenF1

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "SyncVerifier": "emery.verifiers.base",
        "Verdict": "emery.verifiers.base",
        "Verifier": "emery.verifiers.base",
        "VerifierConfig": "emery.verifiers.config",
        "build_verifier": "emery.verifiers.config",
        "ContrastiveJudge": "emery.verifiers.contrastive",
        "FunctionMetric": "emery.verifiers.function",
        "MetricExample": "emery.verifiers.function",
        "JudgeStats": "emery.verifiers.judge",
        "JudgeVerifier": "emery.verifiers.judge",
        "JsonFieldMatch": "emery.verifiers.json_field",
        "JsonObjectMatch": "emery.verifiers.json_object",
        "NumericMatch": "emery.verifiers.numeric",
        "Criterion": "emery.verifiers.rubric",
        "RubricJudge": "emery.verifiers.rubric",
        "Contains": "emery.verifiers.text",
        "ExactMatch": "emery.verifiers.text",
        "NormalizedMatch": "emery.verifiers.text",
        "RegexMatch": "emery.verifiers.text",
        "TokenF1": "emery.verifiers.text",
    },
)

__all__ = [
    "Contains",
    "ContrastiveJudge",
    "Criterion",
    "ExactMatch",
    "FunctionMetric",
    "JsonFieldMatch",
    "JsonObjectMatch",
    "JudgeStats",
    "JudgeVerifier",
    "MetricExample",
    "NormalizedMatch",
    "NumericMatch",
    "RegexMatch",
    "RubricJudge",
    "SyncVerifier",
    "TokenF1",
    "Verdict",
    "Verifier",
    "VerifierConfig",
    "build_verifier",
]
