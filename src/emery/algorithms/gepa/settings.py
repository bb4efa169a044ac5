"""``[algorithm.gepa]``: selection, minibatches, acceptance, merge and the reflection call."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from emery.algorithms.base import AlgorithmSettings
from emery.algorithms.gepa.reflection import load_prompt
from emery.core.errors import ConfigError
from emery.lm.usage import ROLES


class GepaSettings(AlgorithmSettings):
    """Settings of GEPA (reflective prompt evolution with a per-example Pareto front).

    The defaults follow the paper (Pareto selection, round-robin components, minibatches of
    3, merge after an acceptance), except that a child is accepted only when the paired
    evidence on the minibatch says it is better (``confidence``), and a minibatch that
    cannot decide grows (``max_evidence_examples``; a tie once, ``extend_ties``). The
    reflection options below the line help weak reflection models and are harmless for
    strong ones.
    """

    minibatch_size: int = Field(default=3, ge=1, description="train examples per reflection")
    minibatch_sampler: str = Field(
        default="epoch_shuffled",
        description=(
            "how a child's train minibatch (and any further one it is judged on) is drawn:"
            " epoch_shuffled, or a SamplerKind of your own as 'module:attr'"
        ),
    )
    failure_share: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description=(
            "show the reflection a minibatch with this share of train examples the parent"
            " failed (the rest from the others) and judge the child on a uniform minibatch"
            " (3 x minibatch calls an iteration); default: one uniform minibatch for both"
        ),
    )
    candidate_selection: str = Field(
        default="pareto",
        description=(
            "how a parent is chosen from the pool: pareto, top_k_pareto, current_best,"
            " epsilon_greedy, or a SelectorKind of your own as 'module:attr'"
        ),
    )
    epsilon: float = Field(
        default=0.1, ge=0.0, le=1.0, description="epsilon_greedy: chance of a random parent"
    )
    top_k: int = Field(default=3, ge=1, description="top_k_pareto: candidates kept by mean val")
    component_selection: Literal["round_robin", "all"] = Field(
        default="round_robin", description="change one component per iteration, or all of them"
    )
    components: list[str] | None = Field(
        default=None, description="components to optimize (default: every non-empty one)"
    )
    accept: Literal["improvement", "improvement_or_equal"] = Field(
        default="improvement",
        description=(
            "accept a child the paired evidence shows better (or also one it cannot tell"
            " apart and that is not behind)"
        ),
    )
    acceptance: str = Field(
        default="two_stage",
        description=(
            "two_stage: a child better on its minibatch is scored on val, joins unless"
            " shown worse than its parent there (stopped early when it is), and becomes the"
            " best only when shown better than the seed (at 0.6) on val or, where val cannot"
            " tell, on val and winner_examples further train examples; evidence: a child"
            " joins the pool when the paired evidence on train shows it better than its"
            " parent (more minibatches while undecided); or an AcceptanceKind of your own as"
            " 'module:attr'"
        ),
    )
    winner_examples: int = Field(
        default=30,
        ge=0,
        description=(
            "two_stage (a rule that guards its winner): most further train examples (never"
            " judged or reflected on by its lineage; 10 at a time, stopped when shown"
            " better or behind) on which a new"
            " pool member that tops val but is not shown better than the seed there is"
            " compared with the seed; 0: val alone decides"
        ),
    )
    confidence: float = Field(
        default=0.8,
        gt=0.5,
        lt=1.0,
        description="two-sided confidence of the paired interval that accepts a child",
    )
    max_evidence_examples: int | None = Field(
        default=None,
        ge=1,
        description=(
            "most train examples a child and its parent are compared on while the evidence"
            " is undecided (default: what a 20-point difference needs, 55, see"
            " algorithms.separation; the budget, which keeps all of val for an accepted"
            " child, may stop it sooner)"
        ),
    )
    extend_ties: bool = Field(
        default=True,
        description=(
            "when child and parent tie on the minibatch, score both on the next minibatch"
            " too (once) and judge on all of it (a weak proposer's children are mostly ties)"
        ),
    )
    skip_perfect: bool = Field(
        default=True, description="skip an iteration whose parent is perfect on the minibatch"
    )
    perfect_score: float = Field(default=1.0, gt=0.0, le=1.0)
    max_stale_iterations: int | None = Field(
        default=None,
        ge=1,
        description=(
            "stop after this many iterations in a row that ran no new rollout (every"
            " minibatch solved, or the same proposals again); default: two epochs, at least 10"
        ),
    )
    stop_when_perfect: bool = Field(
        default=True, description="stop once the best candidate scores perfect on all of val"
    )
    max_iterations: int | None = Field(default=None, ge=1)
    proposals_per_step: int = Field(
        default=1,
        ge=1,
        description=(
            "children proposed per step, each from its own parent draw and minibatch: their"
            " reflections and scoring run at once, each is accepted on its own evidence"
            " (an iteration is one child; a step is all of them or none)"
        ),
    )
    pipelined_steps: bool | None = Field(
        default=None,
        description=(
            "at proposals_per_step > 1, decide a step's children (verdicts, val, pool) while"
            " the next step's are proposed and scored on their minibatches, whose parents"
            " then come from the pool before the earlier children join it; default: on"
            " where the acceptance rule decides a child on its minibatch alone (two_stage),"
            " where it saves round trips, off under evidence (no gain there:"
            " benchmarks/efficiency/README.md); true also under evidence, except with"
            " failure_share; never at k = 1"
        ),
    )
    use_merge: bool = Field(default=True, description="try merges (when merge_policy says)")
    merge_policy: str = Field(
        default="after_acceptance",
        description=(
            "when to merge and what: after_acceptance (a merge of two front candidates that"
            " share an ancestor is due after each accepted child, up to max_merges), or a"
            " MergeKind of your own as 'module:attr'"
        ),
    )
    max_merges: int = Field(
        default=5, ge=0, description="after_acceptance: most merge attempts in a job"
    )
    merge_subsample: int = Field(
        default=5, ge=1, description="val examples a merged candidate is first scored on"
    )
    # -- LM-free edit operators (prompt programs only) -------------------------------------
    operator_fallback: bool = Field(
        default=True,
        description=(
            "when reflection gives no usable new text, score the parent's next untried"
            " edit-operator child for the chosen component's stage instead"
        ),
    )
    operator_every: int = Field(
        default=3,
        ge=0,
        description=(
            "every n-th iteration is offered to the edit operators (their child instead of"
            " the reflection's; the reflection when none is left), taken as operator_turns"
            " says; 0: operators only as the fallback"
        ),
    )
    operator_turns: str = Field(
        default="thompson",
        description=(
            "which offered turns the operators take: thompson (kept when a Thompson draw of"
            " the operators' rate of children that join the pool above their parent's val"
            " beats the reflection's, Beta(1, 1) priors; always until an operator child is"
            " judged), schedule (every one), or a TurnKind of your own as 'module:attr'"
        ),
    )
    operators: list[str] | None = Field(
        default=None,
        description=(
            "the edit operators offered, in order of preference: built-in names"
            " (answer_stage, format_reminder, ...; see algorithms/operators.py) or an"
            " OperatorKind of your own as 'module:attr'; default: every built-in one"
        ),
    )
    # -- the reflection call ---------------------------------------------------------------
    reflection_role: str = Field(default="reflection", description="LM role that reflects")
    reflection_style: Literal["auto", "standard", "compact"] = Field(
        default="auto",
        description=(
            "standard: the paper's kind of prompt (examples with inputs, replies, feedback);"
            " compact: problems only, answered in TASK/METHOD/FORMAT lines, for small models;"
            " auto: compact for local/ models, standard otherwise"
        ),
    )
    reflection_prompt: Path | None = Field(
        default=None, description="a prompt file replacing the shipped one (see reflection.py)"
    )
    reflection_temperature: float | None = Field(
        default=None,
        ge=0.0,
        le=2.0,
        description=(
            "first attempt; default: the role's own in standard style, retry_temperature in compact"
        ),
    )
    retry_temperature: float = Field(
        default=0.8,
        ge=0.0,
        le=2.0,
        description="later attempts sample, so a retry is not the same unusable reply",
    )
    seed_lm_calls: bool = Field(
        default=True,
        description="send a seed drawn from the search RNG with each sampled reflection call",
    )
    mask_numbers: bool | None = Field(
        default=None,
        description="write numbers as <n> in the problems shown (default: on in compact style)",
    )
    reflection_max_tokens: int | None = Field(
        default=None, ge=16, description="default: 400 in standard style, 200 in compact"
    )
    reflection_token_budget: int = Field(
        default=1200, ge=50, description="approximate tokens of examples shown per reflection"
    )
    excerpt_chars: int = Field(
        default=500, ge=40, description="longest text of one field shown in an example"
    )
    show_expected: bool = Field(
        default=True, description="show each example's expected output beside the feedback"
    )
    show_task: bool = Field(
        default=True, description="show the dataset's description in the reflection prompt"
    )
    proposal_attempts: int = Field(
        default=3,
        ge=1,
        description="reflection calls per iteration when a reply is not a usable instruction",
    )
    reject_example_copies: bool = Field(
        default=True, description="reject a proposal that copies an example's input verbatim"
    )
    max_proposal_chars: int = Field(default=4000, ge=40)

    @field_validator("reflection_prompt")
    @classmethod
    def _prompt_file(cls, path: Path | None) -> Path | None:
        if path is not None:
            try:
                load_prompt(path)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return path

    @field_validator("reflection_role")
    @classmethod
    def _known_role(cls, role: str) -> str:
        if role not in ROLES:
            raise ValueError(f"unknown LM role {role!r}; roles: {', '.join(ROLES)}")
        return role
