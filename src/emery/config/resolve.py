"""Build the dataset, system, verifier and models a validated config describes.

``resolve_job`` is the one place a job's config becomes its dataset, system, verifier and
references (``ResolvedJob``), checked against each other by ``checked``: every process that
runs, scores, samples, serves or publishes a job goes through it, so the checks do not
drift between them. Models likewise: ``resolve_lm`` is the one place an ``[lm.ROLE]``
section becomes its LM (cached, token-recording and metered as the section says), and
``build_models`` the models of a job's roles, given models in place of configured ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel

from emery.config.schema import JobConfig, LMSection
from emery.core.errors import ConfigError
from emery.core.models import Candidate, Dataset, Lineage, Split
from emery.data.loaders import load_dataset
from emery.data.tasks import builtin_task
from emery.evaluation.health import check_gold
from emery.lm.base import LM
from emery.lm.cache import ResponseCache
from emery.lm.config import LMConfig, build_base_lm, build_lm, local_lm, model_provider
from emery.lm.usage import ROLES, MeteredLM, UsageMeter
from emery.systems.base import System
from emery.systems.graph.seed import starting_graph
from emery.systems.graph.system import GraphSystem
from emery.systems.harness.system import CodeHarnessConfig
from emery.systems.prompt_program import PromptProgram
from emery.systems.registry import build_system, parse_system_config
from emery.verifiers.base import Verifier
from emery.verifiers.config import VerifierConfig, build_verifier, parse_verifier_config
from emery.verifiers.kinds import AgreementConfig, ExactConfig
from emery.verifiers.rubric import RubricJudge


@dataclass
class JobInputs:
    """Objects that replace what the config describes, for jobs started from Python.

    ``lms`` maps roles to base models (``"task"`` stands in for roles neither given nor
    configured: ``build_models``); they are still wrapped in the response cache and the
    usage meter.
    """

    system: System | None = None
    dataset: Dataset | None = None
    verifier: Verifier | None = None
    lms: Mapping[str, LM] | None = None

    @property
    def empty(self) -> bool:
        return (
            self.system is None
            and self.dataset is None
            and self.verifier is None
            and not (self.lms)
        )


@dataclass
class ResolvedJob:
    """A job's config (read from ``base_dir``; ``inputs`` in place of what it names) as its
    dataset, system, verifier and ``[references.NAME]`` candidates, each built on first
    use: a process that needs only the system loads no data and builds no verifier."""

    config: JobConfig
    base_dir: Path | None = None
    inputs: JobInputs = field(default_factory=lambda: JobInputs())

    @cached_property
    def dataset(self) -> Dataset:
        given = self.inputs.dataset
        return given if given is not None else resolve_dataset(self.config, self.base_dir)

    @cached_property
    def system(self) -> System:
        if self.inputs.system is not None:
            return self.inputs.system
        from_data = self.config.system is None and self.config.dataset.task is None
        return resolve_system(self.config, self.dataset if from_data else None, self.base_dir)

    @cached_property
    def verifier(self) -> Verifier:
        given = self.inputs.verifier
        return given if given is not None else resolve_verifier(self.config, self.dataset)

    @cached_property
    def references(self) -> dict[str, Candidate]:
        return reference_candidates(self.config, self.system, self.dataset)

    def checked(self, split: Split | None = None) -> ResolvedJob:
        """Itself, once its parts fit together: a system that cannot read the data, a
        verifier that needs gold outputs the data (``split``'s examples, when given) lacks,
        or a bad reference is a one-line ``ConfigError``."""
        check_system_inputs(self.system, self.dataset)
        examples = self.dataset if split is None else self.dataset.split(split)
        check_gold(self.system, self.verifier, examples)
        _ = self.references
        self.check_models()
        return self

    def check_models(self) -> None:
        """Each configured role's model provider resolves (a ``<module>:<attr>/<model>``
        provider imports), so a bad one is a one-line ``ConfigError`` before the job is
        stored; roles given as objects are not read, and no model is built."""
        given = self.inputs.lms or {}
        for role in LMSection.model_fields:
            section: LMConfig | None = getattr(self.config.lm, role)
            if section is not None and role not in given:
                model_provider(section.model)


def resolve_job(
    config: JobConfig, base_dir: Path | None = None, inputs: JobInputs | None = None
) -> ResolvedJob:
    """``config`` resolved (``ResolvedJob``; call ``checked()`` before running it)."""
    return ResolvedJob(config, base_dir, inputs or JobInputs())


VAL_SHARE_OF_BUDGET = 5
MIN_DEFAULT_VAL = 10
VAL_GROWTH = 8
"""Past 200 calls val grows as the square root of the budget: at most sqrt(8 x budget)."""


def default_val_size(config: JobConfig) -> int | None:
    """The most val examples when ``n_val`` is not set: a fifth of the metric-call budget
    up to 200 calls, then the square root of 8 x the budget (40 at 200, 56 at 400, 89 at
    1,000), at least 10 (None without a metric-call budget).

    The seed's val score and every trial judged on all of val pay for all of val, so with
    val a fixed share of the budget every budget bought the same 3 trials on a larger val,
    and 400 calls lifted less than 200 on CLINC15 and Restaurant-8k. Growing as the square
    root, both what a trial is judged on and the number of trials grow with the budget."""
    calls = config.job.budget.metric_calls
    if config.dataset.n_val is not None or calls is None:
        return config.dataset.n_val
    share = min(calls // VAL_SHARE_OF_BUDGET, math.isqrt(VAL_GROWTH * calls))
    return max(MIN_DEFAULT_VAL, share)


def resolve_dataset(config: JobConfig, base_dir: Path | None = None) -> Dataset:
    """The configured dataset: a built-in task's generated splits or a loaded file, with
    val capped to the budget when its size is not given (``default_val_size``)."""
    spec = config.dataset
    n_val = default_val_size(config)
    if spec.task is not None:
        task = builtin_task(spec.task)
        if spec.n_val is None and n_val is not None:
            n_val = min(n_val, task.sizes[1])
        dataset = task.dataset(
            seed=spec.seed, n_train=spec.n_train, n_val=n_val, n_test=spec.n_test
        )
    else:
        assert spec.path is not None
        path = Path(spec.path)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        dataset = load_dataset(path, fields=spec.fields, fractions=spec.split, seed=spec.seed)
        if spec.n_val is None and n_val is not None:
            n_val = min(n_val, len(dataset.split("val")))
        dataset = dataset.first({"train": spec.n_train, "val": n_val, "test": spec.n_test})
    return dataset.limited(spec.limit)


def resolve_system(
    config: JobConfig, dataset: Dataset | None = None, base_dir: Path | None = None
) -> System:
    """The configured system; without one, the built-in task's starting program, or for a
    file dataset a one-node graph built from the file (``dataset``, else loaded from the
    config relative to ``base_dir``)."""
    if config.system is not None:
        return build_system(beside(config.system, base_dir))
    if config.dataset.task is not None:
        task = builtin_task(config.dataset.task)
        if task.system is not None:
            return build_system(parse_system_config(task.system))
        assert task.program is not None
        return PromptProgram(task.program)
    return GraphSystem(starting_graph(dataset or resolve_dataset(config, base_dir)))


def beside(system: BaseModel, base_dir: Path | None) -> BaseModel:
    """``system`` with a relative harness ``code_path`` read from ``base_dir`` (the config's
    folder), as data paths are."""
    if not isinstance(system, CodeHarnessConfig) or system.code_path is None or base_dir is None:
        return system
    path = Path(system.code_path).expanduser()
    if path.is_absolute():
        return system
    return system.model_copy(update={"code_path": str(base_dir / path)})


def resolve_verifier(config: JobConfig, dataset: Dataset, judge: LM | None = None) -> Verifier:
    """``[verifier]``, else the dataset's own suggestion, else exact match. ``judge`` is the
    model a rubric or contrastive verifier asks; a rubric that leaves some example without
    criteria is refused here, before any model call. A verifier graph is scored by its
    agreement with the gold scores (``verifiers.agreement``)."""
    if getattr(config.system, "graph_type", None) == "verifier":
        return build_verifier(_agreement(config))
    if config.verifier is not None:
        verifier = build_verifier(config.verifier, judge)
    elif dataset.verifier is not None:
        try:
            suggested = parse_verifier_config(dataset.verifier)
        except ConfigError as exc:
            raise ConfigError(f"dataset {dataset.name!r}: {exc}") from None
        verifier = build_verifier(suggested, judge)
    else:
        verifier = build_verifier(ExactConfig(), judge)
    if isinstance(verifier, RubricJudge):
        verifier.check_examples(dataset)
    return verifier


def _agreement(config: JobConfig) -> VerifierConfig:
    """The verifier of a verifier graph's job; ConfigError when ``[verifier]`` names another."""
    if config.verifier is not None and config.verifier.kind != "agreement":
        raise ConfigError(
            "a verifier graph (graph_type = 'verifier') is scored by its agreement with the"
            f" dataset's gold scores: verifier.kind must be 'agreement' or unset, not"
            f" {config.verifier.kind!r}"
        )
    return config.verifier or AgreementConfig()


def check_system_inputs(system: System, dataset: Dataset) -> None:
    """Fail before any model call if a placeholder names a field some example lacks."""
    if not list(dataset):
        raise ConfigError("the dataset is empty")
    system.check_inputs(_common_fields(dataset))


def reference_candidates(
    config: JobConfig, system: System, dataset: Dataset
) -> dict[str, Candidate]:
    """``[references.NAME]`` as candidates: the seed with the given components replaced.

    A component the system does not have is refused (a choice component ``stage:choice`` of
    a known stage is allowed), and so is a reference whose placeholders no input provides.
    """
    seed = system.seed_candidate()
    stages = {name.split(":")[0] for name in seed.components}
    references: dict[str, Candidate] = {}
    for name, components in config.references.items():
        for component in components:
            if component not in seed.components and component.split(":")[0] not in stages:
                known = ", ".join(sorted(seed.components)) or "none"
                raise ConfigError(
                    f"references.{name}: unknown component {component!r} (the system has: {known})"
                )
        candidate = Candidate(
            components={**seed.components, **components},
            demos=seed.demos,
            lineage=Lineage(parents=(seed.id,), operation="reference", details={"name": name}),
        )
        if isinstance(system, PromptProgram):
            try:
                system.check_candidate(candidate, _common_fields(dataset))
            except ConfigError as exc:
                raise ConfigError(f"references.{name}: {exc}") from None
        references[name] = candidate
    return references


def _common_fields(dataset: Dataset) -> set[str]:
    examples = list(dataset)
    return set.intersection(*(set(e.input) for e in examples)) if examples else set()


@dataclass
class Models:
    """One metered (and cached) LM per role, sharing a usage meter and response cache."""

    meter: UsageMeter
    by_role: dict[str, MeteredLM] = field(default_factory=dict)

    def __getitem__(self, role: str) -> MeteredLM:
        return self.by_role[role]


def resolve_lm(
    config: LMConfig,
    *,
    role: str = "task",
    meter: UsageMeter | None = None,
    cache: ResponseCache | None = None,
    base: LM | None = None,
    wrap: Callable[[LM], LM] | None = None,
) -> MeteredLM:
    """The model for ``role`` that ``config`` (one ``[lm.ROLE]`` section) describes:
    ``base`` (else the model it names, loaded on first call), passed through ``wrap`` (a
    sampling wrapper, say), then cached in ``cache`` (when given and the section caches)
    and metered on ``meter`` (else a meter of its own) with the section's defaults."""
    if wrap is not None:
        base = wrap(base if base is not None else build_base_lm(config))
    return build_lm(config, role=role, meter=meter or UsageMeter(), cache=cache, base=base)


def resolve_local_lm(config: LMConfig, *, lora: Path | None, seed: int) -> LM:
    """A local model of ``config`` of its own (not shared, not metered) with the adapter
    ``lora`` and sampling seeded by ``seed``: one RL step's policy."""
    return local_lm(config, lora=lora, seed=seed)


def build_models(
    config: JobConfig,
    *,
    roles: tuple[str, ...] = ROLES,
    cache: ResponseCache | None = None,
    meter: UsageMeter | None = None,
    base: Mapping[str, LM] | None = None,
) -> Models:
    """Build the LMs for ``roles``; models are loaded lazily on first call.

    ``base`` (``JobInputs.lms``) maps roles to given models: a role given one runs it, a
    role configured by name (``[lm.ROLE]``) without one is built from its section, and a
    role neither given nor configured is the task's: the given task model, else the one
    ``[lm.task]`` names."""
    models = Models(meter=meter or UsageMeter())
    for role in roles:
        given = base.get(role) if base else None
        if base and given is None and not _configured(config, role):
            given = base.get("task")
        models.by_role[role] = resolve_lm(
            config.lm.for_role(role), role=role, meter=models.meter, cache=cache, base=given
        )
    return models


def _configured(config: JobConfig, role: str) -> bool:
    """Whether ``role``, a role other than the task, has an ``[lm.ROLE]`` section."""
    return role != "task" and getattr(config.lm, role) is not None


def open_cache(config: JobConfig, base_dir: Path | None = None) -> ResponseCache | None:
    """The response cache under the runtime workdir, unless caching is off."""
    if not config.runtime.cache:
        return None
    workdir = Path(config.runtime.workdir)
    if not workdir.is_absolute() and base_dir is not None:
        workdir = base_dir / workdir
    return ResponseCache(workdir / "lm_cache.db")
