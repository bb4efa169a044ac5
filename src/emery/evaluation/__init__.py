"""Evaluation: candidates × examples → scored results."""

from emery.evaluation.evaluator import Evaluator, TallyLM
from emery.evaluation.results import EvalResult, ExampleResult
from emery.evaluation.stats import ScoreSummary, summarize

__all__ = ["EvalResult", "Evaluator", "ExampleResult", "ScoreSummary", "TallyLM", "summarize"]
