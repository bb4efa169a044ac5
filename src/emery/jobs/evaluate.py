"""Score a configured system on one split: the work behind ``emery eval``."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from emery.config.resolve import build_models, open_cache, resolve_job
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Split
from emery.evaluation.eval_result import EvalResult
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.stats import ScoreSummary
from emery.lm.usage import RoleUsage
from emery.verifiers.judge import uses_judge, with_judge


class EvaluationReport(BaseModel):
    """What ``emery eval`` writes: the config, the candidate, the summary and every result."""

    config: dict[str, Any]
    dataset: str
    split: Split
    candidate: Candidate
    summary: ScoreSummary
    usage: dict[str, RoleUsage]
    wall_time_s: float
    results: list[ExampleResult]

    @property
    def eval_result(self) -> EvalResult:
        return EvalResult(candidate_id=self.candidate.id, split=self.split, results=self.results)


async def evaluate_config(
    config: JobConfig,
    *,
    split: Split = "test",
    candidate: Candidate | None = None,
    base_dir: Path | None = None,
    on_start: Callable[[int], None] | None = None,
    on_result: Callable[[ExampleResult], None] | None = None,
) -> EvaluationReport:
    """Score ``candidate`` (default: the system as configured) on ``split``."""
    resolved = resolve_job(config, base_dir)
    dataset = resolved.dataset
    examples = dataset.split(split)
    if not examples:
        raise ConfigError(f"the {split} split of dataset {dataset.name!r} is empty")
    resolved.checked(split)
    system, verifier = resolved.system, resolved.verifier
    candidate = candidate or system.seed_candidate()
    cache = open_cache(config, base_dir)
    try:
        models = build_models(
            config, roles=("task", "judge") if uses_judge(verifier) else ("task",), cache=cache
        )
        verifier = with_judge(verifier, models.by_role.get("judge"))
        evaluator = Evaluator(
            system, verifier, models["task"], concurrency=config.runtime.concurrency
        )
        if on_start is not None:
            on_start(len(examples))
        start = time.perf_counter()
        result = await evaluator.evaluate(candidate, examples, split, on_result=on_result)
    finally:
        if cache is not None:
            cache.close()
    return EvaluationReport(
        config=config.model_dump(mode="json", exclude_none=True),
        dataset=dataset.name,
        split=split,
        candidate=candidate,
        summary=result.summary(),
        usage=models.meter.by_role(),
        wall_time_s=time.perf_counter() - start,
        results=result.results,
    )
