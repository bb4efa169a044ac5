"""The job configuration: every section a TOML/JSON config or ``emery.optimize`` kwargs can set."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator, model_validator

from emery.data.loaders import FieldMap, SplitFractions
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.health import ErrorPolicy
from emery.lm.config import LMConfig
from emery.systems.registry import parse_system_config
from emery.verifiers.config import VerifierConfig


class Section(BaseModel):
    """A config section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class DatasetConfig(Section):
    """``[dataset]``: a built-in ``task`` or a file ``path``, and how to split it."""

    task: str | None = None
    path: str | None = None
    seed: int = 0
    n_train: int | None = Field(default=None, ge=0)
    n_val: int | None = Field(default=None, ge=0)
    n_test: int | None = Field(default=None, ge=0)
    limit: int | None = Field(default=None, ge=1)
    fields: FieldMap = FieldMap()
    split: SplitFractions = SplitFractions()

    @model_validator(mode="after")
    def _one_source(self) -> DatasetConfig:
        if (self.task is None) == (self.path is None):
            raise ValueError("set exactly one of dataset.task (a built-in task) or dataset.path")
        return self


class LMSection(Section):
    """``[lm.task]``, ``[lm.reflection]``, ``[lm.proposer]``, ``[lm.judge]``: unset roles = task."""

    task: LMConfig = LMConfig()
    reflection: LMConfig | None = None
    proposer: LMConfig | None = None
    judge: LMConfig | None = None

    def for_role(self, role: str) -> LMConfig:
        config: LMConfig | None = getattr(self, role)
        return config if config is not None else self.task


class RuntimeConfig(Section):
    """``[runtime]``: concurrency, timeouts, retries and where files go.

    A rollout gets ``max_attempts`` attempts; an attempt that ends in one of ``retry_on``
    is retried. ``timeout_s`` bounds an attempt; ``unresponsive_s`` stops one that shows
    no span, heartbeat or LM call for that long. The job fails when every rollout of the
    seed fails with an error (not a wrong answer), or when more than ``max_error_rate`` of
    a batch of at least ``min_error_rollouts`` new rollouts fail because the task model,
    the verifier or the time limit did: a batch of the seed, or two in a row of different
    candidates (1.0 turns this check off); see ``evaluation.health``.
    """

    concurrency: int = Field(default=8, ge=1)
    timeout_s: float = Field(default=300.0, gt=0)
    unresponsive_s: float | None = Field(default=None, gt=0)
    max_attempts: int = Field(default=1, ge=1)
    retry_on: tuple[Literal["failed", "timeout", "unresponsive"], ...] = (
        "failed",
        "timeout",
        "unresponsive",
    )
    max_error_rate: float = Field(default=0.5, ge=0.0, le=1.0)
    min_error_rollouts: int = Field(default=3, ge=1)
    workdir: str = ".emery"
    cache: bool = True
    executor: Literal["local", "runners", "ray"] = "local"
    """Where rollouts run: ``local`` (in the job's process), ``runners`` (queued in the
    store for ``emery runner`` processes, which hold each claimed attempt for ``lease_s``
    between heartbeats) or ``ray`` (Ray tasks on the cluster at ``ray_address``, or on a
    local Ray of ``ray_cpus`` CPUs started by the job)."""
    lease_s: float = Field(default=30.0, gt=0)
    ray_address: str | None = None
    ray_cpus: int | None = Field(default=None, ge=1)

    def error_policy(self) -> ErrorPolicy:
        return ErrorPolicy(max_error_rate=self.max_error_rate, min_rollouts=self.min_error_rollouts)


class JobSection(Section):
    """``[job]``: name, algorithm, seed and ``[job.budget]``."""

    name: str | None = None
    algorithm: str = "baseline"
    seed: int = 0
    budget: BudgetConfig = BudgetConfig()


class JobConfig(Section):
    """A whole job: what to optimize, on which data, with which models and how."""

    job: JobSection = JobSection()
    system: SerializeAsAny[BaseModel] | None = None
    dataset: DatasetConfig
    lm: LMSection = LMSection()
    verifier: VerifierConfig | None = None
    runtime: RuntimeConfig = RuntimeConfig()
    algorithm: dict[str, dict[str, Any]] = Field(default_factory=dict)
    references: dict[str, dict[str, str]] = Field(default_factory=dict)
    """``[references.NAME]``: hand-written candidates (component name → text, choice
    components such as ``"solve:reminder"`` included; unset components keep the seed's)
    scored on test beside the seed and the best, never seen by the search."""

    @field_validator("system", mode="before")
    @classmethod
    def _system_kind(cls, value: Any) -> Any:
        return None if value is None else parse_system_config(value)
