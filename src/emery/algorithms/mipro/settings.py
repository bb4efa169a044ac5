"""``[algorithm.mipro]``: presets and the explicit values that override them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from emery.algorithms.base import AlgorithmSettings

Preset = Literal["light", "medium", "heavy"]


class MiproSettings(AlgorithmSettings):
    """How MIPRO bootstraps demos, proposes instructions and searches their combinations.

    Values left as None come from ``preset`` (scaled to the dataset and the metric-call
    budget); a value set here is used as given.
    """

    preset: Preset = "light"
    num_instructions: int | None = Field(default=None, ge=1)
    """Instruction choices per stage, the original included."""
    num_demo_sets: int | None = Field(default=None, ge=1)
    """Demo-set choices per stage: the original/empty set, the labeled set, bootstrapped sets."""
    num_trials: int | None = Field(default=None, ge=0)
    minibatch_size: int | None = Field(default=None, ge=1)
    full_eval_every: int | None = Field(default=None, ge=1)
    """K: every K trials the best combination by mean minibatch score is scored on full val."""

    max_bootstrapped_demos: int = Field(default=4, ge=0)
    max_labeled_demos: int = Field(default=4, ge=0)
    bootstrap_threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    bootstrap_normalise: bool = True
    """A teacher run whose answer is right but whose reply the parser cannot read becomes a
    demo once the gold answer is appended in the parser's format (see ``normalise``)."""
    """A bootstrapped run's demos are kept only when its score reaches this."""
    bootstrap_examples: int | None = Field(default=None, ge=0)
    """Most train examples the teacher runs on while bootstrapping (None: from the plan)."""
    teacher_labeled_demos: Literal["auto", "always", "never"] = "auto"
    """Labeled demos in the teacher's prompt: ``auto`` only for stages with no format
    sentence (gold replies are often bare answers, and a teacher shown them replies
    tersely; with a format sentence the teacher already knows the format)."""
    teacher_format_hint: bool = True
    """Bootstrap with the output-format sentence added to the teacher's instructions."""
    teacher_reasoning: bool = True
    """Ask the teacher to reason before its reply, for stages whose parser reads only part
    of the reply (regex, last line), so bootstrapped demos are worked examples."""
    format_hint_instruction: bool = True
    """Offer "original instruction + output-format sentence" as an instruction choice."""
    search_layouts: bool = True
    """Search each stage's layout (format reminder, instruction placement, inline demos,
    restating answer stage) with TPE beside its instruction and demos."""

    summary_batches: int = Field(default=2, ge=0)
    summary_batch_size: int = Field(default=8, ge=1)
    proposal_attempts: int | None = Field(default=None, ge=0)
    """Proposer calls allowed per stage (None: twice the number of proposals wanted). A
    stage that keeps none of them is asked once more (the retry round: a call per missing
    choice, at most this many)."""
    proposer_temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    proposer_max_tokens: int = Field(default=256, ge=16)
    seed_lm_calls: bool = True
    """Send a seed derived from each proposer call's prompt, so sampled proposals repeat
    from run to run (however the calls interleave with the task's)."""
    use_tips: bool = True
    use_dataset_summary: bool = True

    tpe_startup_trials: int | None = Field(default=None, ge=0)
    trials_per_step: int = Field(default=1, ge=1)
    """Trials TPE picks at once (later ones see earlier ones as running: constant liar)
    and scored together: the same trials in less wall time when the task model serves
    requests in parallel; kill and resume repeat a step whole."""
    top_k: int = Field(default=5, ge=1)
    winner_examples: int = Field(default=30, ge=0)
    """Most further train examples (none a demo either shows; 10 at a time, stopped when
    shown better or behind) on which a combination that tops the best's mean val but is
    not shown better than the seed there is compared with the seed, before the next trial;
    0: val alone decides (``mipro.winner``)."""
    final_promotions: int = Field(default=3, ge=1)
    """At the end, the best combination not yet scored on full val is, and then the next
    ones while their minibatch mean beats the best full-val score (budget allowing)."""
