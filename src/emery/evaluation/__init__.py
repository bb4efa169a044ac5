"""Evaluation: candidates × examples → scored results."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.evaluation.eval_result import EvalResult
    from emery.evaluation.evaluator import Evaluator, TallyLM
    from emery.evaluation.stats import ScoreSummary, summarize

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Evaluator": "emery.evaluation.evaluator",
        "TallyLM": "emery.evaluation.evaluator",
        "EvalResult": "emery.evaluation.eval_result",
        "ScoreSummary": "emery.evaluation.stats",
        "summarize": "emery.evaluation.stats",
    },
)

__all__ = ["EvalResult", "Evaluator", "ScoreSummary", "TallyLM", "summarize"]
