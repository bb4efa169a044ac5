"""Everything a job run needs, built from its stored config (and in-process overrides)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emery.algorithms.base import Algorithm
from emery.algorithms.registry import build_algorithm, settings_table
from emery.config.evaluation_scope import evaluation_scope, example_hashes
from emery.config.resolve import (
    JobInputs,
    Models,
    ResolvedJob,
    build_models,
    open_cache,
    resolve_job,
)
from emery.config.schema import JobConfig
from emery.core.models import Candidate, Dataset, Example
from emery.evaluation.budget import BudgetConfig
from emery.lm.cache import ResponseCache
from emery.lm.usage import RoleUsage, UsageMeter
from emery.systems.base import System
from emery.verifiers.base import Verifier
from emery.verifiers.judge import with_judge


@dataclass
class Runtime:
    """A job's dataset, system, verifier, models, algorithm and evaluation scope."""

    config: JobConfig
    base_dir: Path
    dataset: Dataset
    system: System
    verifier: Verifier
    models: Models
    cache: ResponseCache | None
    algorithm: Algorithm[Any]
    scope: str
    references: dict[str, Candidate] = field(default_factory=dict)
    _examples: dict[tuple[str, str], Example] = field(default_factory=dict, repr=False)
    hashes: dict[tuple[str, str], str] = field(default_factory=dict)

    def example(self, split: str, example_id: str) -> Example | None:
        """The example with this id in ``split``."""
        if not self._examples:
            self._examples = {
                (name, example.id): example
                for name in ("train", "val", "test")
                for example in self.dataset.split(name)
            }
        return self._examples.get((split, example_id))

    @property
    def budget(self) -> BudgetConfig:
        """The budget with a relative stop file resolved against the config's folder."""
        budget = self.config.job.budget
        if budget.stop_file is not None and not Path(budget.stop_file).is_absolute():
            return budget.model_copy(update={"stop_file": str(self.base_dir / budget.stop_file)})
        return budget

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
            self.cache = None


def build_runtime(
    config: JobConfig,
    *,
    base_dir: Path,
    inputs: JobInputs | None = None,
    usage: Mapping[str, RoleUsage] | None = None,
    objects: ResolvedJob | None = None,
) -> Runtime:
    """Resolve the config into live objects (its dataset, system, verifier and references
    from ``objects`` when this process resolved them already); LM usage continues from
    ``usage``."""
    inputs = inputs or JobInputs()
    objects = objects or resolve_job(config, base_dir, inputs).checked()
    dataset, system, references = objects.dataset, objects.system, objects.references
    verifier = objects.verifier
    chosen = config.job.algorithm
    algorithm = build_algorithm(chosen, settings_table(chosen, config.algorithm))
    meter = UsageMeter(initial=dict(usage or {}))
    cache = open_cache(config, base_dir)
    try:
        models = build_models(config, cache=cache, meter=meter, base=inputs.lms)
    except BaseException:
        if cache is not None:
            cache.close()
        raise
    verifier = with_judge(verifier, models.by_role.get("judge"))
    scope = evaluation_scope(
        config,
        system,
        verifier,
        dataset=dataset,
        task_lm=inputs.lms.get("task") if inputs.lms else None,
        verifier_overridden=inputs.verifier is not None,
    )
    return Runtime(
        config=config,
        base_dir=base_dir,
        dataset=dataset,
        system=system,
        verifier=verifier,
        models=models,
        cache=cache,
        algorithm=algorithm,
        scope=scope,
        references=references,
        hashes=example_hashes(dataset),
    )
