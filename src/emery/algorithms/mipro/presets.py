"""Presets and the plan: how many choices, trials and rollouts a MIPRO run will use.

``light``, ``medium`` and ``heavy`` set the number of choices per stage N; the number of
trials grows with N and with the number of parameters (two per stage). Trials are
compared on the same val minibatch, sized by ``algorithms.separation`` to detect a
20-point difference between two typical candidates 4 times in 5 (55 examples; all of val
when val is smaller). When a metric-call budget is set, the minibatch stays at that size
and the budget decides how many trials it pays for: fewer candidates, each judged on
enough examples to separate a meaningful difference, rather than many on a handful (ten
trials on 5 examples each separate nothing). The choices per stage then shrink to the
trials (a stage offers no more instructions or demo sets than the trials can try), and
with them the proposals and the bootstrapping. The minibatch never shrinks to fit the
budget: a budget that cannot judge one trial on it plans none, and says so. Values set
explicitly are never changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from emery.algorithms.mipro.events import MiproPlanFields
from emery.algorithms.mipro.settings import MiproSettings, Preset
from emery.algorithms.separation import TYPICAL, examples_for, separation

MIN_CHOICES = 2
"""The fewest choices per stage (the original and one more)."""


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
    """The resolved numbers of one run and what they will cost (races priced at their
    leader's rest of val: a race that keeps more racers in the running costs more)."""

    preset: Preset

    def describe(self) -> str:
        """One line for the log and the CLI."""
        budget = "no limit" if self.budget_metric_calls is None else str(self.budget_metric_calls)
        return (
            f"mipro plan ({self.preset}): {self.num_instructions} instructions x "
            f"{self.num_demo_sets} demo sets per stage, {self.num_trials} trials (more while "
            f"the budget lasts; the seed's repair and one change at a time first) on minibatches "
            f"of {self.minibatch_size}, full val every {self.full_eval_every}; up to "
            f"{self.metric_calls['total']} metric calls (budget {budget}) and "
            f"{self.lm_calls['total']} LM calls ({self.lm_calls['task']} task, "
            f"{self.lm_calls['proposer']} proposer)"
            + (
                ""
                if self.separation is None
                else f"; separates {self.separation.describe('trials')}"
            )
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
    """Train examples a labeled demo set takes (0: no gold output can be a demo, as when
    the gold is a test suite: its slot among the demo sets goes to a bootstrapped one)."""
    fixed_instructions: int
    budget_metric_calls: int | None


def judging_minibatch(n_val: int) -> int:
    """The val examples a trial is judged on by default: enough to detect the separation
    target (``algorithms.separation``), all of val when val is smaller."""
    return min(n_val, examples_for(TYPICAL.target))


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
    minibatch = min(settings.minibatch_size or judging_minibatch(n_val), n_val) if n_val else 0
    bootstrap = _bootstrap_examples(settings, inputs, n_demo)
    budget = inputs.budget_metric_calls
    if budget is not None:
        fitted = _fit_to_budget(settings, inputs, budget, minibatch, trials, (n_instr, n_demo), k)
        minibatch, trials, bootstrap, (n_instr, n_demo), more = fitted
        notes += more
    metric = _metric_calls(n_val, bootstrap, trials, minibatch, k)
    summary_calls = _summary_calls(settings, inputs.n_train)
    wanted_proposals = max(0, n_instr - inputs.fixed_instructions)
    attempts = (
        settings.proposal_attempts
        if settings.proposal_attempts is not None
        else 2 * wanted_proposals
    )
    proposer = summary_calls + (attempts + retry_calls(attempts, wanted_proposals)) * inputs.stages
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
        separation=separation(minibatch, trials if budget is not None else None),
        bootstrapped_sets=bootstrapped_sets(n_demo, inputs),
    )


def bootstrapped_sets(demo_sets: int, inputs: PlanInputs) -> int:
    """The demo sets of a stage beside the seed's (or none) and the labeled one, which
    bootstrapping fills; the labeled one's slot too when there is no labeled set."""
    return max(0, demo_sets - 1 - int(inputs.labeled_examples > 0))


class _Fitted(NamedTuple):
    minibatch: int
    trials: int
    bootstrap: int
    choices: tuple[int, int]
    notes: list[str]


def _fit_to_budget(
    settings: MiproSettings,
    inputs: PlanInputs,
    budget: int,
    minibatch: int,
    trials: int,
    choices: tuple[int, int],
    k: int,
) -> _Fitted:
    """Trials, choices and bootstrapping the budget pays for at the judging minibatch
    (a race every ``k`` trials).

    The trials come from the budget left after the seed and the bootstrapping; the choices
    per stage (those not set) shrink to the trials, and the bootstrapping to the demo sets
    left, which frees calls for trials: two rounds settle it (the bootstrapping only
    shrinks, so the trials only grow)."""
    n_val = inputs.n_val
    notes: list[str] = []
    wanted_trials, wanted_choices = trials, choices
    n_instr, n_demo = choices

    def bootstrap_for(demo_sets: int) -> int:
        wanted = _bootstrap_examples(settings, inputs, demo_sets)
        return wanted if settings.bootstrap_examples is not None else min(wanted, budget // 4)

    bootstrap = bootstrap_for(n_demo)
    for _ in range(2):
        trials = _affordable_trials(
            settings, budget - n_val - bootstrap, minibatch, wanted_trials, k, n_val
        )
        n_instr = settings.num_instructions or min(wanted_choices[0], max(MIN_CHOICES, trials))
        n_demo = settings.num_demo_sets or min(wanted_choices[1], max(MIN_CHOICES, trials))
        bootstrap = min(bootstrap, bootstrap_for(n_demo))
    available = budget - n_val - bootstrap
    trials = _affordable_trials(settings, available, minibatch, wanted_trials, k, n_val)
    if trials == 0 and wanted_trials:
        notes.append(
            f"the budget cannot judge one trial on {minibatch} val examples after the seed:"
            " a smaller n_val or a larger budget lets the search run"
        )
    if settings.num_trials is not None:
        need = _cost(minibatch, trials, k, n_val)
        if need > available:
            notes.append(
                f"the explicit settings need {need} metric calls for the search"
                f" but the budget leaves {max(available, 0)}: the budget will end it early"
            )
    elif trials < wanted_trials:
        notes.append(
            f"the budget pays for {trials} of {wanted_trials} trials judged on {minibatch}"
            f" val examples each: fewer candidates, each judged on enough examples to tell"
        )
    if (n_instr, n_demo) != wanted_choices:
        notes.append(
            f"choices per stage cut to the trials: {wanted_choices[0]} -> {n_instr}"
            f" instructions, {wanted_choices[1]} -> {n_demo} demo sets"
        )
    if bootstrap < _bootstrap_examples(settings, inputs, wanted_choices[1]):
        notes.append(
            f"bootstrapping capped at {bootstrap} rollouts"
            if bootstrap
            else f"no bootstrapping: {n_demo} demo sets are the original and the labeled one"
        )
    return _Fitted(minibatch, trials, bootstrap, (n_instr, n_demo), notes)


def _affordable_trials(
    settings: MiproSettings, available: int, minibatch: int, wanted: int, k: int, n_val: int
) -> int:
    """The trials (at most ``wanted``; all of them when set explicitly) whose minibatches
    and races the ``available`` metric calls pay for."""
    if settings.num_trials is not None:
        return settings.num_trials
    trials = wanted
    while trials > 0 and _cost(minibatch, trials, k, n_val) > available:
        trials -= 1
    return trials


def _bootstrap_examples(settings: MiproSettings, inputs: PlanInputs, n_demo: int) -> int:
    """Train examples the teacher may run to find passing demos (before any budget cap)."""
    pool = max(0, inputs.n_train - inputs.labeled_examples)
    wanted = settings.max_bootstrapped_demos * bootstrapped_sets(n_demo, inputs)
    if settings.bootstrap_examples is not None:
        return min(pool, settings.bootstrap_examples)
    return min(pool, max(2 * wanted, 10)) if wanted else 0


def _metric_calls(
    n_val: int, bootstrap: int, trials: int, minibatch: int, k: int
) -> dict[str, int]:
    """The planned metric calls of each phase and in total (``_race_calls``)."""
    races = _race_calls(trials, k, minibatch, n_val)
    metric = {
        "baseline": n_val,
        "bootstrap": bootstrap,
        "trials": trials * minibatch,
        "full_evals": races,
    }
    metric["total"] = n_val + bootstrap + trials * minibatch + races
    return metric


def _summary_calls(settings: MiproSettings, n_train: int) -> int:
    """Proposer calls for the dataset summary: one per train batch plus the final summary."""
    if not (settings.use_dataset_summary and settings.summary_batches and n_train):
        return 0
    available = math.ceil(n_train / settings.summary_batch_size)
    return min(settings.summary_batches, available) + 1


def _race_calls(trials: int, k: int, minibatch: int, n_val: int) -> int:
    """What the races typically cost: one every ``k`` trials (and one at the end), each
    taking its leader from the minibatch to all of val (the seed's scores are free, and so
    is the minibatch prefix each racer was scored on already). Racers the evidence drops
    early cost a few examples more each; at worst every racer reaches all of val, but
    pricing that left a third of the budget unspent: the trials go on while the budget
    pays one more and the final leader's rest of val (``mipro.trials``), so the plan
    counts the trials that rule runs."""
    if minibatch >= n_val or trials == 0:
        return 0
    return math.ceil(trials / k) * (n_val - minibatch)


def retry_calls(attempts: int, missing: int) -> int:
    """The most calls of a stage's retry round (asked when every proposal of the first
    round was rejected): one per missing choice, at most ``attempts``."""
    return max(0, min(attempts, missing))


def _cost(minibatch: int, trials: int, k: int, n_val: int) -> int:
    return trials * minibatch + _race_calls(trials, k, minibatch, n_val)
