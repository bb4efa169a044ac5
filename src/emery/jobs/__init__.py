"""Jobs: evaluation and optimization runs over a configured system."""

from emery.jobs.evaluate import EvaluationReport, evaluate_config

__all__ = ["EvaluationReport", "evaluate_config"]
