"""Base model vs tuned model on the job's test split, with the job's system and verifier."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from emery.config.resolve import resolve_job, resolve_lm
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.core.models import Candidate
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.stats import ScoreSummary
from emery.store.protocol import Store
from emery.training.source import source_prompt


class Lift(BaseModel):
    """Test scores of the same prompt on the base and the tuned model."""

    candidate_id: str
    base_model: str
    tuned_model: str
    base: ScoreSummary
    tuned: ScoreSummary

    @property
    def lift(self) -> float:
        return self.tuned.mean - self.base.mean

    def __str__(self) -> str:
        return (
            f"test: {self.base_model} {self.base} → {self.tuned_model} {self.tuned}"
            f" (lift {self.lift * 100:+.1f} points)"
        )


def scored_candidate(store: Store, config: JobConfig, system_seed: Candidate) -> Candidate:
    """The prompt to score: the source job's best candidate (checked against this job's
    system, ``training/source.py``), else the system's seed."""
    return source_prompt(store, config, system_seed) or system_seed


async def compare(store: Store, config: JobConfig, base_dir: Path, tuned_model: str) -> Lift:
    """Score the chosen prompt on test with ``[lm.task]`` and with ``tuned_model``."""
    resolved = resolve_job(config, base_dir)
    dataset = resolved.dataset
    examples = dataset.split("test")
    if not examples:
        raise ConfigError(f"the test split of dataset {dataset.name!r} is empty: nothing to score")
    system, verifier = resolved.system, resolved.verifier
    candidate = scored_candidate(store, config, system.seed_candidate())
    summaries = []
    for model in (config.lm.task.model, tuned_model):
        settings = config.lm.task.model_copy(update={"model": model})
        lm = resolve_lm(settings)
        evaluator = Evaluator(system, verifier, lm, concurrency=config.runtime.concurrency)
        result = await evaluator.evaluate(candidate, examples, "test")
        summaries.append(result.summary())
    return Lift(
        candidate_id=candidate.id,
        base_model=config.lm.task.model,
        tuned_model=tuned_model,
        base=summaries[0],
        tuned=summaries[1],
    )
