"""The job configuration: every section a TOML/JSON config or ``emery.optimize`` kwargs can set."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializeAsAny,
    ValidationInfo,
    field_validator,
    model_validator,
)

from emery.core.settings import Settings
from emery.data.loaders import FieldMap, SplitFractions
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.health import ErrorPolicy
from emery.evaluation.objectives import check_objectives
from emery.evaluation.selection import SelectRule, parse_select
from emery.lm.config import MODEL_SHAPE, LMConfig
from emery.systems.registry import parse_system_config
from emery.verifiers.config import VerifierConfig, parse_verifier_config


class Section(Settings):
    """A config section: unknown keys, ``inf`` and ``nan`` are errors."""


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
    is retried. ``timeout_s`` bounds an attempt's own time: time it waits on an in-process
    (``local/``) model, queued behind other requests or decoding, does not count, so a
    slow or busy machine does not time rollouts out; ``unresponsive_s`` stops one that
    shows no span, heartbeat or LM call for that long. The job fails when every rollout of the
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
    executor: str = "local"
    """Where rollouts run: ``local`` (in the job's process), ``runners`` (queued in the
    store for ``emery runner`` processes, which hold each claimed attempt for ``lease_s``
    between heartbeats; the job fails when no runner claims any of a batch's rollouts for
    ``runner_wait_s``) or ``ray`` (on the cluster at ``ray_address``, or on a local Ray of
    ``ray_cpus`` CPUs started by the job). On Ray each rollout is a task (for stateless
    systems) unless ``ray_actors`` is set: then the job keeps that many actors, each
    building the system once (a loaded local model, a code harness's episode process), and runs
    rollouts on them in turn. A rollout whose Ray worker is lost is retried as
    ``max_attempts`` allow. Any other executor is an ``ExecutorKind`` named as
    ``"module:attr"`` or by an ``emery.executors`` entry point (``workers/executors.py``)."""
    lease_s: float = Field(default=30.0, gt=0)
    runner_wait_s: float = Field(default=600.0, gt=0)
    ray_address: str | None = None
    ray_cpus: int | None = Field(default=None, ge=1)
    ray_actors: int | None = Field(default=None, ge=1)

    def error_policy(self) -> ErrorPolicy:
        return ErrorPolicy(max_error_rate=self.max_error_rate, min_rollouts=self.min_error_rollouts)


class LoRASection(Section):
    """What SFT and RL jobs share: the LoRA of the local task model (``[lm.task]``), its
    optimizer steps, checkpoints every ``save_steps`` steps into the job's workdir, and the
    test scoring of base vs tuned model after training (``evaluate``). ``threads`` defaults
    to all cores but one (on 2 shared cores one thread trains faster)."""

    max_steps: int = Field(default=40, ge=1)
    learning_rate: float = Field(default=1e-3, gt=0)
    lora_r: int = Field(default=8, ge=1)
    lora_alpha: int = Field(default=16, ge=1)
    lora_dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    save_steps: int = Field(default=10, ge=1)
    threads: int | None = Field(default=None, ge=1)
    evaluate: bool = True


class SFTSection(LoRASection):
    """``[sft]``: LoRA fine-tuning of the local task model (``[lm.task]``) on chat data.

    The data is a finished prompt job's successful rollouts (``source_job``; of the
    ``candidate`` "best", "all" or an id prefix, on ``splits``, scoring at least
    ``min_score``) or a chat JSONL file (``data``, one ``{"messages": [...]}`` a line).
    ``val_fraction`` of it is held out for the val loss.

    With ``samples_per_example = N`` (0: the stored rollouts only) the source job's
    candidate is also run N times on each example of ``splits`` before training, sampled
    at ``sample_temperature`` by ``teacher`` (a model name as ``[lm.*]`` takes, called with
    ``[lm.task]``'s other settings; default: the task model), and the replies scoring at
    least ``min_score`` are kept (rejection sampling, ``training.sampling``).
    """

    source_job: str | None = None
    candidate: str = "best"
    splits: tuple[Literal["train", "val"], ...] = ("train",)
    min_score: float = Field(default=1.0, ge=0.0, le=1.0)
    data: str | None = None
    batch_size: int = Field(default=4, ge=1)
    max_length: int = Field(default=512, ge=8)
    val_fraction: float = Field(default=0.1, ge=0.0, lt=1.0)
    eval_steps: int = Field(default=10, ge=1)
    samples_per_example: int = Field(default=0, ge=0, le=1000)
    sample_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    teacher: str | None = None

    @field_validator("teacher")
    @classmethod
    def _teacher_model(cls, value: str | None) -> str | None:
        if value is not None and not value.partition("/")[2]:
            raise ValueError(f"{value!r} {MODEL_SHAPE}")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> SFTSection:
        if (self.source_job is None) == (self.data is None):
            raise ValueError("set exactly one of sft.source_job (a finished job) or sft.data")
        return self

    @model_validator(mode="after")
    def _sampling_fits(self) -> SFTSection:
        n = self.samples_per_example
        if n == 0 and self.teacher is not None:
            raise ValueError(
                "sft.teacher samples replies: set sft.samples_per_example to 1 or more"
            )
        if n > 0 and self.source_job is None:
            raise ValueError(
                "sft.samples_per_example samples a prompt job's candidate: set sft.source_job"
                " (sft.data is trained as it is)"
            )
        if n > 0 and self.candidate == "all":
            raise ValueError(
                'sft.samples_per_example samples one prompt: set sft.candidate to "best"'
                ' or a candidate id, not "all"'
            )
        if n > 1 and self.sample_temperature == 0:
            raise ValueError(
                f"sft.sample_temperature = 0 makes all {n} samples of an example the same:"
                " set a temperature above 0 or sft.samples_per_example = 1"
            )
        return self


class RLSection(LoRASection):
    """``[rl]``: GRPO (trl) on a LoRA of the local task model, the job's verifier as reward.

    Each step takes ``prompts_per_step`` examples of ``splits``, renders the system's
    single stage for each, samples ``num_generations`` completions (at most
    ``max_completion_length`` tokens, at ``temperature``) from the model being trained and
    rewards each with the verifier on its parsed output (0 when the parser cannot read
    it); ``beta`` weighs the KL term to the base model. The defaults fit 2 CPU cores with
    ``local/smollm2-135m``. The prompt trained (and scored on test) is the system's seed,
    or the best candidate of a finished prompt job (``source_job``).

    A system that is not a prompt program (a function agent, a task app, a code harness)
    is trained as an agent (``training.agent_episodes``): its episodes run through
    ``[runtime] executor`` and every LM call kept is credited by ``credit`` (``same``: the
    episode's reward on every call; ``discounted``: the last call gets it, each earlier one
    ``discount`` times the next one's; ``per_step``: the rewards the agent emitted after
    each call); ``agent`` keeps only the calls of the agent of that name (``as_agent``,
    the ``X-Emery-Agent`` header, ``gen_ai.agent.name``): a multi-agent system trains one.
    """

    source_job: str | None = None
    max_steps: int = Field(default=20, ge=1)
    learning_rate: float = Field(default=5e-5, gt=0)
    save_steps: int = Field(default=5, ge=1)
    splits: tuple[Literal["train", "val"], ...] = ("train",)
    prompts_per_step: int = Field(default=2, ge=1)
    num_generations: int = Field(default=4, ge=2)
    max_completion_length: int = Field(default=48, ge=1)
    temperature: float = Field(default=1.0, gt=0)
    beta: float = Field(default=0.04, ge=0.0)
    credit: Literal["same", "discounted", "per_step"] = "same"
    discount: float = Field(default=1.0, gt=0.0, le=1.0)
    agent: str | None = Field(default=None, min_length=1)

    @field_validator("agent")
    @classmethod
    def _named_agent(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("an agent name cannot be blank")
        return value

    @model_validator(mode="after")
    def _discount_discounts(self) -> RLSection:
        if self.discount != 1.0 and self.credit != "discounted":  # a stored config sets all
            raise ValueError(
                f'discount applies to credit = "discounted", not credit = "{self.credit}"'
            )
        return self


class TrackingConfig(Section):
    """``[tracking]``: log each job as an MLflow run (``mlflow = true``, needs the
    ``emery[mlflow]`` extra) at ``tracking_uri`` (a tracking server's URL, a database URI
    or a local folder such as ``mlruns``, relative to the config; default: MLflow's own,
    ``MLFLOW_TRACKING_URI`` or ``mlflow.db``) under ``experiment`` (default ``emery``)."""

    mlflow: bool = False
    tracking_uri: str | None = None
    experiment: str | None = None


class JobSection(Section):
    """``[job]``: name, type (``prompt``: search the system's text; ``sft``: fine-tune the
    task model, see ``[sft]``; ``rl``: train it on the verifier's reward, see ``[rl]``),
    algorithm, seed and ``[job.budget]``; ``objectives`` (the score and any costs per
    example, ``evaluation.objectives``) and ``select`` (how the winner is chosen among the
    candidates scored on val, ``evaluation.selection``)."""

    name: str | None = None
    type: Literal["prompt", "sft", "rl"] = "prompt"
    algorithm: str = "baseline"
    seed: int = 0
    budget: BudgetConfig = BudgetConfig()
    warm_start: str | None = None
    """An earlier prompt job on the same system (id, id prefix or name): its best
    candidates (GEPA's Pareto front, APO's beam, MIPRO's programs and trials) start this
    search, each rescored on this job's val (``jobs/warm_start.py``)."""
    warm_start_candidates: int = Field(default=4, ge=1)
    """The most of the earlier job's candidates rescored, best first (their rescoring takes
    at most half the metric-call budget)."""
    approve: Literal["best"] | None = None
    """``"best"``: a candidate becomes the best only once a person approves it
    (``emery approvals``, the dashboard); the job waits meanwhile."""
    objectives: tuple[str, ...] = ("score",)
    select: str = "best_score"

    @field_validator("objectives")
    @classmethod
    def _known_objectives(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return check_objectives(value)

    @field_validator("select")
    @classmethod
    def _known_rule(cls, value: str, info: ValidationInfo) -> str:
        parse_select(value, info.data.get("objectives", ("score",)))
        return value

    @model_validator(mode="after")
    def _warm_start_searches(self) -> JobSection:
        if self.warm_start is not None and self.type != "prompt":
            raise ValueError(f'warm_start seeds a prompt search, not a type = "{self.type}" job')
        return self

    @model_validator(mode="after")
    def _approve_searches(self) -> JobSection:
        if self.approve is not None and self.type != "prompt":
            raise ValueError(f'approve applies to a prompt search, not a type = "{self.type}" job')
        return self

    def select_rule(self) -> SelectRule:
        """The ``select`` setting as a rule object."""
        return parse_select(self.select, self.objectives)

    @property
    def chooses_by_cost(self) -> bool:
        """Whether the job names a cost or a rule besides the default ``best_score``."""
        return self.objectives != ("score",) or self.select != "best_score"


class JobConfig(Section):
    """A whole job: what to optimize, on which data, with which models and how."""

    job: JobSection = JobSection()
    system: SerializeAsAny[BaseModel] | None = None
    dataset: DatasetConfig
    lm: LMSection = LMSection()
    verifier: SerializeAsAny[VerifierConfig] | None = None
    runtime: RuntimeConfig = RuntimeConfig()
    algorithm: dict[str, dict[str, Any]] = Field(default_factory=dict)
    references: dict[str, dict[str, str]] = Field(default_factory=dict)
    """``[references.NAME]``: hand-written candidates (component name → text, choice
    components such as ``"solve:reminder"`` included; unset components keep the seed's)
    scored on test beside the seed and the best, never seen by the search."""

    sft: SFTSection | None = None
    rl: RLSection | None = None
    tracking: TrackingConfig = TrackingConfig()

    @model_validator(mode="after")
    def _sft_fits(self) -> JobConfig:
        for kind in ("sft", "rl"):
            if (self.job.type == kind) != (getattr(self, kind) is not None):
                raise ValueError(
                    f'an [{kind}] section goes with [job] type = "{kind}", and only with it'
                )
        model = self.lm.task.model
        if self.job.type in ("sft", "rl") and (
            not model.startswith("local/") or model.endswith(".gguf") or "+" in model
        ):
            raise ValueError(
                f"an {self.job.type} job tunes a known local model: lm.task.model must be"
                f" local/<name>, not {model!r}"
            )
        return self

    @model_validator(mode="after")
    def _cost_limit_priced(self) -> JobConfig:
        """``lm_cost_usd`` needs a priced model: at $0 a call the limit never ends a search."""
        if self.job.budget.lm_cost_usd is None:
            return self
        configs = [self.lm.for_role(role) for role in ("task", "reflection", "proposer", "judge")]
        if not any(c.has_price() for c in configs):
            raise ValueError(
                "job.budget.lm_cost_usd: no model has a price (local and unknown models cost"
                " $0), so this limit would never end the search; set lm.<role>."
                "price_input_per_mtok and price_output_per_mtok, or limit lm_tokens instead"
            )
        return self

    @field_validator("system", mode="before")
    @classmethod
    def _system_kind(cls, value: Any) -> Any:
        return None if value is None else parse_system_config(value)

    @field_validator("verifier", mode="before")
    @classmethod
    def _verifier_kind(cls, value: Any) -> Any:
        return None if value is None else parse_verifier_config(value)
