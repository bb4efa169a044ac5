"""Presets and the plan: how many choices, trials and rollouts a MIPRO run will use.

``light``, ``medium`` and ``heavy`` set the number of choices per stage N; the number of
trials grows with N and with the number of parameters (two per stage). The minibatch
starts at 25 (or the whole val set when it is smaller). When a metric-call budget is
set, the values the user did not set are shrunk until the planned cost fits: first the
minibatch (down to 5), then the trials. Values set explicitly are never changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from emery.algorithms.mipro.settings import MiproSettings, Preset
from emery.core.search_events import MiproPlanFields

DEFAULT_MINIBATCH = 25
MIN_MINIBATCH = 5


@dataclass(frozen=True)
class PresetValues:
    candidates: int
    full_eval_every: int


PRESETS: dict[Preset, PresetValues] = {
    "light": PresetValues(candidates=6, full_eval_every=5),
    "medium": PresetValues(candidates=12, full_eval_every=5),
    "heavy": PresetValues(candidates=18, full_eval_every=8),
}


class MiproPlan(MiproPlanFields):
    """The resolved numbers of one run and what they will cost (upper bounds)."""

    preset: Preset

    def describe(self) -> str:
        """One line for the log and the CLI."""
        budget = "no limit" if self.budget_metric_calls is None else str(self.budget_metric_calls)
        return (
            f"mipro plan ({self.preset}): {self.num_instructions} instructions x "
            f"{self.num_demo_sets} demo sets per stage, {self.num_trials} trials (more while "
            f"the budget lasts) on minibatches "
            f"of {self.minibatch_size}, full val every {self.full_eval_every}; up to "
            f"{self.metric_calls['total']} metric calls (budget {budget}) and "
            f"{self.lm_calls['total']} LM calls ({self.lm_calls['task']} task, "
            f"{self.lm_calls['proposer']} proposer)"
        )


def default_trials(candidates: int, stages: int) -> int:
    """Enough trials for TPE to see each choice a few times: grows with N and the parameters."""
    params = 2 * stages
    return math.ceil(max(2 * params * math.log2(max(candidates, 2)), 1.5 * candidates))


@dataclass(frozen=True)
class PlanInputs:
    """What the plan depends on besides the settings."""

    stages: int
    n_train: int
    n_val: int
    labeled_examples: int
    fixed_instructions: int
    budget_metric_calls: int | None


def make_plan(settings: MiproSettings, inputs: PlanInputs) -> MiproPlan:
    """Resolve presets against the data and the budget, and price the result."""
    preset = PRESETS[settings.preset]
    notes: list[str] = []
    n_instr = settings.num_instructions or preset.candidates
    n_demo = settings.num_demo_sets or preset.candidates
    k = settings.full_eval_every or preset.full_eval_every
    trials = (
        settings.num_trials
        if settings.num_trials is not None
        else default_trials(max(n_instr, n_demo), inputs.stages)
    )
    n_val = inputs.n_val
    minibatch = min(settings.minibatch_size or DEFAULT_MINIBATCH, n_val) if n_val else 0
    bootstrap = _bootstrap_examples(settings, inputs, n_demo)
    budget = inputs.budget_metric_calls
    if budget is not None:
        if settings.bootstrap_examples is None and bootstrap > budget // 4:
            bootstrap = budget // 4
            notes.append(f"bootstrapping capped at {bootstrap} rollouts (a quarter of the budget)")
        available = budget - n_val - bootstrap
        minibatch, trials = _fit(settings, available, minibatch, trials, k, n_val, notes)
    metric = _metric_calls(n_val, bootstrap, trials, minibatch, k)
    summary_calls = _summary_calls(settings, inputs.n_train)
    wanted_proposals = max(0, n_instr - inputs.fixed_instructions)
    attempts = (
        settings.proposal_attempts
        if settings.proposal_attempts is not None
        else 2 * wanted_proposals
    )
    proposer = summary_calls + attempts * inputs.stages
    task = metric["total"] * inputs.stages
    startup = (
        settings.tpe_startup_trials
        if settings.tpe_startup_trials is not None
        else min(10, max(3, trials // 3))
    )
    return MiproPlan(
        preset=settings.preset,
        num_instructions=n_instr,
        num_demo_sets=n_demo,
        num_trials=trials,
        minibatch_size=minibatch,
        full_eval_every=k,
        tpe_startup_trials=startup,
        bootstrap_examples=bootstrap,
        summary_calls=summary_calls,
        proposal_attempts=attempts,
        metric_calls=metric,
        lm_calls={"task": task, "proposer": proposer, "total": task + proposer},
        budget_metric_calls=budget,
        notes=notes,
    )


def _bootstrap_examples(settings: MiproSettings, inputs: PlanInputs, n_demo: int) -> int:
    """Train examples the teacher may run to find passing demos (before any budget cap)."""
    pool = max(0, inputs.n_train - inputs.labeled_examples)
    wanted = settings.max_bootstrapped_demos * max(0, n_demo - 2)
    if settings.bootstrap_examples is not None:
        return min(pool, settings.bootstrap_examples)
    return min(pool, max(2 * wanted, 10)) if wanted else 0


def _metric_calls(
    n_val: int, bootstrap: int, trials: int, minibatch: int, k: int
) -> dict[str, int]:
    """The planned metric calls of each phase and in total."""
    promotions = _promotions(trials, k, minibatch, n_val)
    full_evals = promotions * max(0, n_val - minibatch)
    metric = {
        "baseline": n_val,
        "bootstrap": bootstrap,
        "trials": trials * minibatch,
        "full_evals": full_evals,
    }
    metric["total"] = n_val + bootstrap + trials * minibatch + full_evals
    return metric


def _summary_calls(settings: MiproSettings, n_train: int) -> int:
    """Proposer calls for the dataset summary: one per train batch plus the final summary."""
    if not (settings.use_dataset_summary and settings.summary_batches and n_train):
        return 0
    available = math.ceil(n_train / settings.summary_batch_size)
    return min(settings.summary_batches, available) + 1


def _promotions(trials: int, k: int, minibatch: int, n_val: int) -> int:
    if minibatch >= n_val or trials == 0:
        return 0
    return math.ceil(trials / k)


def _fit(
    settings: MiproSettings,
    available: int,
    minibatch: int,
    trials: int,
    k: int,
    n_val: int,
    notes: list[str],
) -> tuple[int, int]:
    """Shrink the values the user left open until trials and full evaluations fit."""

    def cost(m: int, t: int) -> int:
        return t * m + _promotions(t, k, m, n_val) * max(0, n_val - m)

    start_m, start_t = minibatch, trials
    while cost(minibatch, trials) > available:
        floor = min(n_val, MIN_MINIBATCH)
        if settings.minibatch_size is None and minibatch > floor:
            minibatch = max(floor, minibatch - max(1, minibatch // 5))
        elif settings.num_trials is None and trials > 0:
            trials -= 1
        else:
            notes.append(
                f"the explicit settings need {cost(minibatch, trials)} metric calls for the search"
                f" but the budget leaves {max(available, 0)}: the budget will end it early"
            )
            break
    if (minibatch, trials) != (start_m, start_t):
        notes.append(
            f"scaled to the budget: minibatch {start_m} -> {minibatch},"
            f" trials {start_t} -> {trials}"
        )
    return minibatch, trials
